#!/bin/sh
# ctest driver for example_mpirun_allreduce: mpirun -np 3 on this host with
# a free rendezvous port. Prints "SKIP: ..." (ctest reports the test as
# skipped) when mpirun is not installed.
#   run_mpirun_test.sh <path to mpirun_allreduce> [np]
exe=$1; np=${2:-3}
mpirun=$(command -v mpirun) || { echo "SKIP: mpirun not found"; exit 0; }
# The port comes from below the kernel's ephemeral range, so no connection
# another test makes meanwhile can take it as its source port (a port that
# bind(0) handed out was taken that way under a parallel ctest before rank 0
# listened on it), and it is free now.
port=$(python3 -c '
import random, socket
lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
for _ in range(200):
    p = random.randrange(10000, min(lo, 29500))
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
    except OSError:
        continue
    finally:
        s.close()
    print(p)
    break
' 2>/dev/null)
[ -n "$port" ] || port=$((10000 + $$ % 19500))
# Open MPI refuses to run as root without --allow-run-as-root and more ranks
# than cores without --oversubscribe.
exec "$mpirun" --allow-run-as-root --oversubscribe -np "$np" \
  -x MYCOLL_ADDR=127.0.0.1:"$port" -x MYCOLL_TIMEOUT=60 "$exe" --count 100003
