// Low-latency point-to-point kernel: a batch of small sends and receives
// (every slice within the ll limit, every peer on CUDA IPC) moved through
// the per-(peer, channel) ll rings of the inboxes, without the plan kernel's
// per-step op lists, warp groups and barriers.
//
// Wire protocol: exactly the plan kernel's ll pass (kernels/colls/plan.cu),
// so a slice sent by either kernel is received by either kernel:
//   a slice of B bytes takes need = ceil(B / LD) slots of the ring (LD =
//   ll_slot_bytes / 2 data bytes per slot, LPS = ll_slot_bytes / 16 lines),
//   starting at the key's counter `base` (state[2] sent, state[3] received,
//   in my inbox). Line l of the slice (bytes 8l .. 8l+7) is the 16-byte line
//   {lo, flag, hi, flag} at ring + ((base + l / LPS) % ll_slots) *
//   ll_slot_bytes + (l % LPS) * 16 with flag = base + l / LPS + 1.
//   send: wait until base + need - ll_tail <= ll_slots (ll_tail: the slots
//     the receiver handed back, in my inbox), store every line, then
//     state[2] = base + need.
//   recv: poll every line until it carries its flag, store the data, then
//     (all loads returned) state[3] = base + need and the same value into
//     the sender's inbox as its ll_tail (the credit).
//   Both: the slice's message bytes in size line base (the send writes it
//     with the slice's lines, the receive compares it before it takes the
//     slice: kernels/prims/p2p_size.cuh). A receive that finds none yet
//     also looks at the bandwidth FIFO's size line at its receive count
//     there (state[1]): a sender whose message is above the ll limit put
//     it there, a size mismatch.
// Slices of one key (peer, channel, direction) are handled strictly in batch
// order by one thread block, as the plan kernel orders ops of one peer and
// direction on a channel (earlier_pending): the counters are cumulative.
// Different keys run in parallel blocks.
//
// Parameters travel by value (P2pLlParams, __grid_constant__): pointers to
// the rings, credits and counters computed on the host, nothing read from a
// device-memory plan. The counters live in the inboxes, so CUDA graph
// replays work like eager calls.
//
// Every wait gives up like the plan kernel: MYCOLL_TIMEOUT without progress,
// the host-mapped abort flag (a PCIe read: every 64K spins), or another
// block or kernel of this rank that gave up (DevError set); the first reason
// is recorded in DevError with the peer and direction.
#include <cuda_runtime.h>

#include "kernels/device_plan.h"
#include "kernels/dispatch.cuh"
#include "kernels/launch.h"
#include "kernels/prims/ll.cuh"
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

// Small batches (the common case) get a small parameter block.
constexpr int kSmallKeys = 8;
constexpr int kSmallSlices = 16;

using ll::ld_vol;
using ll::st_vol;

// Ring offset of line l of a slice starting at slot sequence `base`
// (bmod = base % slots): slot index and line within it.
__device__ __forceinline__ uint64_t line_off(uint32_t l, uint32_t bmod, uint32_t slots,
                                             uint32_t lps, uint32_t lsb) {
  uint32_t idx = bmod + l / lps;  // l / lps < need <= slots, so < 2 * slots
  if (idx >= slots) idx -= slots;
  return uint64_t(idx) * lsb + uint64_t(l % lps) * 16;
}

