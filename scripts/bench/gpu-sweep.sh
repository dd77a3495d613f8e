#!/usr/bin/env bash
# One mycoll-perf run repeated under several settings, side by side: a tuning
# variable swept, one kernel against another, or a build before and after a
# change, in the same run layout.
#
#   scripts/bench/gpu-sweep.sh OUTDIR NAME SETTING [SETTING...] -- MYCOLL_PERF_ARGS...
#
# A SETTING is a space-separated list of VAR=VALUE for that run's environment
# ("" = the defaults); the variable PERF in a setting picks the mycoll-perf
# binary for that run (a build before a change against one after it).
# Examples:
#   # the fused ring kernel against the plan kernel's ring, 4 GPUs
#   scripts/bench/gpu-sweep.sh out ring-kernel-vs-plan "MYCOLL_ALGO=ring" \
#     "MYCOLL_ALGO=ring MYCOLL_GPU_RING_BYTES=0" -- all_reduce --mem cuda --np 4 -b 16M -e 1G -f 4 --vs nccl
#   # channels of point-to-point batches
#   scripts/bench/gpu-sweep.sh out sendrecv-channels "MYCOLL_NCHANNELS=32" "MYCOLL_NCHANNELS=64" \
#     -- sendrecv --mem cuda --np 2 -b 2M -e 1G -f 8 -n 10 -w 10 -B 3 -c 0 --vs nccl
#   # before / after a change, 4 ranks sharing one GPU in one process
#   scripts/bench/gpu-sweep.sh out before-after "PERF=/tmp/before/tools/mycoll-perf/mycoll-perf" "" \
#     -- all_reduce --mem cuda -t 4 -b 8 -e 256M -f 4 -n 20 -w 5 -B 3 -c 0
#
# Writes OUTDIR/NAME.jsonl (every run's rows, each with "setting": its list;
# the file docs/perf/ keeps) and OUTDIR/NAME-<k>.txt (run k's table), then
# prints busbw per size per setting (tools/mycoll-perf/plot.py --text).
# Environment: PERF (default binary [build-gpu/tools/mycoll-perf/mycoll-perf]),
# TIMEOUT seconds per run [600]. Exit status 1 if a run failed.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
usage="usage: scripts/bench/gpu-sweep.sh OUTDIR NAME SETTING [SETTING...] -- MYCOLL_PERF_ARGS..."
out=${1:?$usage}
name=${2:?$usage}
shift 2
settings=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do settings+=("$1"); shift; done
if [ $# -lt 2 ] || [ ${#settings[@]} -eq 0 ]; then
  echo "$usage" >&2
  exit 2
fi
shift
mkdir -p "$out"
: > "$out/$name.jsonl"
rc=0
k=0
for setting in "${settings[@]}"; do
  k=$((k + 1))
  perf=${PERF:-build-gpu/tools/mycoll-perf/mycoll-perf}
  envs=()
  for kv in $setting; do
    case $kv in
      PERF=*) perf=${kv#PERF=} ;;
      *=*) envs+=("$kv") ;;
      *) echo "gpu-sweep: '$kv' in setting '$setting' is not VAR=VALUE" >&2; exit 2 ;;
    esac
  done
  rows=$out/$name-$k.jsonl
  echo "== $name-$k: ${setting:-defaults}"
  env "${envs[@]}" timeout "${TIMEOUT:-600}" "$perf" "$@" --json "$rows" > "$out/$name-$k.txt" 2>&1 ||
    { echo "FAILED (see $out/$name-$k.txt)"; rc=1; }
  # Tag every row with its setting (JSON string: backslashes and quotes escaped).
  tag=$(printf '%s' "${setting:-defaults}" | sed 's/\\/\\\\/g; s/"/\\"/g')
  [ -f "$rows" ] && sed "s/}\$/,\"setting\":\"$tag\"}/" "$rows" >> "$out/$name.jsonl" && rm -f "$rows"
done
if command -v python3 > /dev/null; then
  python3 tools/mycoll-perf/plot.py --text "$out/$name.jsonl" || rc=1
fi
exit $rc
