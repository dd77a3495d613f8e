// dst[i] = src[i] * scalar on the GPU (launch_premul, kernels/launch.h): NCCL's PreMulSum is
// this pass into scratch followed by a Sum collective.
#include <cuda_runtime.h>

#include <cstring>

#include "kernels/dispatch.cuh"
#include "kernels/launch.h"
#include "kernels/reduce_ops.cuh"

namespace mycoll {
namespace {

struct PremulArgs {
  void* dst;
  const void* src;
  size_t n;
  const void* scalar_dev;
  uint64_t scalar_bits;
};

template <typename T>
__global__ void premul_kernel(PremulArgs a) {
  T k;
  if (a.scalar_dev) {
    k = *static_cast<const T*>(a.scalar_dev);
  } else {
    memcpy(&k, &a.scalar_bits, sizeof(T));
  }
  const T* s = static_cast<const T*>(a.src);
  T* d = static_cast<T*>(a.dst);
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < a.n; i += stride)
    d[i] = dev::Red<T, mycollProd>::apply(s[i], k);
}

constexpr int kThreads = 256;

MYCOLL_DEFINE_LAUNCH(Launch, PremulArgs, kThreads, premul_kernel<T>)

}  // namespace

cudaError_t preload_premul_kernels() { return preload_dtype_op<Launch>({mycollProd}); }

cudaError_t launch_premul(mycollDataType_t t, void* dst, const void* src, size_t n,
                          const void* scalar_dev, uint64_t scalar_bits, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  PremulArgs a{dst, src, n, scalar_dev, scalar_bits};
  const size_t want = (n + kThreads - 1) / kThreads;
  const int blocks = int(want < 1024 ? want : 1024);
  return dispatch_dtype_op<Launch>(t, mycollProd, a, blocks, stream);
}

}  // namespace mycoll
