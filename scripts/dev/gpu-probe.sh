#!/usr/bin/env bash
# Developer probe on a GPU machine: build, a correctness subset, then latency
# and bandwidth sweeps beside NCCL. Usage: scripts/dev/gpu-probe.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?OUTDIR}; mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 PATH=/usr/local/cuda/bin:$PATH
b=${BUILD_DIR:-/tmp/b}
np=${NP:-$(nvidia-smi -L | wc -l)}
t0=$(date +%s)
{ cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release && ninja -C $b -j$(nproc) mycoll_gpu_tests mycoll-perf; } > $out/build.log 2>&1 || { tail -40 $out/build.log; exit 1; }
echo "build $(( $(date +%s) - t0 ))s"
P=$b/tools/mycoll-perf/mycoll-perf
if [ -n "${TESTS:-}" ]; then
  timeout ${TEST_TIMEOUT:-300} $b/tests/mycoll_gpu_tests --gtest_filter="$TESTS" > $out/tests.log 2>&1; echo "tests rc=$?"
  grep -E "^\[  (PASSED|FAILED) |^\[       OK|FAILED|Failure" $out/tests.log | head -30
  echo "tests $(( $(date +%s) - t0 ))s"
fi
bench() { local name=$1; shift; timeout 120 "$@" > $out/$name.txt 2>&1; echo "== $name rc=$?"; grep -vE "^#" $out/$name.txt | grep -E "^ *[0-9]" | awk '{printf "%11s my %8s us %7s GB/s | nccl %8s us %7s GB/s | %s\n", $1, $6, $8, $(NF-2), $(NF-1), $NF}' | head -40; }
eval "${BENCH:-}"
echo "total $(( $(date +%s) - t0 ))s"
