A="--mem cuda --np ${NP:-4} -n 10 -w 3 -c 0"
bench ar_default $P all_reduce $A --vs nccl -b 8 -e 16M -f 8
MYCOLL_GPU_CHANNEL_BYTES=8K bench ar_cb8k $P all_reduce $A --vs nccl -b 8 -e 16M -f 8
( cmake -S . -B /tmp/bt -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_FLAGS=-DMYCOLL_KERNEL_TRACE=8 -DMYCOLL_BUILD_TESTS=OFF && ninja -C /tmp/bt -j64 mycoll-perf ) > $out/build-trace.log 2>&1 || tail -20 $out/build-trace.log
T=/tmp/bt/tools/mycoll-perf/mycoll-perf
for sz in 8 32K 256K; do
  $T all_reduce $A -b $sz -e $sz > $out/trace_ar_$sz.txt 2>&1
  echo "== trace all_reduce $sz"; grep "^KT" $out/trace_ar_$sz.txt | sort -k3,3n -s | head -80
done
MYCOLL_GPU_LL_BYTES=0 $T all_reduce $A -b 8 -e 8 > $out/trace_ar_noll.txt 2>&1
echo "== trace all_reduce 8 no LL"; grep "^KT" $out/trace_ar_noll.txt | sort -k3,3n -s | head -60
