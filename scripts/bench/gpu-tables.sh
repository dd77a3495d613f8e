#!/usr/bin/env bash
# The GPU tables of docs/performance.md: every collective beside NCCL in the
# same processes, one process per GPU, out of place and in place, the fastest
# of 3 batches of 10 timed calls per size.
#
#   scripts/bench/gpu-tables.sh OUTDIR [NP...]        NP: GPUs (ranks); default "4 2"
#
# Writes OUTDIR/gpu-<NP>gpus-<collective>-vs-nccl.jsonl (mycoll-perf --json: what
# docs/perf/ keeps, as gpu-<machine>-<NP>gpus-<collective>-vs-nccl.jsonl) and .txt
# (mycoll-perf's table); prints each table's summary. Exit status 1 if a run failed.
#
# Environment (defaults in brackets):
#   PERF     mycoll-perf binary [build-gpu/tools/mycoll-perf/mycoll-perf]
#            (scripts/gpu-run.sh OUT build makes it)
#   COLLS    collectives [all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv]
#   MIN MAX FACTOR   sizes [8, 1G (2G for all_reduce on 4 or more GPUs), 8]
#   ITERS WARMUP BEST_OF CHECK   -n -w -B -c [10 10 3 0]
#   EXTRA    more mycoll-perf flags, e.g. "-t 2" (2 ranks per process) or "-G 10"
#   TIMEOUT  seconds per table [600]
# MYCOLL_* and NCCL_* variables reach both libraries as usual; NVLink
# multicast stays off (mycoll-perf forces NCCL_NVLS_ENABLE=0).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
out=${1:?usage: scripts/bench/gpu-tables.sh OUTDIR [NP...]}
shift
nps=${*:-4 2}
perf=${PERF:-build-gpu/tools/mycoll-perf/mycoll-perf}
[ -x "$perf" ] || { echo "gpu-tables: no mycoll-perf at $perf (set PERF)" >&2; exit 2; }
mkdir -p "$out"
rc=0
for np in $nps; do
  for coll in ${COLLS:-all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv}; do
    max=${MAX:-1G}
    [ -z "${MAX:-}" ] && [ "$coll" = all_reduce ] && [ "$np" -ge 4 ] && max=2G
    name=gpu-${np}gpus-$coll-vs-nccl
    # shellcheck disable=SC2086  # EXTRA is a list of flags
    timeout "${TIMEOUT:-600}" "$perf" "$coll" --mem cuda --np "$np" --vs nccl \
      -b "${MIN:-8}" -e "$max" -f "${FACTOR:-8}" -n "${ITERS:-10}" -w "${WARMUP:-10}" \
      -B "${BEST_OF:-3}" -c "${CHECK:-0}" ${EXTRA:-} --json "$out/$name.jsonl" \
      > "$out/$name.txt" 2>&1 || { echo "$name: FAILED (see $out/$name.txt)"; rc=1; }
    echo "== $name"
    grep -E "^# (Min ratio|Out of bounds)" "$out/$name.txt"
  done
done
exit $rc
