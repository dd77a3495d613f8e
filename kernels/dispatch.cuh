// Host-side dispatch of a kernel template over every dtype x reduction op:
// one switch for all kernel files. A kernel file defines
//   template <typename T, int OP> struct Launch {
//     static cudaError_t run(const Args& a, int blocks, cudaStream_t s);
//   };
// and calls dispatch_dtype_op<Launch>(dtype, op, args, blocks, stream). Avg
// runs the Sum instantiation (kernels divide by n themselves).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "mycoll.h"

namespace mycoll {

template <template <typename, int> class Launch, typename T, typename Args>
cudaError_t dispatch_op(mycollRedOp_t op, const Args& a, int blocks, cudaStream_t s) {
  switch (op) {
    case mycollSum:
    case mycollAvg: return Launch<T, mycollSum>::run(a, blocks, s);
    case mycollProd: return Launch<T, mycollProd>::run(a, blocks, s);
    case mycollMax: return Launch<T, mycollMax>::run(a, blocks, s);
    case mycollMin: return Launch<T, mycollMin>::run(a, blocks, s);
    default: return cudaErrorInvalidValue;
  }
}

template <template <typename, int> class Launch, typename Args>
cudaError_t dispatch_dtype_op(mycollDataType_t t, mycollRedOp_t op, const Args& a, int blocks,
                              cudaStream_t s) {
  switch (t) {
    case mycollInt8: return dispatch_op<Launch, int8_t>(op, a, blocks, s);
    case mycollUint8: return dispatch_op<Launch, uint8_t>(op, a, blocks, s);
    case mycollInt32: return dispatch_op<Launch, int32_t>(op, a, blocks, s);
    case mycollUint32: return dispatch_op<Launch, uint32_t>(op, a, blocks, s);
    case mycollInt64: return dispatch_op<Launch, int64_t>(op, a, blocks, s);
    case mycollUint64: return dispatch_op<Launch, uint64_t>(op, a, blocks, s);
    case mycollFloat16: return dispatch_op<Launch, __half>(op, a, blocks, s);
    case mycollFloat32: return dispatch_op<Launch, float>(op, a, blocks, s);
    case mycollFloat64: return dispatch_op<Launch, double>(op, a, blocks, s);
    case mycollBfloat16: return dispatch_op<Launch, __nv_bfloat16>(op, a, blocks, s);
    case mycollFloat8e4m3: return dispatch_op<Launch, __nv_fp8_e4m3>(op, a, blocks, s);
    case mycollFloat8e5m2: return dispatch_op<Launch, __nv_fp8_e5m2>(op, a, blocks, s);
    default: return cudaErrorInvalidValue;
  }
}

// Loads every dtype x op instantiation of Launch: Launch<T, OP>::preload()
// (cudaFuncGetAttributes on its kernel), first error returned. See
// preload_kernels() in kernels/launch.h for why.
template <template <typename, int> class Launch, typename T>
cudaError_t preload_ops() {
  cudaError_t e = Launch<T, mycollSum>::preload();
  for (cudaError_t r : {Launch<T, mycollProd>::preload(), Launch<T, mycollMax>::preload(),
                        Launch<T, mycollMin>::preload()})
    if (e == cudaSuccess) e = r;
  return e;
}

template <template <typename, int> class Launch>
cudaError_t preload_dtype_op() {
  cudaError_t e = cudaSuccess;
  for (cudaError_t r :
       {preload_ops<Launch, int8_t>(), preload_ops<Launch, uint8_t>(),
        preload_ops<Launch, int32_t>(), preload_ops<Launch, uint32_t>(),
        preload_ops<Launch, int64_t>(), preload_ops<Launch, uint64_t>(),
        preload_ops<Launch, __half>(), preload_ops<Launch, float>(),
        preload_ops<Launch, double>(), preload_ops<Launch, __nv_bfloat16>(),
        preload_ops<Launch, __nv_fp8_e4m3>(), preload_ops<Launch, __nv_fp8_e5m2>()})
    if (e == cudaSuccess) e = r;
  return e;
}

// cudaFuncGetAttributes loads a kernel (CUDA's lazy loading would otherwise
// load it at its first launch).
template <typename K>
cudaError_t preload_kernel(K* kernel) {
  cudaFuncAttributes attr;
  return cudaFuncGetAttributes(&attr, kernel);
}

}  // namespace mycoll
