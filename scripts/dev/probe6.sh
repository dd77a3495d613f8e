for tool in ${SANITIZE-memcheck racecheck}; do
  timeout 150 compute-sanitizer --tool $tool --target-processes all --error-exitcode 9 $b/tests/mycoll_gpu_tests --gtest_filter=GpuSanitize.Subset > $out/sanitizer-$tool.log 2>&1; echo "sanitizer $tool rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" $out/sanitizer-$tool.log | head -4
done
for np in ${NPS:-4 2}; do
for c in all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv; do
  e=1G; [ $c = all_reduce ] && e=2G
  bench gpu${np}-$c $P $c --mem cuda --np $np -n 10 -w 3 -c 0 --vs nccl -b 8 -e $e -f 8
done; done
