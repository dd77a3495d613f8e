// The low-latency (LL) line protocol. An LL line is 16 bytes {data_lo32,
// flag32, data_hi32, flag32} written with one 16-byte store: a reader that
// sees `flag` in both halves has both data halves (each 8-byte half {data,
// flag} arrives whole), so no fence and no separate flag store is needed.
// 8 data bytes per line. Two addressing modes use it: the plan kernel's and
// the point-to-point kernel's ll rings (flag = slot sequence + 1, credits
// returned through ll_tail), and the mailboxes of the one-kernel
// collectives (flag from the launch's epoch, kernels/prims/epoch.cuh).
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/device_plan.h"
#include "kernels/prims/vec.cuh"
#include "kernels/prims/wait.cuh"
#include "kernels/reduce_ops.cuh"
#include "mycoll.h"

namespace mycoll {
namespace ll {

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

// Data bytes in line l of a message of `bytes` (8 a line, the last one
// partial); l below the message's line count.
__device__ __forceinline__ int bytes_in_line(uint64_t bytes, uint64_t l) {
  return bytes - l * 8 < 8 ? int(bytes - l * 8) : 8;
}

// Up to 8 bytes of a user buffer (any alignment), little-endian packed; the
// bytes past `valid` are 0. The byte loops (a message's last line, an
// unaligned buffer) stay loops: unrolled at every inlined call they were
// most of the LL collective kernel's code, and its small calls were slower
// for it (docs/performance.md, "Session 27: a smaller LL kernel").
__device__ __forceinline__ uint64_t load8(const char* p, int valid) {
  if (valid == 8 && (reinterpret_cast<uintptr_t>(p) & 7) == 0)
    return *reinterpret_cast<const uint64_t*>(p);
  uint64_t v = 0;
#pragma unroll 1
  for (int i = 0; i < valid; ++i) v |= uint64_t(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

__device__ __forceinline__ void store8(char* p, uint64_t v, int valid) {
  if (valid == 8 && (reinterpret_cast<uintptr_t>(p) & 7) == 0) {
    *reinterpret_cast<uint64_t*>(p) = v;
    return;
  }
#pragma unroll 1
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

// Counters another GPU (or the proxy) writes: 8-byte volatile words.
__device__ __forceinline__ uint64_t ld_vol(const char* p) {
  return *reinterpret_cast<const volatile uint64_t*>(p);
}
__device__ __forceinline__ void st_vol(char* p, uint64_t v) {
  *reinterpret_cast<volatile uint64_t*>(p) = v;
}

// Waits on LL lines (the mailbox's, the plan kernel's ll ring) with
// dev::Waiter's rule, the timeout counted from t0 (the kernel's or the
// pass's start). `stop` is the block's shared flag: once one thread gives
// up, the block's other waits end too.
struct Spin {
  dev::GiveUp g;
  uint64_t t0;
  int* stop;

  // True with the line's data in *v; false when this wait gave up (blamed
  // on peer, in the DevOpKind kind).
  __device__ bool wait(const char* p, uint32_t flag, uint64_t* v, int peer,
                       int kind = kDevRecv) const {
    dev::Waiter w(t0);
    while (!load_line(p, flag, v))
      if (dev::tick_or_stop(w, g, stop, peer, kind)) return false;
    return true;
  }
};

// The rank-order fold of mailbox lines: for kU lines of this thread (those
// with want[u]), acc[u] = src_0 <op> src_1 <op> ... <op> src_{n-1}, where
// source `me` is mine[u] and every other source s is the LL line at(s, u).
// The loads of kSrc sources are issued before waiting on any. Every rank
// folding the same lines gets bit-identical results. False when a wait gave
// up (acc is then meaningless).
template <typename T, int OP, int kU, int kSrc, typename At>
__device__ __forceinline__ bool fold_lines(int n, int me, const bool (&want)[kU],
                                           const uint64_t (&mine)[kU], At at, uint32_t flag,
                                           const Spin& spin, uint64_t (&acc)[kU]) {
#pragma unroll
  for (int u = 0; u < kU; ++u) acc[u] = 0;
  for (int s0 = 0; s0 < n; s0 += kSrc) {
    uint64_t v[kU][kSrc];
    bool ok[kU][kSrc];
#pragma unroll
    for (int u = 0; u < kU; ++u)
#pragma unroll
      for (int j = 0; j < kSrc; ++j) {
        const int s = s0 + j;
        ok[u][j] = true;
        v[u][j] = mine[u];
        if (want[u] && s < n && s != me) ok[u][j] = load_line(at(s, u), flag, &v[u][j]);
      }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
#pragma unroll
      for (int j = 0; j < kSrc; ++j)
        if (!ok[u][j] && !spin.wait(at(s0 + j, u), flag, &v[u][j], s0 + j)) return false;
    }
    // Source 0 starts the accumulator.
#pragma unroll
    for (int u = 0; u < kU; ++u)
#pragma unroll
      for (int j = 0; j < kSrc; ++j) {
        const int s = s0 + j;
        if (s == 0)
          acc[u] = v[u][j];
        else if (s < n)
          acc[u] = reduce8<T, OP>(acc[u], v[u][j]);
      }
  }
  return true;
}

// Lines [lbeg, lend): emit(l, r) with r = the rank-order fold
// (fold_lines) of mine(l) (my own line) and every peer s's LL line at
// from(s) + 16 l (s's slot of my inbox), Avg dividing by avg_n (0: none).
// Thread t takes lines lbeg + t + j * blockDim.x, kU of them a round, and
// reads each of its own lines before emitting it, so emit may overwrite
// what mine read. Line numbers fit 32 bits: the config caps what the
// mailbox kernels move at 64 MiB (MYCOLL_GPU_*_BYTES). False when a wait
// gave up.
template <typename T, int OP, int kU, int kSrc, typename Mine, typename From, typename Emit>
__device__ __forceinline__ bool fold_range(int n, int me, uint32_t lbeg, uint32_t lend,
                                           Mine mine_of, From from, Emit emit, int avg_n,
                                           uint32_t flag, const Spin& spin) {
  const uint32_t nt = blockDim.x;
  for (uint32_t l0 = lbeg + threadIdx.x; l0 < lend && !dev::stop_raised(spin.stop); l0 += nt * kU) {
    uint64_t acc[kU], mine[kU];
    bool want[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const uint32_t l = l0 + u * nt;
      want[u] = l < lend;
      mine[u] = want[u] ? mine_of(l) : 0;
    }
    auto at = [&](int s, int u) { return from(s) + uint64_t(l0 + u * nt) * 16; };
    if (!fold_lines<T, OP, kU, kSrc>(n, me, want, mine, at, flag, spin, acc)) return false;
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      if (!want[u]) continue;
      uint64_t r = acc[u];
      if (avg_n) r = dev::div_avg_packed<T>(r, avg_n);
      emit(l0 + u * nt, r);
    }
  }
  return true;
}

}  // namespace ll
}  // namespace mycoll
