#!/bin/sh
# Test hosts for the multi-host tests: network namespaces mycoll_h0..h(N-1),
# each with a veth leg on bridge mycollbr0, addresses 10.231.0.(i+1)/24.
#   netns.sh up N   |   netns.sh down N
set -e
cmd=$1; n=${2:-3}
down() {
  for i in $(seq 0 $((n - 1))); do
    ip netns del mycoll_h$i 2>/dev/null || true
    ip link del mycv$i 2>/dev/null || true
  done
  ip link del mycollbr0 2>/dev/null || true
}
if [ "$cmd" = down ]; then down; exit 0; fi
down
ip link add mycollbr0 type bridge
ip link set mycollbr0 up
for i in $(seq 0 $((n - 1))); do
  ip netns add mycoll_h$i
  ip link add mycv$i type veth peer name mycvp$i
  ip link set mycvp$i netns mycoll_h$i
  ip link set mycv$i master mycollbr0
  ip link set mycv$i up
  ip netns exec mycoll_h$i ip addr add 10.231.0.$((i + 1))/24 dev mycvp$i
  ip netns exec mycoll_h$i ip link set mycvp$i up
  ip netns exec mycoll_h$i ip link set lo up
done
# Wait until every host reaches every other one.
for i in $(seq 0 $((n - 1))); do
  for j in $(seq 0 $((n - 1))); do
    k=0
    until ip netns exec mycoll_h$i ping -c1 -W1 10.231.0.$((j + 1)) >/dev/null 2>&1; do
      k=$((k + 1)); [ $k -lt 10 ] || { echo "host $i cannot reach host $j" >&2; exit 1; }
    done
  done
done
