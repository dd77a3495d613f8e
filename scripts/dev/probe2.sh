A="--mem cuda --np ${NP:-4} -n 10 -w 3 -c 0 --vs nccl"
bench ar_default $P all_reduce $A -b 8 -e 1G -f 8
for ll in 0 16K 256K; do MYCOLL_GPU_LL_BYTES=$ll bench ar_ll_$ll $P all_reduce $A -b 8 -e 16M -f 8; done
for cb in 8K 128K; do MYCOLL_GPU_CHANNEL_BYTES=$cb bench ar_cb_$cb $P all_reduce $A -b 32K -e 16M -f 8; done
for al in ring rhd tree; do MYCOLL_ALGO=$al bench ar_$al $P all_reduce $A -b 32K -e 64M -f 8; done
bench ar_graph $P all_reduce $A -b 8 -e 256K -f 8 -G 5
bench ag $P all_gather $A -b 8 -e 1G -f 8
bench rs $P reduce_scatter $A -b 8 -e 1G -f 8
bench bc $P broadcast $A -b 8 -e 1G -f 8
