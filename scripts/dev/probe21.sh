# Session 5: sanitizer over the subset with the chain/direct kernels on; p2p at 64 plan channels; outlier repeats.
for tool in memcheck racecheck; do
  MYCOLL_GPU_RING_BYTES=1 MYCOLL_GPU_DIRECT_BYTES=1 MYCOLL_GPU_LL_COLL_BYTES=0 timeout 200 compute-sanitizer --tool $tool --target-processes all \
    $b/tests/mycoll_gpu_tests --gtest_filter=GpuSanitize.Subset > $out/sanitizer-$tool.log 2>&1; echo "sanitizer $tool rc=$?"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" $out/sanitizer-$tool.log | sort | uniq -c | head -8
done
for np in 2 4; do
  bench sr$np-plan32 $P sendrecv --mem cuda --np $np -n 10 -w 10 -c 0 --vs nccl -b 2M -e 1G -f 8
  MYCOLL_GPU_PLAN_CHANNELS=64 bench sr$np-plan64 $P sendrecv --mem cuda --np $np -n 10 -w 10 -c 0 --vs nccl -b 2M -e 1G -f 8
done
bench sr2-n50 $P sendrecv --mem cuda --np 2 -n 50 -w 20 -c 0 --vs nccl -b 8 -e 1G -f 8
