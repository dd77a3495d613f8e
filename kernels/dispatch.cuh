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

}  // namespace mycoll
