# Session 4 final tables: 64 channels (ring kernel), plan kernel <= 32, LL p2p kernel; 4 GPUs then 2 GPUs.
for c in all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv; do
  e=1G; [ $c = all_reduce ] && e=2G
  bench gpu4-$c $P $c --mem cuda --np 4 -n 10 -w 10 -c 0 --vs nccl -b 8 -e $e -f 8
done
for c in all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv; do
  bench gpu2-$c $P $c --mem cuda --np 2 -n 10 -w 10 -c 0 --vs nccl -b 8 -e 1G -f 8
done
