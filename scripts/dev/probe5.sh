A="--mem cuda --np ${NP:-4} -n 10 -w 3 -c 0"
for c in all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv; do
  bench $c $P $c $A --vs nccl -b 8 -e 1G -f 8
done
for c in all_reduce broadcast reduce all_gather reduce_scatter; do
  for al in ring tree rhd direct; do
    MYCOLL_ALGO=$al bench sweep_${c}_$al $P $c $A -b 8 -e 256M -f 8
  done
done
MYCOLL_GPU_LL_BYTES=16K bench ar_ll16k $P all_reduce $A --vs nccl -b 8 -e 16M -f 8
bench ar_np2 $P all_reduce --mem cuda --np 2 -n 10 -w 3 -c 0 --vs nccl -b 8 -e 1G -f 8
