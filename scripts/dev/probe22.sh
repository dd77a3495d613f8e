# Session 5 final tables: chain broadcast/reduce (ring kernel), direct kernel all-to-all, p2p on 64 channels; fastest of 3 batches (-R 3).
for np in 4 2; do
  for c in all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv; do
    e=1G; [ $c = all_reduce ] && [ $np = 4 ] && e=2G
    bench gpu$np-$c $P $c --mem cuda --np $np -n 10 -w 10 -R 3 -c 0 --vs nccl -b 8 -e $e -f 8
  done
done
