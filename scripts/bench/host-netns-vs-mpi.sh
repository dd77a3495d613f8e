#!/usr/bin/env bash
# mycoll's socket transport beside Open MPI's TCP transport with every rank
# on a "host" of its own: a network namespace per rank (tests/e2e/netns.sh:
# veth legs on one bridge), so every message crosses a network stack as
# between machines. Run as root; Open MPI reaches the namespaces through a
# launch agent this script writes.
#
#   scripts/bench/host-netns-vs-mpi.sh OUTDIR NAME [NP]       NP: ranks [2]
#
# Writes OUTDIR/NAME.jsonl (every run's rows, each with "sweep" and "half":
# the file docs/perf/ keeps) and OUTDIR/NAME-<sweep>-<half>.txt (the tables).
#
# Placement: rank i runs in namespace i. Open MPI would bind every
# namespace's one rank to core 0 (each daemon thinks it has a machine of its
# own), which put both ranks of a 2-rank run on one core and Open MPI's
# calls at 4-8 ms (session 35); here the agent pins namespace i's daemon
# to a core and mpirun binds nothing further:
#   PLACE=cyclic   namespace i on core i mod cores      (default)
#   PLACE=block    namespace i on core i * cores / NP
# More ranks than cores: Open MPI's ranks then yield when idle
# (mpi_yield_when_idle 1), as under mpirun --oversubscribe on one host;
# mycoll's yield by themselves.
#
# Environment (defaults in brackets): PERF [build/tools/mycoll-perf/mycoll-perf],
# COLLS [all], SWEEPS [3], SMALL ["-b 16 -e 64K -f 4 -n 200 -w 20"],
# LARGE ["-b 256K -e 64M -f 4 -n 10 -w 2"] (either "" to skip it), EXTRA
# [-B 3 -c 1], ALGO (MYCOLL_ALGO for mycoll), ENVS (more VAR=value words
# for every rank, e.g. "MYCOLL_SOCKET_BUFFER_BYTES=4M"), SUBNET [10.77.0],
# TIMEOUT per run [900].
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
usage="usage: scripts/bench/host-netns-vs-mpi.sh OUTDIR NAME [NP]"
out=${1:?$usage}
name=${2:?$usage}
np=${3:-2}
perf=${PERF:-build/tools/mycoll-perf/mycoll-perf}
subnet=${SUBNET:-10.77.0}
cores=$(nproc)
[ -x "$perf" ] || { echo "host-netns-vs-mpi: no mycoll-perf at $perf (set PERF)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "host-netns-vs-mpi: needs root (network namespaces)" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)

sh tests/e2e/netns.sh up "$np" nb "$subnet" || exit 1
trap 'sh tests/e2e/netns.sh down "$np" nb' EXIT
# mpirun itself stays in the root namespace: give it an address on the bridge.
ip addr add "$subnet.254/24" dev nbbr

agent=$out/.netns-agent
# shellcheck disable=SC2016  # the agent evaluates these
if [ "${PLACE:-cyclic}" = block ]; then core='$(( i * CORES / NP ))'; else core='$(( i % CORES ))'; fi
cat > "$agent" <<EOF
#!/bin/sh
# mpirun's launch agent: host $subnet.<i+1> is namespace nbh<i>.
CORES=$cores NP=$np
host=\$1; shift; i=\$(( \${host##*.} - 1 ))
exec ip netns exec nbh\$i taskset -c $core sh -c "\$*"
EOF
chmod +x "$agent"

hosts=$subnet.1
for i in $(seq 2 "$np"); do hosts=$hosts,$subnet.$i; done
# shellcheck disable=SC2054  # "tcp,self" is one value
mca=(--mca plm_rsh_agent "$agent" --mca oob_tcp_if_include "$subnet.0/24"
     --mca btl_tcp_if_include "$subnet.0/24" --mca btl tcp,self --mca pml ob1)
[ "$np" -gt "$cores" ] && mca+=(--mca mpi_yield_when_idle 1)

envs=()
for kv in ${ENVS:-}; do envs+=(-x "$kv"); done

rc=0
rm -f "$out/$name.jsonl"
port=$((29000 + RANDOM % 2000))
for sweep in $(seq 1 "${SWEEPS:-3}"); do
  for half in small large; do
    if [ $half = small ]; then args=${SMALL-"-b 16 -e 64K -f 4 -n 200 -w 20"}; else args=${LARGE-"-b 256K -e 64M -f 4 -n 10 -w 2"}; fi
    [ -n "$args" ] || continue
    txt=$out/$name-$sweep-$half.txt
    ok=0
    # Open MPI 4.1's daemon now and then dies in hwloc at start (before any
    # rank runs): a launch that never reached mycoll-perf is tried again.
    for _ in 1 2 3 4; do
      port=$((port + 1))
      rm -f "$out/.rows.jsonl"
      # shellcheck disable=SC2086  # args and EXTRA are lists of flags
      timeout "${TIMEOUT:-900}" mpirun --allow-run-as-root --bind-to none "${mca[@]}" --host "$hosts" \
        -np "$np" -x MYCOLL_TRANSPORT=socket -x MYCOLL_NET=socket ${ALGO:+-x MYCOLL_ALGO=$ALGO} "${envs[@]}" -x "MYCOLL_ADDR=$subnet.1:$port" \
        "$perf" "${COLLS:-all}" --vs mpi $args ${EXTRA:--B 3 -c 1} --json "$out/.rows.jsonl" \
        > "$txt" 2>&1 && { ok=1; break; }
      grep -q "mycoll-perf" "$txt" && break
    done
    if [ $ok = 1 ]; then
      sed "s/^{/{\"sweep\":$sweep,\"half\":\"$half\",\"place\":\"${PLACE:-cyclic}\",/" \
        "$out/.rows.jsonl" >> "$out/$name.jsonl"
    else
      echo "$name sweep $sweep $half: FAILED (see $txt)"; rc=1
    fi
    echo "== $name sweep $sweep $half"
    grep -E "^# (Min ratio|Out of bounds)" "$txt"
  done
done
rm -f "$out/.rows.jsonl"
exit $rc
