# Session 4: fused ring kernel vs the plan kernel's ring and NCCL at 4 GPUs; p2p graph-mode timing.
A="--mem cuda --np 4 -n 10 -w 3 -c 0 --vs nccl"
for c in all_reduce all_gather reduce_scatter; do
  MYCOLL_ALGO=ring bench ringk-$c $P $c $A -b 4M -e 1G -f 4
  MYCOLL_ALGO=ring MYCOLL_GPU_RING_BYTES=0 bench ringplan-$c $P $c $A -b 64M -e 1G -f 4
done
MYCOLL_ALGO=ring MYCOLL_NCHANNELS=16 bench ringk16-all_reduce $P all_reduce $A -b 16M -e 1G -f 4
MYCOLL_ALGO=ring MYCOLL_NCHANNELS=48 bench ringk48-all_reduce $P all_reduce $A -b 16M -e 1G -f 4
MYCOLL_ALGO=ring MYCOLL_GPU_SLOT_BYTES=128K MYCOLL_GPU_SLOTS=8 bench ringk128k-all_reduce $P all_reduce $A -b 16M -e 1G -f 4
bench sr4 $P sendrecv $A -b 8 -e 64K -f 8
bench sr4g $P sendrecv $A -b 8 -e 64K -f 8 -G 10
