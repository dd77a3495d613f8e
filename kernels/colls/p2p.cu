// Low-latency point-to-point kernel: a batch of small sends and receives (every slice within
// the ll limit, every peer on CUDA IPC) moved through the ll rings of the inboxes.
// What an edit must keep: the wire protocol is the LL ring's (kernels/prims/ll_ring.cuh) as
// the plan kernel's ll pass moves it, a slice one message with its size line
// (kernels/prims/p2p_size.cuh), so either kernel receives what either sent; one block per
// key (peer, channel, direction) takes the key's slices strictly in batch order, as the plan
// kernel does (earlier_pending). docs/algorithms.md, "GPU LL point-to-point kernel".
#include <cuda_runtime.h>

#include "kernels/device_plan.h"
#include "kernels/dispatch.cuh"
#include "kernels/launch.h"
#include "kernels/prims/ll.cuh"
#include "kernels/prims/ll_ring.cuh"
#include "kernels/prims/p2p_size.cuh"
#include "kernels/prims/wait.cuh"

namespace mycoll {
namespace {

constexpr int kL = kP2pLlUnroll;

template <int K, int S>
struct P2pLlParams {
  P2pLlCommon c;
  P2pLlKey keys[K];
  uint64_t ptr[S];
  uint32_t bytes[S];
  uint32_t msg[S];  // the whole message's bytes (the size check)
};

// Kernel parameters by value are limited to 32,764 bytes (CUDA 12.1+, Volta+).
static_assert(sizeof(P2pLlParams<kP2pLlMaxKeys, kP2pLlMaxSlices>) <= 32764, "P2pLlParams size");

// Small batches (the common case) get a small parameter block, middle ones
// a middle one.
constexpr int kSmallKeys = 8;
constexpr int kSmallSlices = 16;
constexpr int kMidKeys = 64;
constexpr int kMidSlices = 128;

template <int K, int S>
__device__ void send_key(const P2pLlParams<K, S>& p, const P2pLlKey& key, int* stop) {
  const dev::GiveUp g = dev::GiveUp::of(p.c);
  const ll::Ring ring(p.c.ll_slots, p.c.ll_slot_bytes);
  const int tid = threadIdx.x, nt = blockDim.x;
  uint64_t base = *key.count;
  for (int s = key.first; s < key.first + key.n; ++s) {
    const char* src = reinterpret_cast<const char*>(p.ptr[s]);
    const uint32_t nb = p.bytes[s];
    const uint32_t need = ring.need(nb), lines = (nb + 7) / 8, bmod = ring.start(base);
    for (uint32_t r0 = 0; r0 < lines; r0 += uint32_t(nt) * kL) {
      uint64_t v[kL];
      int valid[kL];
#pragma unroll
      for (int u = 0; u < kL; ++u) {
        const uint32_t l = r0 + u * nt + tid;
        valid[u] = l < lines ? ll::bytes_in_line(nb, l) : 0;
        if (valid[u]) v[u] = ll::load8(src + uint64_t(l) * 8, valid[u]);
      }
      if (r0 == 0) {
        // The whole slice must fit the ring before any line goes out; the
        // data loads above are in flight meanwhile.
        bool quit = false;
        if (tid == 0)
          quit = !dev::wait_gate(g, stop, key.peer, kDevSend, [&] {
            return ll::admit_send(ring, g, key.credit, key.sizes, base, need, key.peer, p.msg[s]);
          });
        if (__syncthreads_or(quit)) return;
      }
#pragma unroll
      for (int u = 0; u < kL; ++u) {
        if (!valid[u]) continue;
        const ll::Ring::Line ln = ring.line(base, bmod, r0 + u * nt + tid);
        ll::store_line(key.ring + ln.off, v[u], ln.flag);
      }
    }
    base += need;
  }
  if (tid == 0) *key.count = base;
}

template <int K, int S>
__device__ void recv_key(const P2pLlParams<K, S>& p, const P2pLlKey& key, int* stop) {
  const P2pLlCommon& c = p.c;
  const dev::GiveUp g = dev::GiveUp::of(c);
  const ll::Ring ring(c.ll_slots, c.ll_slot_bytes);
  const int tid = threadIdx.x, nt = blockDim.x;
  uint64_t base = *key.count;
  for (int s = key.first; s < key.first + key.n; ++s) {
    char* dst = reinterpret_cast<char*>(p.ptr[s]);
    const uint32_t nb = p.bytes[s];
    const uint32_t need = ring.need(nb), lines = (nb + 7) / 8, bmod = ring.start(base);
    bool quit = false;
    for (uint32_t r0 = 0; r0 < lines && !quit; r0 += uint32_t(nt) * kL) {
      uint64_t v[kL];
      bool ok[kL];
      int valid[kL];
      const char* line[kL];
      uint32_t flag[kL];
      // Every line of the round is requested before any is waited for.
#pragma unroll
      for (int u = 0; u < kL; ++u) {
        const uint32_t l = r0 + u * nt + tid;
        ok[u] = true;
        valid[u] = 0;
        if (l >= lines) continue;
        valid[u] = ll::bytes_in_line(nb, l);
        const ll::Ring::Line ln = ring.line(base, bmod, l);
        line[u] = key.ring + ln.off;
        flag[u] = ln.flag;
        ok[u] = ll::load_line(line[u], flag[u], &v[u]);
      }
      if (r0 == 0 && tid == 0) {
        // The sender's size before any data wait (lines it did not send
        // would never come); none yet: its message may have taken the
        // bandwidth FIFO (its size above the ll limit).
        dev::OtherRingWatch watch{0, 0};
        auto in_fifo = [&] {
          return dev::sent_on_other_ring(g, key.peer, p.msg[s], &watch, [&] {
            return dev::OtherRing{key.fifo_sizes, c.fifo_slots, *key.fifo_count, key.fifo_credit};
          });
        };
        quit = !dev::wait_gate(g, stop, key.peer, kDevRecv, [&] {
          return dev::check_size(g, key.peer, p.msg[s], key.sizes, ring.slots, base, key.credit,
                                 in_fifo);
        });
      }
      // The lines still missing are polled together, one load each per
      // poll, so they cost one load's wait, not one each after another
      // (thread 0's first loads went out before its size gate and are stale
      // by the time it passes). Any line that arrives restarts the timeout.
      for (dev::Waiter w(0); !quit;) {
        bool missing = false, arrived = false;
#pragma unroll
        for (int u = 0; u < kL; ++u)
          if (!ok[u]) {
            ok[u] = ll::load_line(line[u], flag[u], &v[u]);
            missing |= !ok[u];
            arrived |= ok[u];
          }
        if (!missing) break;
        if (arrived) w = dev::Waiter(0);
        quit = dev::tick_or_stop(w, g, stop, key.peer, kDevRecv);
      }
      if (quit) break;
#pragma unroll
      for (int u = 0; u < kL; ++u)
        if (valid[u]) ll::store8(dst + uint64_t(r0 + u * nt + tid) * 8, v[u], valid[u]);
    }
    if (__syncthreads_or(quit)) return;
    base += need;
    if (tid == 0) ll::release(key.count, key.credit, base);
  }
}

template <int K, int S>
__global__ void __launch_bounds__(kP2pLlMaxThreads, 1)
    p2p_ll_kernel(const __grid_constant__ P2pLlParams<K, S> p) {
  __shared__ int stop;
  if (threadIdx.x == 0) stop = 0;
  __syncthreads();
  const P2pLlKey& key = p.keys[blockIdx.x];
  if (key.kind == kDevSend)
    send_key(p, key, &stop);
  else
    recv_key(p, key, &stop);
}

template <int K, int S>
cudaError_t launch_k(const P2pLlCommon& c, const P2pLlKey* keys, const uint64_t* ptr,
                     const uint32_t* bytes, const uint32_t* msg, int nslices, int threads,
                     cudaStream_t s) {
  P2pLlParams<K, S> p;
  p.c = c;
  for (int k = 0; k < c.nkeys; ++k) p.keys[k] = keys[k];
  for (int i = 0; i < nslices; ++i) {
    p.ptr[i] = ptr[i];
    p.bytes[i] = bytes[i];
    p.msg[i] = msg[i];
  }
  p2p_ll_kernel<K, S><<<c.nkeys, threads, 0, s>>>(p);
  return cudaGetLastError();
}

}  // namespace

cudaError_t preload_p2p_kernels() {
  return first_error({preload_kernel(p2p_ll_kernel<kSmallKeys, kSmallSlices>),
                      preload_kernel(p2p_ll_kernel<kMidKeys, kMidSlices>),
                      preload_kernel(p2p_ll_kernel<kP2pLlMaxKeys, kP2pLlMaxSlices>)});
}

cudaError_t launch_p2p_ll(const P2pLlCommon& c, const P2pLlKey* keys, const uint64_t* ptr,
                          const uint32_t* bytes, const uint32_t* msg, int nslices, int threads,
                          cudaStream_t stream) {
  if (c.nkeys < 1 || c.nkeys > kP2pLlMaxKeys || nslices < 1 || nslices > kP2pLlMaxSlices ||
      threads < 32 || threads > kP2pLlMaxThreads || threads % 32 != 0)
    return cudaErrorInvalidValue;
  if (c.nkeys <= kSmallKeys && nslices <= kSmallSlices)
    return launch_k<kSmallKeys, kSmallSlices>(c, keys, ptr, bytes, msg, nslices, threads, stream);
  if (c.nkeys <= kMidKeys && nslices <= kMidSlices)
    return launch_k<kMidKeys, kMidSlices>(c, keys, ptr, bytes, msg, nslices, threads, stream);
  return launch_k<kP2pLlMaxKeys, kP2pLlMaxSlices>(c, keys, ptr, bytes, msg, nslices, threads,
                                                  stream);
}

}  // namespace mycoll
