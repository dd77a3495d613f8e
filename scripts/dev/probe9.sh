# Session 3: the LL kernels (one-shot, two-shot, all-gather/reduce-scatter/broadcast) at 4 GPUs, auto rule.
bench ar4 $P all_reduce --mem cuda --np 4 -n 20 -w 3 -c 1 --vs nccl -b 8 -e 64M -f 4
bench ag4 $P all_gather --mem cuda --np 4 -n 20 -w 3 -c 1 --vs nccl -b 8 -e 16M -f 8
bench rs4 $P reduce_scatter --mem cuda --np 4 -n 20 -w 3 -c 1 --vs nccl -b 8 -e 16M -f 8
bench bc4 $P broadcast --mem cuda --np 4 -n 20 -w 3 -c 1 --vs nccl -b 8 -e 16M -f 8
