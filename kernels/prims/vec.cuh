// The one family of 16-byte vector loops that moves and reduces bytes on
// the GPU (every kernel's bulk data path): a primitive reads its receive
// slot (kR, from a FIFO another GPU writes: never cached) and/or the local
// buffer (kL), combines them, and stores the value to the next FIFO slot
// (kS) and/or the destination (kD):
//   value = kR && kL ? local <op> fifo : kR ? fifo : local  (/ avg_n at kD)
// Threads tid of nt cooperate (a block, a warp group or a grid; int: the
// index arithmetic of the unrolled loop stays 32-bit where it can). Where every
// pointer touched is 16-byte aligned, 16-byte vectors, kUnroll loads in
// flight per thread before any store; the rest in whole elements (copies of
// byte elements go through 4-byte words where aligned).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "algorithms/schedule.h"
#include "kernels/reduce_ops.cuh"

namespace mycoll {
namespace dev {

// The mode bits of a primitive, as the schedules name them.
using sched::kD;
using sched::kL;
using sched::kR;
using sched::kS;

// The unsigned integer of N bytes (1, 2, 4, 8).
template <int N>
struct Bits {
  using type = std::conditional_t<
      N == 1, unsigned char,
      std::conditional_t<N == 2, unsigned short,
                         std::conditional_t<N == 4, unsigned int, unsigned long long>>>;
};

// A value of a FIFO slot (kFifo: fetched again every time, the peer or the
// proxy rewrites slots) or of a user buffer. Any T of 1, 2, 4, 8 or 16 bytes.
template <bool kFifo, typename T>
__device__ __forceinline__ T load(const T* p) {
  if constexpr (!kFifo) {
    return *p;
  } else if constexpr (sizeof(T) == 16) {
    return __ldcv(reinterpret_cast<const uint4*>(p));
  } else {
    using U = typename Bits<sizeof(T)>::type;
    const U u = __ldcv(reinterpret_cast<const U*>(p));
    T v;
    memcpy(&v, &u, sizeof(T));
    return v;
  }
}

__device__ __forceinline__ bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

// Every lane of packed elements (V: T, 8 or 16 bytes) divided by n (the Avg
// of a sum).
template <typename T, typename V>
__device__ __forceinline__ V div_avg_packed(V a, int n) {
  constexpr int N = sizeof(V) / sizeof(T);
  T x[N];
  memcpy(x, &a, sizeof(V));
#pragma unroll
  for (int i = 0; i < N; ++i) x[i] = div_avg<T>(x[i], n);
  V r;
  memcpy(&r, x, sizeof(V));
  return r;
}

// The value of one position: V is uint4 (16 packed bytes) or T.
template <typename T, int OP, int M, typename V>
__device__ __forceinline__ V combine(V local, V fifo) {
  if constexpr ((M & kR) && (M & kL)) {
    if constexpr (sizeof(V) == 16)
      return apply16<T, OP>(local, fifo);
    else
      return Red<T, OP>::apply(local, fifo);
  } else if constexpr (M & kR) {
    return fifo;
  } else {
    return local;
  }
}

template <typename T, int OP, int M, typename V>
__device__ __forceinline__ void put(char* fout, char* dst, uint64_t i, V v, int avg_n) {
  if constexpr ((M & kR) && (M & kL) && (M & kD)) {
    if (avg_n) v = div_avg_packed<T>(v, avg_n);
  }
  if constexpr (M & kS) reinterpret_cast<V*>(fout)[i] = v;
  if constexpr (M & kD) reinterpret_cast<V*>(dst)[i] = v;
}

// len bytes (whole elements of T) from fin / loc to fout / dst as M says.
// Copies (M without kR | kL both) need T only for its size.
template <typename T, int OP, int M, int kUnroll = 8>
__device__ __forceinline__ void vec_move(const char* fin, const char* loc, char* fout, char* dst,
                                         uint64_t len, int avg_n, int tid, int nt) {
  uint64_t done = 0;
  const bool a16 = (!(M & kR) || aligned16(fin)) && (!(M & kL) || aligned16(loc)) &&
                   (!(M & kS) || aligned16(fout)) && (!(M & kD) || aligned16(dst));
  if (a16) {
    const uint64_t nv = len / 16;
    const uint4* x = reinterpret_cast<const uint4*>(loc);
    const uint4* y = reinterpret_cast<const uint4*>(fin);
    for (uint64_t i = tid; i < nv; i += uint64_t(nt) * kUnroll) {
      uint4 va[kUnroll], vb[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (i + u * nt < nv) {
          if constexpr (M & kL) va[u] = x[i + u * nt];
          if constexpr (M & kR) vb[u] = load<true>(y + i + u * nt);
        }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (i + u * nt < nv)
          put<T, OP, M>(fout, dst, i + u * nt, combine<T, OP, M>(va[u], vb[u]), avg_n);
    }
    done = nv * 16;
  } else if constexpr (sizeof(T) == 1 && !((M & kR) && (M & kL))) {
    // Byte copies: 4-byte words where every pointer allows them.
    const uintptr_t al = ((M & kR) ? reinterpret_cast<uintptr_t>(fin) : 0) |
                         ((M & kL) ? reinterpret_cast<uintptr_t>(loc) : 0) |
                         ((M & kS) ? reinterpret_cast<uintptr_t>(fout) : 0) |
                         ((M & kD) ? reinterpret_cast<uintptr_t>(dst) : 0);
    if ((al & 3) == 0) {
      const uint64_t nw = len / 4;
      const uint32_t* s = reinterpret_cast<const uint32_t*>((M & kR) ? fin : loc);
      for (uint64_t i = tid; i < nw; i += nt)
        put<T, OP, M>(fout, dst, i, (M & kR) ? load<true>(s + i) : s[i], 0);
      done = nw * 4;
    }
  }
  const uint64_t ne = (len - done) / sizeof(T);
  const T* x = reinterpret_cast<const T*>(loc + done);
  const T* y = reinterpret_cast<const T*>(fin + done);
  char* fo = (M & kS) ? fout + done : nullptr;
  char* d = (M & kD) ? dst + done : nullptr;
  for (uint64_t i = tid; i < ne; i += nt) {
    T a{}, b{};
    if constexpr (M & kL) a = x[i];
    if constexpr (M & kR) b = load<true>(y + i);
    put<T, OP, M>(fo, d, i, combine<T, OP, M>(a, b), avg_n);
  }
}

// dst = first <op> srcs[0] <op> ... <op> srcs[nsrc - 1] over n bytes, the
// sources folded left to right (every rank folding the same sources gets
// bit-identical results). first may be dst.
template <typename T, int OP>
__device__ void vec_fold(char* dst, const char* first, const char* const* srcs, int nsrc,
                         uint64_t n, int tid, int nt) {
  uintptr_t align = reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(first);
  for (int s = 0; s < nsrc; ++s) align |= reinterpret_cast<uintptr_t>(srcs[s]);
  uint64_t done = 0;
  if ((align & 15) == 0) {
    const uint64_t nv = n / 16;
    constexpr int U = 4;
    for (uint64_t i = tid; i < nv; i += uint64_t(nt) * U) {
      uint4 acc[U];
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (i + u * nt < nv) acc[u] = reinterpret_cast<const uint4*>(first)[i + u * nt];
      for (int s = 0; s < nsrc; ++s) {
        uint4 v[U];
        const uint4* p = reinterpret_cast<const uint4*>(srcs[s]);
#pragma unroll
        for (int u = 0; u < U; ++u)
          if (i + u * nt < nv) v[u] = p[i + u * nt];
#pragma unroll
        for (int u = 0; u < U; ++u)
          if (i + u * nt < nv) acc[u] = apply16<T, OP>(acc[u], v[u]);
      }
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (i + u * nt < nv) reinterpret_cast<uint4*>(dst)[i + u * nt] = acc[u];
    }
    done = nv * 16;
  }
  const T* f = reinterpret_cast<const T*>(first);
  T* z = reinterpret_cast<T*>(dst);
  for (uint64_t i = done / sizeof(T) + tid; i < n / sizeof(T); i += nt) {
    T acc = f[i];
    for (int s = 0; s < nsrc; ++s)
      acc = Red<T, OP>::apply(acc, reinterpret_cast<const T*>(srcs[s])[i]);
    z[i] = acc;
  }
}

// Every element of dst[0:n) divided by nranks (Avg after a plan's sum).
template <typename T>
__device__ void vec_scale_avg(char* dst, uint64_t n, int nranks, int tid, int nt) {
  T* z = reinterpret_cast<T*>(dst);
  for (uint64_t i = tid; i < n / sizeof(T); i += nt) z[i] = div_avg<T>(z[i], nranks);
}

}  // namespace dev
}  // namespace mycoll
