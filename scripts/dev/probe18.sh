# Session 4: broadcast at 16 MiB (4 GPUs) slow after the channel change? default vs 32 channels; 2-GPU all-reduce 1-4 MiB.
A="--mem cuda --np 4 -n 20 -w 10 -c 0 --vs nccl"
bench bc64 $P broadcast $A -b 4M -e 64M -f 2
MYCOLL_NCHANNELS=32 bench bc32 $P broadcast $A -b 4M -e 64M -f 2
MYCOLL_ALGO=tree bench bctree $P broadcast $A -b 4M -e 64M -f 2
bench ar2 $P all_reduce --mem cuda --np 2 -n 20 -w 10 -c 0 --vs nccl -b 1M -e 8M -f 2
