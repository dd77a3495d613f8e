#!/bin/sh
# ctest driver for example_mpirun_allreduce: mpirun -np 3 on this host with
# a free rendezvous port. Prints "SKIP: ..." (ctest reports the test as
# skipped) when mpirun is not installed.
#   run_mpirun_test.sh <path to mpirun_allreduce> [np]
exe=$1; np=${2:-3}
mpirun=$(command -v mpirun) || { echo "SKIP: mpirun not found"; exit 0; }
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null)
[ -n "$port" ] || port=$((20000 + $$ % 30000))
# Open MPI refuses to run as root without --allow-run-as-root and more ranks
# than cores without --oversubscribe.
exec "$mpirun" --allow-run-as-root --oversubscribe -np "$np" \
  -x MYCOLL_ADDR=127.0.0.1:"$port" -x MYCOLL_TIMEOUT=60 "$exe" --count 100003
