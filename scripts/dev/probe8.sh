# Session 3: one-shot kernel (auto, small sizes), twoshot vs rhd (all-reduce), direct vs rhd
# (all-gather, reduce-scatter) at 4 GPUs; GPU proxy over sockets beside NCCL over its socket
# transport; racecheck after the barrier change.
timeout 120 compute-sanitizer --tool racecheck --racecheck-report analysis --print-limit 40 --target-processes all $b/tests/mycoll_gpu_tests --gtest_filter=GpuSanitize.Subset > $out/racecheck.log 2>&1; echo "racecheck rc=$?"; grep -E "RACECHECK SUMMARY" $out/racecheck.log | head
bench ar4-small $P all_reduce --mem cuda --np 4 -n 50 -w 5 -c 0 --vs nccl -b 8 -e 64K -f 8
for algo in twoshot rhd; do
  MYCOLL_ALGO=$algo bench ar4-$algo $P all_reduce --mem cuda --np 4 -n 20 -w 3 -c 0 --vs nccl -b 128K -e 64M -f 2
done
for algo in direct rhd; do
  MYCOLL_ALGO=$algo bench ag4-$algo $P all_gather --mem cuda --np 4 -n 20 -w 3 -c 0 --vs nccl -b 32K -e 16M -f 4
  MYCOLL_ALGO=$algo bench rs4-$algo $P reduce_scatter --mem cuda --np 4 -n 20 -w 3 -c 0 --vs nccl -b 32K -e 16M -f 4
done
MYCOLL_TRANSPORT=socket NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 bench ar2-sock $P all_reduce --mem cuda --np 2 -n 5 -w 2 -c 1 --vs nccl -b 8 -e 16M -f 8
