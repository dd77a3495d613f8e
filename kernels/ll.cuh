// Low-latency (LL) line helpers shared by device code. An LL line is 16
// bytes {data_lo32, flag32, data_hi32, flag32} written with one 16-byte
// store: a reader that sees `flag` in both halves has both data halves (each
// 8-byte half {data, flag} arrives whole), so no fence and no separate flag
// store is needed. 8 data bytes per line.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/reduce_ops.cuh"

namespace mycoll {
namespace ll {

__device__ __forceinline__ uint64_t globaltimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ void store_line(char* p, uint64_t v, uint32_t flag) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(uint32_t(v)),
               "r"(flag), "r"(uint32_t(v >> 32)), "r"(flag)
               : "memory");
}

// True (and the 8 data bytes in *v) once both halves carry `flag`.
__device__ __forceinline__ bool load_line(const char* p, uint32_t flag, uint64_t* v) {
  uint32_t d0, f0, d1, f1;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(d0), "=r"(f0), "=r"(d1), "=r"(f1)
               : "l"(p)
               : "memory");
  *v = uint64_t(d0) | (uint64_t(d1) << 32);
  return f0 == flag && f1 == flag;
}

// Up to 8 bytes of a user buffer (any alignment), little-endian packed; the
// bytes past `valid` are 0.
__device__ __forceinline__ uint64_t load8(const char* p, int valid) {
  if (valid == 8 && (reinterpret_cast<uintptr_t>(p) & 7) == 0)
    return *reinterpret_cast<const uint64_t*>(p);
  uint64_t v = 0;
  for (int i = 0; i < valid; ++i) v |= uint64_t(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

__device__ __forceinline__ void store8(char* p, uint64_t v, int valid) {
  if (valid == 8 && (reinterpret_cast<uintptr_t>(p) & 7) == 0) {
    *reinterpret_cast<uint64_t*>(p) = v;
    return;
  }
  for (int i = 0; i < valid; ++i) p[i] = static_cast<char>(v >> (8 * i));
}

// a <op> b lane by lane over 8 packed bytes (T is at most 8 bytes).
template <typename T, int OP>
__device__ __forceinline__ uint64_t reduce8(uint64_t a, uint64_t b) {
  constexpr int N = 8 / sizeof(T);
  T x[N], y[N];
  memcpy(x, &a, 8);
  memcpy(y, &b, 8);
#pragma unroll
  for (int i = 0; i < N; ++i) x[i] = dev::Red<T, OP>::apply(x[i], y[i]);
  uint64_t r;
  memcpy(&r, x, 8);
  return r;
}

// Every lane of 8 packed bytes divided by n (the Avg of a sum).
template <typename T>
__device__ __forceinline__ uint64_t div_avg8(uint64_t a, int n) {
  constexpr int N = 8 / sizeof(T);
  T x[N];
  memcpy(x, &a, 8);
#pragma unroll
  for (int i = 0; i < N; ++i) x[i] = dev::div_avg<T>(x[i], n);
  uint64_t r;
  memcpy(&r, x, 8);
  return r;
}

}  // namespace ll
}  // namespace mycoll
