A="--mem cuda --np ${NP:-4} -n 10 -w 3 -c 0"
for c in all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv; do
  bench $c $P $c $A --vs nccl -b 8 -e 1G -f 8
done
for al in ring rhd; do MYCOLL_ALGO=$al bench ar_$al $P all_reduce $A --vs nccl -b 32K -e 64M -f 8; done
MYCOLL_ALGO=rhd bench ag_rhd $P all_gather $A --vs nccl -b 32K -e 64M -f 8
bench ar_graph $P all_reduce $A --vs nccl -b 8 -e 2M -f 8 -G 5
NP=2 bench ar_np2 $P all_reduce --mem cuda --np 2 -n 10 -w 3 -c 0 --vs nccl -b 8 -e 1G -f 8
