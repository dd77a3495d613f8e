# Session 4 final (4 GPUs): 48 channels by default, fused ring kernel, LL p2p kernel, AR rhd <= 8M.
A="--mem cuda --np 4 -n 10 -w 10 -c 0 --vs nccl"
MYCOLL_ALGO=ring MYCOLL_GPU_RING_BYTES=0 bench planring48-all_reduce $P all_reduce $A -b 256M -e 1G -f 4
MYCOLL_ALGO=ring MYCOLL_NCHANNELS=64 bench ringk64-all_reduce $P all_reduce $A -b 256M -e 1G -f 4
for c in all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv; do
  e=1G; [ $c = all_reduce ] && e=2G
  bench gpu4-$c $P $c $A -b 8 -e $e -f 8
done
