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
{ cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release ${CMAKE_ARGS:-} && ninja -C $b -j$(nproc) ${TARGETS:-mycoll_gpu_tests mycoll-perf}; } > $out/build.log 2>&1 || { tail -40 $out/build.log; exit 1; }
echo "build $(( $(date +%s) - t0 ))s"
P=$b/tools/mycoll-perf/mycoll-perf
if [ -n "${TESTS:-}" ]; then
  timeout ${TEST_TIMEOUT:-300} $b/tests/mycoll_gpu_tests --gtest_filter="$TESTS" > $out/tests.log 2>&1; echo "tests rc=$?"
  grep -E "^\[  (PASSED|FAILED) |^\[       OK|FAILED|Failure" $out/tests.log | head -30
  echo "tests $(( $(date +%s) - t0 ))s"
fi
bench() { local name=$1; shift; timeout 150 "$@" > $out/$name.txt 2>&1; local rc=$?; { echo "== $name rc=$rc"; cat $out/$name.txt; } >> $out/all.txt; rm -f $out/$name.txt
  echo "== $name rc=$rc"; tail -n +1 $out/all.txt | awk -v n="== $name rc=$rc" '$0==n{p=1;next} /^== /{p=0} p' | grep -E "^ *[0-9]" | awk '{ if (NF>=16) printf "%11s my %8s us | nccl %8s us | %s\n", $1, $6, $(NF-2), $NF; else printf "%11s my %8s us\n", $1, $6 }' | head -40; }
eval "${BENCH:-}"
echo "total $(( $(date +%s) - t0 ))s"
