// Host-side dispatch of a kernel template over every dtype x reduction op:
// one switch for all kernel files. A kernel file defines
//   template <typename T, int OP> struct Launch {
//     static cudaError_t run(const Args& a, int blocks, cudaStream_t s);
//   };
// and calls dispatch_dtype_op<Launch>(dtype, op, args, blocks, stream[, options]). Avg
// runs the Sum instantiation (kernels divide by n themselves).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

#include "algorithms/plan.h"
#include "base/dtype.h"
#include "kernels/device_plan.h"
#include "mycoll.h"

namespace mycoll {

// x...: passed on to Launch<T, OP>::run after the stream (launch options).
template <template <typename, int> class Launch, typename T, typename Args, typename... X>
cudaError_t dispatch_op(mycollRedOp_t op, const Args& a, int blocks, cudaStream_t s, X... x) {
  switch (op) {
    case mycollSum:
    case mycollAvg: return Launch<T, mycollSum>::run(a, blocks, s, x...);
    case mycollProd: return Launch<T, mycollProd>::run(a, blocks, s, x...);
    case mycollMax: return Launch<T, mycollMax>::run(a, blocks, s, x...);
    case mycollMin: return Launch<T, mycollMin>::run(a, blocks, s, x...);
    default: return cudaErrorInvalidValue;
  }
}

template <template <typename, int> class Launch, typename Args, typename... X>
cudaError_t dispatch_dtype_op(mycollDataType_t t, mycollRedOp_t op, const Args& a, int blocks,
                              cudaStream_t s, X... x) {
  switch (t) {
    case mycollInt8: return dispatch_op<Launch, int8_t>(op, a, blocks, s, x...);
    case mycollUint8: return dispatch_op<Launch, uint8_t>(op, a, blocks, s, x...);
    case mycollInt32: return dispatch_op<Launch, int32_t>(op, a, blocks, s, x...);
    case mycollUint32: return dispatch_op<Launch, uint32_t>(op, a, blocks, s, x...);
    case mycollInt64: return dispatch_op<Launch, int64_t>(op, a, blocks, s, x...);
    case mycollUint64: return dispatch_op<Launch, uint64_t>(op, a, blocks, s, x...);
    case mycollFloat16: return dispatch_op<Launch, __half>(op, a, blocks, s, x...);
    case mycollFloat32: return dispatch_op<Launch, float>(op, a, blocks, s, x...);
    case mycollFloat64: return dispatch_op<Launch, double>(op, a, blocks, s, x...);
    case mycollBfloat16: return dispatch_op<Launch, __nv_bfloat16>(op, a, blocks, s, x...);
    case mycollFloat8e4m3: return dispatch_op<Launch, __nv_fp8_e4m3>(op, a, blocks, s, x...);
    case mycollFloat8e5m2: return dispatch_op<Launch, __nv_fp8_e5m2>(op, a, blocks, s, x...);
    default: return cudaErrorInvalidValue;
  }
}

// Kernels that only move bytes need an element's size, not its type:
// Launch<U, mycollSum> with U the unsigned integer of t's size (the element
// types of kernels/prims/vec.cuh's Bits).
template <template <typename, int> class Launch, typename Args, typename... X>
cudaError_t dispatch_size(mycollDataType_t t, const Args& a, int blocks, cudaStream_t s, X... x) {
  switch (dtype_size(t)) {
    case 1: return Launch<unsigned char, mycollSum>::run(a, blocks, s, x...);
    case 2: return Launch<unsigned short, mycollSum>::run(a, blocks, s, x...);
    case 4: return Launch<unsigned int, mycollSum>::run(a, blocks, s, x...);
    case 8: return Launch<unsigned long long, mycollSum>::run(a, blocks, s, x...);
    default: return cudaErrorInvalidValue;
  }
}

// Loads what dispatch_dtype_op (kSizes false: every dtype x op of `ops`) or
// dispatch_size (true: every element size) can launch, through the same
// switches: Launch<T, OP>::preload() (cudaFuncGetAttributes on its kernel),
// the first error returned. See preload_kernels() in kernels/launch.h for why.
template <template <typename, int> class Launch>
struct Preload {
  template <typename T, int OP>
  struct Of {
    static cudaError_t run(int, int, cudaStream_t) { return Launch<T, OP>::preload(); }
  };
};

template <template <typename, int> class Launch, bool kSizes = false>
cudaError_t preload_dtype_op(std::initializer_list<mycollRedOp_t> ops = {mycollSum, mycollProd,
                                                                         mycollMax, mycollMin}) {
  cudaError_t e = cudaSuccess;
  for (int t = 0; t < mycollNumTypes; ++t)
    for (mycollRedOp_t op : ops) {
      const mycollDataType_t dt = static_cast<mycollDataType_t>(t);
      cudaError_t r;
      if constexpr (kSizes)
        r = dispatch_size<Preload<Launch>::template Of>(dt, 0, 0, nullptr);
      else
        r = dispatch_dtype_op<Preload<Launch>::template Of>(dt, op, 0, 0, nullptr);
      if (e == cudaSuccess) e = r;
    }
  return e;
}

template <template <typename, int> class Launch>
cudaError_t preload_sizes() {
  return preload_dtype_op<Launch, true>({mycollSum});
}

// The first of several results that is not cudaSuccess (the preloads').
inline cudaError_t first_error(std::initializer_list<cudaError_t> results) {
  for (cudaError_t r : results)
    if (r != cudaSuccess) return r;
  return cudaSuccess;
}

// What a one-kernel collective (ring, direct, one-shot, two-shot, LL) is
// launched with, passed by value.
struct CollKArgs {
  const char* in;
  char* out;
  // all-reduce, broadcast, reduce: the message; the blocked collectives: one block
  uint64_t bytes;
  const DevComm* comm;  // device memory
  Coll kind;
  int32_t root;           // rooted collectives
  int32_t avg_n;          // Avg: divide the final sum by this; 0 = no division
  int32_t nch = 0;        // direct kernel: channels per peer stream
  int32_t nstreams = 0;   // direct kernel: peer streams
  uint64_t sig;           // the call's signature (kernels/prims/call_check.cuh)
  int32_t defer_to = -1;  // ring kernel: the peer whose call line it checks now (-1: every peer's)
  int32_t two_shot = 0;   // LL kernel, all-reduce: reduce-scatter + all-gather of parts of `bytes`
  // LL kernel: no user byte at or past this offset (two-shot: the message)
  uint32_t clip = ~uint32_t(0);
};

inline CollKArgs coll_kargs(Coll kind, const void* in, void* out, uint64_t bytes,
                            const DevComm* comm, int root, bool avg, int nranks, uint64_t sig) {
  CollKArgs a{static_cast<const char*>(in), static_cast<char*>(out), bytes, comm, kind, root};
  a.avg_n = avg ? nranks : 0;
  a.sig = sig;
  return a;
}

// Launches kernel(a) on blocks x threads; pdl: with programmatic stream
// serialization (the GPU may schedule the grid while its predecessor on the
// stream runs). Only for kernels that begin with griddepcontrol.wait (which
// keeps them after that grid and its writes) and, where other ranks' kernels
// share the GPU, never: a scheduled grid waiting for its predecessor holds
// SMs.
template <typename Args>
cudaError_t launch_kernel(void (*kernel)(Args), int blocks, int threads, cudaStream_t s, bool pdl,
                          const Args& a) {
  if (!pdl) {
    kernel<<<blocks, threads, 0, s>>>(a);
    return cudaGetLastError();
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(blocks);
  cfg.blockDim = dim3(threads);
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, a);
}

// Defines NAME<T, OP>, what dispatch_dtype_op and preload_dtype_op take, for
// a kernel taking ARGS by value, launched with THREADS threads per block
// (pdl: launch_kernel's); the kernel is the expression after them, written
// over T and OP (e.g. my_kernel<T, OP, true>).
#define MYCOLL_DEFINE_LAUNCH(NAME, ARGS, THREADS, ...)                                    \
  template <typename T, int OP>                                                           \
  struct NAME {                                                                           \
    static cudaError_t run(const ARGS& a, int blocks, cudaStream_t s, bool pdl = false) { \
      return launch_kernel(__VA_ARGS__, blocks, THREADS, s, pdl, a);                      \
    }                                                                                     \
    static cudaError_t preload() { return preload_kernel(__VA_ARGS__); }                  \
  };

// Thread blocks for `lines` LL lines, one per `per_block` lines, 1..most.
inline int blocks_for_lines(uint64_t lines, uint64_t per_block, int most) {
  const uint64_t b = (lines + per_block - 1) / per_block;
  return b < 1 ? 1 : b > uint64_t(most) ? most : int(b);
}

// cudaFuncGetAttributes loads a kernel (CUDA's lazy loading would otherwise
// load it at its first launch).
template <typename K>
cudaError_t preload_kernel(K* kernel) {
  cudaFuncAttributes attr;
  return cudaFuncGetAttributes(&attr, kernel);
}

}  // namespace mycoll
