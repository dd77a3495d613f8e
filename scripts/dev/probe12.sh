# Session 3 final: every collective at 2 GPUs; racecheck over the subset (all kernels).
timeout 150 compute-sanitizer --tool racecheck --racecheck-report analysis --print-limit 40 --target-processes all $b/tests/mycoll_gpu_tests --gtest_filter=GpuSanitize.Subset > $out/racecheck.log 2>&1; echo "racecheck rc=$?"; grep -E "RACECHECK SUMMARY" $out/racecheck.log | head; grep -E "Race reported" $out/racecheck.log | sed 's/.*at //' | sort | uniq -c | head
for c in all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv; do
  bench gpu2-$c $P $c --mem cuda --np 2 -n 10 -w 3 -c 0 --vs nccl -b 8 -e 1G -f 8
done
