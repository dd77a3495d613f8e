# Session 3: GPU proxy (forced shm between GPUs), __ldcv FIFO loads, racecheck detail.
timeout 200 compute-sanitizer --tool racecheck --racecheck-report analysis --print-limit 40 --target-processes all $b/tests/mycoll_gpu_tests --gtest_filter=GpuSanitize.Subset > $out/racecheck.log 2>&1; echo "racecheck rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $out/racecheck.log | head
bench ar4 $P all_reduce --mem cuda --np 4 -n 10 -w 3 -c 0 --vs nccl -b 8 -e 1G -f 8
bench ag4 $P all_gather --mem cuda --np 4 -n 10 -w 3 -c 0 --vs nccl -b 32M -e 1G -f 8
bench ar2 $P all_reduce --mem cuda --np 2 -n 10 -w 3 -c 0 --vs nccl -b 32M -e 1G -f 8
MYCOLL_TRANSPORT=shm bench ar2-shm $P all_reduce --mem cuda --np 2 -n 10 -w 3 -c 1 --vs nccl -b 8 -e 256M -f 8
MYCOLL_TRANSPORT=shm bench sr2-shm $P sendrecv --mem cuda --np 2 -n 10 -w 3 -c 1 --vs nccl -b 8 -e 256M -f 8
MYCOLL_TRANSPORT=socket bench ar2-sock $P all_reduce --mem cuda --np 2 -n 10 -w 3 -c 1 --vs nccl -b 8 -e 64M -f 8
