A="--mem cuda --np 2 -n 10 -w 3 -c 0 --vs nccl"
bench ar_lat $P all_reduce $A -b 8 -e 8M -f 8
bench ar_lat_graph $P all_reduce $A -b 8 -e 8M -f 8 -G 5
bench ar_bw $P all_reduce $A -b 16M -e 1G -f 4
for s in 65536 262144; do for sl in 8 16; do for ch in 16 32; do
  MYCOLL_GPU_SLOT_BYTES=$s MYCOLL_GPU_SLOTS=$sl MYCOLL_NCHANNELS=$ch bench ar_sweep_${s}_${sl}_${ch} $P all_reduce $A -b 32M -e 512M -f 4
done; done; done
MYCOLL_ALGO=direct bench ar_direct $P all_reduce $A -b 8 -e 1M -f 8
bench ag $P all_gather $A -b 8 -e 1G -f 8
bench bc $P broadcast $A -b 8 -e 1G -f 8
