// Block- or grid-strided byte copy shared by the plan and direct kernels.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace mycoll {
namespace dev {

template <bool FromFifo, typename V>
__device__ __forceinline__ V load(const V* p) {
  // Fetched again every time: the peer (or the proxy, in host memory) rewrites slots.
  if constexpr (FromFifo) return __ldcv(p);
  else return *p;
}

// dst[0:n) = src[0:n), thread `tid` of `nt` cooperating threads (a block, or
// several blocks of a grid): 16-byte vectors, kUnroll in flight per thread,
// where both are 16-byte aligned; else 4-byte words; else bytes.
template <bool FromFifo>
__device__ void copy_bytes(char* dst, const char* src, uint64_t n, uint64_t tid, uint64_t nt) {
  constexpr int kUnroll = 8;
  uint64_t done = 0;
  if (((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) & 15) == 0) {
    const uint64_t nv = n / 16;
    const uint4* s = reinterpret_cast<const uint4*>(src);
    uint4* d = reinterpret_cast<uint4*>(dst);
    for (uint64_t i = tid; i < nv; i += nt * kUnroll) {
      uint4 v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (i + u * nt < nv) v[u] = load<FromFifo>(s + i + u * nt);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (i + u * nt < nv) d[i + u * nt] = v[u];
    }
    done = nv * 16;
  } else if (((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) & 3) == 0) {
    const uint64_t nw = n / 4;
    const uint32_t* s = reinterpret_cast<const uint32_t*>(src);
    uint32_t* d = reinterpret_cast<uint32_t*>(dst);
    for (uint64_t i = tid; i < nw; i += nt) d[i] = load<FromFifo>(s + i);
    done = nw * 4;
  }
  for (uint64_t i = done + tid; i < n; i += nt) dst[i] = load<FromFifo>(src + i);
}

}  // namespace dev
}  // namespace mycoll
