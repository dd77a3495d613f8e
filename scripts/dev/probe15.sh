# Session 4: ring kernel after the half-FIFO chunk and acquire/release changes (32 vs 48 channels); LL p2p kernel.
A="--mem cuda --np 4 -n 10 -w 3 -c 0 --vs nccl"
MYCOLL_ALGO=ring bench ringk-all_reduce $P all_reduce $A -b 64M -e 1G -f 4
MYCOLL_ALGO=ring MYCOLL_NCHANNELS=48 bench ringk48-all_reduce $P all_reduce $A -b 64M -e 1G -f 4
MYCOLL_ALGO=ring bench ringk-all_gather $P all_gather $A -b 16M -e 1G -f 4
MYCOLL_ALGO=ring bench ringk-reduce_scatter $P reduce_scatter $A -b 16M -e 1G -f 4
MYCOLL_ALGO=ring MYCOLL_NCHANNELS=48 bench ringk48-reduce_scatter $P reduce_scatter $A -b 16M -e 1G -f 4
bench sr4 $P sendrecv $A -b 8 -e 256K -f 8
