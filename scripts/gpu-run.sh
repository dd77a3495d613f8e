#!/usr/bin/env bash
# On a machine with NVIDIA GPUs: build with whatever optional packages exist,
# run the GPU tests, compute-sanitizer over a subset, and the benchmark beside
# NCCL; logs go to OUTDIR (default ./gpu-logs).
#   scripts/gpu-run.sh OUTDIR [build|test|sanitize|bench|all]...   (default: all)
# Env: PARTS (named parts of the GPU suite, below; default all), GTEST_FILTER
#      (instead of the parts), SANITIZE_FILTER, BENCH_COLLS, BENCH_MAX (e.g. 2G),
#      BENCH_NP (GPUs, default all), JOBS.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-gpu-logs}; shift || true
steps=${*:-all}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0           # never NVLink multicast (shared hosts)
export PATH=/usr/local/cuda/bin:$PATH
build=${BUILD_DIR:-build-gpu}
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
has() { [[ " $steps " == *" $1 "* || " $steps " == *" all "* ]]; }
rc=0

if has build; then
  { nvidia-smi; nvidia-smi topo -m; } > "$out/machine.txt" 2>&1
  { cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
    ninja -C "$build" -j "${JOBS:-$(nproc)}"; } > "$out/build.log" 2>&1 || { echo "build failed"; tail -30 "$out/build.log"; exit 1; }
  echo "build ok ($ngpu GPUs)"
fi
# The GPU suite in named parts, each meant to finish within 10 minutes on
# one H100/H200 with every rank sharing it (ranks round-robin over the GPUs
# present; with 8 GPUs each rank has its own). PARTS picks some:
#   PARTS="threads shared" scripts/gpu-run.sh OUT test
declare -A part=(
  [threads]="Gpu/GpuThreads.*:GpuStreams.*"
  [shared]="Gpu/GpuShared.*:Gpu5/*"
  [procs2]="Gpu/GpuProcesses.*/2gpus_*"
  [procs3]="Gpu/GpuProcesses.*/3gpus_*"
  [procs4]="Gpu/GpuProcesses.*/4gpus_*"
  [procs8a]="Gpu/GpuProcesses.*/8gpus_auto:Gpu/GpuProcesses.*/8gpus_ring"
  [procs8b]="Gpu/GpuProcesses.*/8gpus_tree:Gpu/GpuProcesses.*/8gpus_rhd"
  [procs8c]="Gpu/GpuProcesses.*/8gpus_direct:Gpu/GpuProcesses.*/8gpus_twoshot"
  [kernels]="Gpu/GpuOneShot.*:Gpu/GpuTwoShot.*"
  [llcoll]="Gpu/GpuLlColl.*"
  [ring]="Gpu/GpuRingKernel.*"
  [direct]="Gpu/GpuDirectKernel.*"
  [p2p]="Gpu/GpuP2pLl.*:GpuP2pLlGiveUp.*:GpuP2pLlWide.*"
  [graphs]="GpuGraph.*"
  [giveup]="*GiveUp.*:Gpu/GpuPeerFailure.*"
  [mismatch]="Gpu/GpuMismatch.*:GpuCallCheckOff.*:Gpu/GpuP2pSizeMismatch.*"
  [large]="GpuLarge.*"
  [proxied]="Gpu/GpuProxied.*"
)
# Part nccl is no gtest filter: the nccl.h program (tests/nccl) on GPU
# buffers, forked as 2, 3 and 5 ranks sharing the GPUs there are.
order="threads shared procs2 procs3 procs4 kernels llcoll ring direct p2p graphs giveup mismatch proxied large procs8a procs8b procs8c nccl"
if has test; then
  if [ -n "${GTEST_FILTER:-}" ]; then
    "$build/tests/mycoll_gpu_tests" --gtest_filter="$GTEST_FILTER" > "$out/gpu-tests.log" 2>&1 || rc=1
    grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]|FAILED:" "$out/gpu-tests.log" | head -40
  else
    for p in ${PARTS:-$order}; do
      s=$(date +%s)
      if [ "$p" = nccl ]; then
        r=ok
        for np in 2 3 5; do
          timeout -k 10 "${PART_TIMEOUT:-600}" "$build/tests/nccl/nccl_api_test" --np $np --mem cuda \
            >> "$out/gpu-tests-$p.log" 2>&1 || { r=FAILED; rc=1; }
        done
        grep -E "^\[nccl_api_test\]" "$out/gpu-tests-$p.log" | grep -v PASS | head -10
        echo "part $p: $r ($(( $(date +%s) - s )) s)"
        continue
      fi
      timeout -k 10 "${PART_TIMEOUT:-600}" "$build/tests/mycoll_gpu_tests" --gtest_filter="${part[$p]}" \
        > "$out/gpu-tests-$p.log" 2>&1 && r=ok || { r=FAILED; rc=1; }
      echo "part $p: $r ($(( $(date +%s) - s )) s)"
      grep -E "^\[  FAILED  \] [A-Z]" "$out/gpu-tests-$p.log" | head -10
    done
  fi
fi
if has sanitize; then
  for tool in memcheck racecheck; do
    compute-sanitizer --tool $tool --target-processes all --error-exitcode 9 \
      "$build/tests/mycoll_gpu_tests" --gtest_filter="${SANITIZE_FILTER:-GpuSanitize.Subset:Gpu/GpuShared.*/3ranks}" \
      > "$out/sanitizer-$tool.log" 2>&1 && echo "sanitizer $tool: clean" || { echo "sanitizer $tool: FAILED"; rc=1; }
    grep -E "ERROR SUMMARY|Error|PASSED|FAILED" "$out/sanitizer-$tool.log" | head -5
  done
fi
if has bench; then
  np=${BENCH_NP:-$ngpu}
  for coll in ${BENCH_COLLS:-all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv}; do
    "$build/tools/mycoll-perf/mycoll-perf" "$coll" --mem cuda --np "$np" -b 8 -e "${BENCH_MAX:-2G}" -f 2 \
      -n "${BENCH_ITERS:-20}" -w 5 -c 0 --vs nccl --json "$out/bench-$coll-${np}gpu.json" \
      > "$out/bench-$coll-${np}gpu.txt" 2>&1 || rc=1
    tail -4 "$out/bench-$coll-${np}gpu.txt"
  done
fi
exit $rc
