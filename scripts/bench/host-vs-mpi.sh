#!/usr/bin/env bash
# mycoll's host collectives beside Open MPI, in the same processes under
# mpirun (mycoll-perf --vs mpi: the same buffers, one after the other).
#
#   scripts/bench/host-vs-mpi.sh OUTDIR [NP...]          NP: ranks; default "2 4 8"
#
# Writes OUTDIR/host-<transport>-<NP>ranks-<collective>-vs-mpi.jsonl
# (mycoll-perf --json: what docs/perf/ keeps) and .txt (the table).
#
# Environment (defaults in brackets):
#   PERF        mycoll-perf binary built with MPI found [build/tools/mycoll-perf/mycoll-perf]
#   TRANSPORTS  mycoll transports [shm]; socket and ucx put both libraries on TCP
#               (Open MPI: --mca btl tcp,self --mca pml ob1), shm leaves Open MPI its default
#   COLLS       [all_reduce]
#   MIN MAX FACTOR ITERS WARMUP CHECK   [1M 256M 4 5 2 0]
#   EXTRA       more mycoll-perf flags;  MPIRUN_ARGS  more mpirun flags
#   TIMEOUT     seconds per run [900]
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
out=${1:?usage: scripts/bench/host-vs-mpi.sh OUTDIR [NP...]}
shift
nps=${*:-2 4 8}
perf=${PERF:-build/tools/mycoll-perf/mycoll-perf}
[ -x "$perf" ] || { echo "host-vs-mpi: no mycoll-perf at $perf (set PERF)" >&2; exit 2; }
command -v mpirun > /dev/null || { echo "host-vs-mpi: mpirun not found" >&2; exit 2; }
mkdir -p "$out"
rc=0
for transport in ${TRANSPORTS:-shm}; do
  mca=()
  # shellcheck disable=SC2054  # "tcp,self" is one value
  [ "$transport" = shm ] || mca=(--mca btl tcp,self --mca pml ob1)
  net=()
  [ "$transport" = shm ] || net=(-x "MYCOLL_NET=$transport")
  for np in $nps; do
    for coll in ${COLLS:-all_reduce}; do
      name=host-$transport-${np}ranks-$coll-vs-mpi
      # shellcheck disable=SC2086  # EXTRA and MPIRUN_ARGS are lists of flags
      timeout "${TIMEOUT:-900}" mpirun --allow-run-as-root --oversubscribe "${mca[@]}" -np "$np" \
        -x "MYCOLL_TRANSPORT=$transport" "${net[@]}" ${MPIRUN_ARGS:-} \
        "$perf" "$coll" -b "${MIN:-1M}" -e "${MAX:-256M}" -f "${FACTOR:-4}" -n "${ITERS:-5}" \
        -w "${WARMUP:-2}" -c "${CHECK:-0}" --vs mpi ${EXTRA:-} --json "$out/$name.jsonl" \
        > "$out/$name.txt" 2>&1 || { echo "$name: FAILED (see $out/$name.txt)"; rc=1; }
      echo "== $name"
      grep -E "^# (Min ratio|Out of bounds)" "$out/$name.txt"
    done
  done
done
exit $rc