template <int K, int S>
__device__ void send_key(const P2pLlParams<K, S>& p, const P2pLlKey& key, int* stop) {
  const P2pLlCommon& c = p.c;
  const dev::GiveUp g = dev::GiveUp::of(c);
  const uint32_t lsb = c.ll_slot_bytes, ld = lsb / 2, lps = lsb / 16, slots = c.ll_slots;
  const int tid = threadIdx.x, nt = blockDim.x;
  uint64_t base = *key.count;
  uint64_t tail = 0;  // thread 0: the receiver's latest credit seen
  for (int s = key.first; s < key.first + key.n; ++s) {
    const char* src = reinterpret_cast<const char*>(p.ptr[s]);
    const uint32_t nb = p.bytes[s];
    const uint32_t need = (nb + ld - 1) / ld, lines = (nb + 7) / 8;
    const uint32_t bmod = uint32_t(base % slots);
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
        // The whole slice must fit the ring before any line goes out (the
        // plan kernel's rule); the data loads above are in flight meanwhile.
        bool quit = false;
        if (tid == 0) {
          dev::Waiter w(0);
          while (base + need - tail > slots && !quit) {
            tail = ld_vol(key.credit);
            if (dev::send_refused(g, tail, key.peer, p.msg[s])) {
              dev::raise_stop(stop);
              quit = true;
            } else if (base + need - tail > slots) {
              quit = dev::tick_or_stop(w, g, stop, key.peer, kDevSend);
            }
          }
          if (!quit) dev::post_size(key.sizes, slots, base, p.msg[s]);
        }
        if (__syncthreads_or(quit)) return;
      }
#pragma unroll
      for (int u = 0; u < kL; ++u) {
        if (!valid[u]) continue;
        const uint32_t l = r0 + u * nt + tid;
        ll::store_line(key.ring + line_off(l, bmod, slots, lps, lsb), v[u],
                       uint32_t(base + l / lps + 1));
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
  const uint32_t lsb = c.ll_slot_bytes, ld = lsb / 2, lps = lsb / 16, slots = c.ll_slots;
  const int tid = threadIdx.x, nt = blockDim.x;
  uint64_t base = *key.count;
  for (int s = key.first; s < key.first + key.n; ++s) {
    char* dst = reinterpret_cast<char*>(p.ptr[s]);
    const uint32_t nb = p.bytes[s];
    const uint32_t need = (nb + ld - 1) / ld, lines = (nb + 7) / 8;
    const uint32_t bmod = uint32_t(base % slots);
    bool quit = false;
    for (uint32_t r0 = 0; r0 < lines && !quit; r0 += uint32_t(nt) * kL) {
      uint64_t v[kL];
      bool ok[kL];
      int valid[kL];
      const char* line[kL];
      uint32_t flag[kL];
      // Every line of the round is requested before any is waited for.
      uint64_t theirs = 0;
      const bool first = r0 == 0 && tid == 0;  // checks the slice's size
      bool sized = first && dev::peek_size(key.sizes, slots, base, &theirs);
#pragma unroll
      for (int u = 0; u < kL; ++u) {
        const uint32_t l = r0 + u * nt + tid;
        ok[u] = true;
        valid[u] = 0;
        if (l >= lines) continue;
        valid[u] = ll::bytes_in_line(nb, l);
        line[u] = key.ring + line_off(l, bmod, slots, lps, lsb);
        flag[u] = uint32_t(base + l / lps + 1);
        ok[u] = ll::load_line(line[u], flag[u], &v[u]);
      }
      if (first) {
        // The sender's size before any data wait (lines it did not send
        // would never come); none yet: its message may have taken the
        // bandwidth FIFO (its size above the ll limit).
        dev::Waiter w(0);
        uint64_t seen = 0;
        while (!sized && !quit) {
          sized = dev::peek_size(key.sizes, slots, base, &theirs);
          if (sized) break;
          const dev::OtherRing fifo{key.fifo_sizes, c.fifo_slots, *key.fifo_count, key.fifo_credit};
          if (dev::sent_on_other_ring(g, key.peer, p.msg[s], fifo, &seen)) {
            dev::raise_stop(stop);
            quit = true;
          } else {
            quit = dev::tick_or_stop(w, g, stop, key.peer, kDevRecv);
          }
        }
        if (sized && dev::size_differs(g, key.peer, p.msg[s], theirs, key.credit)) {
          dev::raise_stop(stop);
          quit = true;
        }
      }
#pragma unroll
      for (int u = 0; u < kL; ++u) {
        dev::Waiter w(0);
        while (!ok[u] && !quit) {
          ok[u] = ll::load_line(line[u], flag[u], &v[u]);
          if (!ok[u]) quit = dev::tick_or_stop(w, g, stop, key.peer, kDevRecv);
        }
      }
      if (quit) break;
#pragma unroll
      for (int u = 0; u < kL; ++u)
        if (valid[u]) ll::store8(dst + uint64_t(r0 + u * nt + tid) * 8, v[u], valid[u]);
    }
    // Every load of the slice has returned (its data was stored): hand the
    // slots back. No data of ours travels with this store.
    if (__syncthreads_or(quit)) return;
    base += need;
    if (tid == 0) {
      *key.count = base;
      st_vol(key.credit, base);
    }
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
  cudaError_t e = preload_kernel(p2p_ll_kernel<kSmallKeys, kSmallSlices>);
  cudaError_t r = preload_kernel(p2p_ll_kernel<kP2pLlMaxKeys, kP2pLlMaxSlices>);
  return e != cudaSuccess ? e : r;
}

cudaError_t launch_p2p_ll(const P2pLlCommon& c, const P2pLlKey* keys, const uint64_t* ptr,
                          const uint32_t* bytes, const uint32_t* msg, int nslices, int threads,
                          cudaStream_t stream) {
  if (c.nkeys < 1 || c.nkeys > kP2pLlMaxKeys || nslices < 1 || nslices > kP2pLlMaxSlices ||
      threads < 32 || threads > kP2pLlMaxThreads || threads % 32 != 0)
    return cudaErrorInvalidValue;
  if (c.nkeys <= kSmallKeys && nslices <= kSmallSlices)
    return launch_k<kSmallKeys, kSmallSlices>(c, keys, ptr, bytes, msg, nslices, threads, stream);
  return launch_k<kP2pLlMaxKeys, kP2pLlMaxSlices>(c, keys, ptr, bytes, msg, nslices, threads,
                                                  stream);
}

}  // namespace mycoll
