#!/bin/sh
# Test hosts for the multi-host tests (tests/e2e/netns_hosts.h): network
# namespaces ${P}h0..h(N-1), each with a veth leg ${P}p<i> (its other end
# ${P}v<i>) on bridge ${P}br, addresses SUBNET.(i+1)/24.
#   netns.sh up N P SUBNET   |   netns.sh down N P
# P names the hosts after the test process that made them: two runs of the
# suites at once (two ctest runs on one machine) each have their own, and
# neither's "down" (also run first by "up") touches the other's.
set -e
cmd=$1; n=$2; P=$3; subnet=$4
case $P in
  '' | *[!a-z0-9]*) echo "netns.sh: prefix must be lower-case letters and digits" >&2; exit 2 ;;
esac
# Interface names hold at most 15 characters: ${P}br, ${P}v<i>, ${P}p<i>.
[ ${#P} -le 10 ] || { echo "netns.sh: prefix longer than 10 characters" >&2; exit 2; }
down() {
  for i in $(seq 0 $((n - 1))); do
    ip netns del ${P}h$i 2>/dev/null || true
    ip link del ${P}v$i 2>/dev/null || true
  done
  ip link del ${P}br 2>/dev/null || true
}
if [ "$cmd" = down ]; then down; exit 0; fi
[ -n "$subnet" ] || { echo "netns.sh up: no subnet" >&2; exit 2; }
down
ip link add ${P}br type bridge
ip link set ${P}br up
for i in $(seq 0 $((n - 1))); do
  ip netns add ${P}h$i
  ip link add ${P}v$i type veth peer name ${P}p$i
  ip link set ${P}p$i netns ${P}h$i
  ip link set ${P}v$i master ${P}br
  ip link set ${P}v$i up
  ip netns exec ${P}h$i ip addr add $subnet.$((i + 1))/24 dev ${P}p$i
  ip netns exec ${P}h$i ip link set ${P}p$i up
  ip netns exec ${P}h$i ip link set lo up
done
# Wait until every host reaches every other one.
for i in $(seq 0 $((n - 1))); do
  for j in $(seq 0 $((n - 1))); do
    k=0
    until ip netns exec ${P}h$i ping -c1 -W1 $subnet.$((j + 1)) >/dev/null 2>&1; do
      k=$((k + 1)); [ $k -lt 10 ] || { echo "host $i cannot reach host $j" >&2; exit 1; }
    done
  done
done
