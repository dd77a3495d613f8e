// Low-latency (LL) line helpers shared by device code. An LL line is 16
// bytes {data_lo32, flag32, data_hi32, flag32} written with one 16-byte
// store: a reader that sees `flag` in both halves has both data halves (each
// 8-byte half {data, flag} arrives whole), so no fence and no separate flag
// store is needed. 8 data bytes per line.
// Also the waiting, giving-up and epoch helpers of the one-kernel
// all-reduces (kernels/oneshot_kernel.cu, kernels/twoshot_kernel.cu).
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/device_plan.h"
#include "kernels/reduce_ops.cuh"
#include "mycoll.h"

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

// Every lane of packed elements (V: 8 or 16 bytes) divided by n (the Avg
// of a sum).
template <typename T, typename V>
__device__ __forceinline__ V div_avg_packed(V a, int n) {
  constexpr int N = sizeof(V) / sizeof(T);
  T x[N];
  memcpy(x, &a, sizeof(V));
#pragma unroll
  for (int i = 0; i < N; ++i) x[i] = dev::div_avg<T>(x[i], n);
  V r;
  memcpy(&r, x, sizeof(V));
  return r;
}
template <typename T>
__device__ __forceinline__ uint64_t div_avg8(uint64_t a, int n) {
  return div_avg_packed<T>(a, n);
}

// ---- One-kernel all-reduces: waiting, giving up, epochs ----

// Records why this rank's kernel gave up (the first reason wins): code,
// the peer it waited on and the DevOpKind it was waiting in.
__device__ inline void record_error(DevError* e, int rank, int code, int peer, int kind) {
  if (atomicCAS(&e->code, 0, code) == 0) {
    e->peer = peer;
    e->rank = rank;
    e->kind = kind;
    __threadfence_system();
  }
}
__device__ inline void give_up(const DevComm& cm, int code, int peer, int kind = kDevRecv) {
  record_error(cm.error, cm.rank, code, peer, kind);
}

// FIFO counters: 8-byte words another GPU (or the proxy) writes.
__device__ __forceinline__ uint64_t ld_vol(const char* p) {
  return *reinterpret_cast<const volatile uint64_t*>(p);
}
__device__ __forceinline__ void st_vol(char* p, uint64_t v) {
  *reinterpret_cast<volatile uint64_t*>(p) = v;
}

// Polls lines of peers until they carry the launch's flag, giving up like the
// plan kernel: the host-mapped abort flag (a PCIe read: every 64K spins),
// another block or kernel of this rank that gave up (DevError set), and
// MYCOLL_TIMEOUT counted from the kernel's start (t0). `stop` is the block's
// shared flag: once one thread gives up, the block's other waits end too.
struct Spin {
  const DevComm* cm;
  uint64_t t0;
  uint64_t timeout_ns;
  volatile int* stop;

  // True with the line's data in *v; false when this wait gave up.
  __device__ bool wait(const char* p, uint32_t flag, uint64_t* v, int peer) const {
    uint32_t spins = 0;
    while (!load_line(p, flag, v)) {
      if ((++spins & 1023) != 0) continue;
      int code = 0;
      if ((spins & 0xffff) == 0 &&
          (*cm->abort || *reinterpret_cast<volatile int32_t*>(&cm->error->code)))
        code = *cm->abort ? mycollRemoteError : -1;
      else if (globaltimer() - t0 > timeout_ns)
        code = mycollTimeout;
      if (code > 0) give_up(*cm, code, peer);
      if (code || *stop) {
        *stop = 1;
        return false;
      }
    }
    return true;
  }
};

// The launch's flag for epoch e: never 0 (inboxes start zeroed).
__device__ __forceinline__ uint32_t epoch_flag(uint64_t e) {
  return uint32_t(e % 0xffffffffull) + 1;
}

// End of a launch, after the block's __syncthreads(), by one thread of each
// block: the last block of the launch to count itself resets the counter and
// moves the epoch on. Every block read the epoch before counting itself
// (fence), and the next launch is stream-ordered after this one, so no block
// ever reads a moved epoch.
__device__ inline void epoch_block_done(char* ctl, uint64_t e) {
  unsigned int* done = reinterpret_cast<unsigned int*>(ctl + 8);
  __threadfence();  // this block's read of the epoch before its count
  if (atomicAdd(done, 1u) == gridDim.x - 1) {
    __threadfence();
    *reinterpret_cast<volatile unsigned int*>(done) = 0;
    *reinterpret_cast<volatile uint64_t*>(ctl) = e + 1;
  }
}

}  // namespace ll
}  // namespace mycoll
