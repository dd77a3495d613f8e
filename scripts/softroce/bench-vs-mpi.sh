#!/bin/bash
# mycoll over verbs (Soft-RoCE rxe0) beside Open MPI over TCP, 2 ranks, inside
# the Soft-RoCE VM. Run from the host:
#   scripts/softroce/softroce.sh -- scripts/softroce/bench-vs-mpi.sh BUILD_DIR
# BUILD_DIR must not be under /tmp (the guest mounts its own /tmp).
set -u
build=$(cd "${1:-build}" && pwd)
hostname softroce-vm          # Open MPI refuses the guest's "(none)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec mpirun --allow-run-as-root --oversubscribe --mca btl tcp,self --mca pml ob1 -np 2 \
  -x MYCOLL_TRANSPORT=ib -x MYCOLL_ADDR=127.0.0.1:29777 \
  "$build/tools/mycoll-perf/mycoll-perf" all_reduce -b 64K -e 16M -f 4 -n 5 -w 2 -c 1 --vs mpi
