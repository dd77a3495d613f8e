# Session 3: point-to-point host path (cached p2p plans), sendrecv at 4 and 2 GPUs.
bench sr4 $P sendrecv --mem cuda --np 4 -n 20 -w 3 -c 1 --vs nccl -b 8 -e 16M -f 8
bench sr2 $P sendrecv --mem cuda --np 2 -n 20 -w 3 -c 1 --vs nccl -b 8 -e 16M -f 8
