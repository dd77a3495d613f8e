# Session 4: compute-sanitizer over the subset with the ring kernel forced (and the LL p2p kernel through its sendrecv case).
export MYCOLL_ALGO=ring MYCOLL_GPU_RING_BYTES=1
timeout 100 compute-sanitizer --tool memcheck --target-processes all --error-exitcode 9 $b/tests/mycoll_gpu_tests --gtest_filter=GpuSanitize.Subset > $out/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" $out/memcheck.log | head -5
timeout 170 compute-sanitizer --tool racecheck --racecheck-report analysis --print-limit 40 --target-processes all $b/tests/mycoll_gpu_tests --gtest_filter=GpuSanitize.Subset > $out/racecheck.log 2>&1; echo "racecheck rc=$?"; grep -E "RACECHECK SUMMARY|PASSED|FAILED" $out/racecheck.log | head; grep -E "Race reported" $out/racecheck.log | sed 's/.*at //' | sort | uniq -c | head
unset MYCOLL_ALGO MYCOLL_GPU_RING_BYTES
