# Session 3 final tables (after the LL reduce / all-to-all kernels): memcheck, every collective at 4 GPUs.
timeout 120 compute-sanitizer --tool memcheck --target-processes all --error-exitcode 9 $b/tests/mycoll_gpu_tests --gtest_filter=GpuSanitize.Subset > $out/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY" $out/memcheck.log | head -3
for c in all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv; do
  e=1G; [ $c = all_reduce ] && e=2G
  bench gpu4-$c $P $c --mem cuda --np 4 -n 10 -w 3 -c 0 --vs nccl -b 8 -e $e -f 8
done
