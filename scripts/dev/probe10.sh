# Session 3 final: memcheck over the subset, full tables at 4 GPUs and the main ones at 2,
# the GPU proxy over sockets beside NCCL's socket transport, and two limit sweeps.
timeout 120 compute-sanitizer --tool memcheck --target-processes all --error-exitcode 9 $b/tests/mycoll_gpu_tests --gtest_filter=GpuSanitize.Subset > $out/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY" $out/memcheck.log | head -3
for c in all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv; do
  e=1G; [ $c = all_reduce ] && e=2G
  bench gpu4-$c $P $c --mem cuda --np 4 -n 10 -w 3 -c 0 --vs nccl -b 8 -e $e -f 8
done
for c in all_reduce all_gather reduce_scatter; do
  bench gpu2-$c $P $c --mem cuda --np 2 -n 10 -w 3 -c 0 --vs nccl -b 8 -e 1G -f 8
done
MYCOLL_GPU_LL_COLL_BYTES=256K bench ag4-ll256k $P all_gather --mem cuda --np 4 -n 20 -w 3 -c 0 --vs nccl -b 512K -e 4M -f 2
MYCOLL_GPU_LL_COLL_BYTES=256K bench bc4-ll256k $P broadcast --mem cuda --np 4 -n 20 -w 3 -c 0 --vs nccl -b 512K -e 4M -f 2
MYCOLL_GPU_TWOSHOT_BYTES=16M bench ar4-ts16m $P all_reduce --mem cuda --np 4 -n 20 -w 3 -c 0 --vs nccl -b 4M -e 16M -f 2
MYCOLL_TRANSPORT=socket NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 bench ar2-sock $P all_reduce --mem cuda --np 2 -n 5 -w 2 -c 1 --vs nccl -b 8 -e 64M -f 8
