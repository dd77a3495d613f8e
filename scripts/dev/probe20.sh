# Session 5: chain broadcast/reduce in the ring kernel, direct kernel for all-to-all; vs the plan kernel at mid sizes.
for np in 2 4; do
  for c in alltoall broadcast reduce; do
    bench gpu$np-$c $P $c --mem cuda --np $np -n 10 -w 10 -c 0 --vs nccl -b 1M -e 1G -f 4
  done
  MYCOLL_GPU_DIRECT_BYTES=0 bench gpu$np-alltoall-plan $P alltoall --mem cuda --np $np -n 10 -w 10 -c 0 -b 1M -e 64M -f 4
  MYCOLL_GPU_RING_BYTES=0 bench gpu$np-broadcast-plan $P broadcast --mem cuda --np $np -n 10 -w 10 -c 0 -b 1M -e 64M -f 4
  MYCOLL_GPU_RING_BYTES=0 bench gpu$np-reduce-plan $P reduce --mem cuda --np $np -n 10 -w 10 -c 0 -b 1M -e 64M -f 4
done
