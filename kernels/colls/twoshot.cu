// Two-shot all-reduce for mid-size messages on GPU communicators whose peers
// are all mapped over CUDA IPC: a reduce-scatter and an all-gather in one
// kernel, LL lines straight into the peers' inboxes (the mailbox,
// kernels/device_plan.h), 2(n-1)/n of the message out per rank instead of
// one-shot's n-1.
//
// Parts: the message's L lines (8 data bytes each; at least n lines are
// counted, the ones past the message carry zeros and are never stored, so
// every part has a line) are cut into n contiguous parts of whole lines,
// sizes differing by at most one; part j belongs to rank j.
// Protocol of launch number e (the epoch and mailbox shared with the
// one-shot and LL-collective kernels, kernels/prims/epoch.cuh: flag f(e),
// parity b = e & 1; A and B are the two halves of a mailbox slot):
//   A. rank r writes its input lines of part j into rank j's inbox at
//      A(sender r, b), for every j != r;
//   B. rank r polls A(s, b) of its inbox for its part from every peer s,
//      reduces in rank order 0..n-1 (its own input at position r; Avg
//      divides the sum by n), writes the result to its output and into every
//      peer p's inbox at B(sender r, b);
//   C. rank r polls B(s, b) of its inbox for part s from every peer s and
//      writes those lines to its output.
// Only rank j computes part j, so every rank ends with the same bits.
//
// Blocks: block g owns the same range of line offsets [o0, o1) inside every
// part, on every rank (the layout depends only on bytes, n and the block
// count, which all ranks share). Every wait is on a line a peer's block g
// writes before it waits on anything of its own in that phase, never on
// another block of this launch: a block that is not resident yet only delays
// its own lines. The grid needs no co-residency: with blocks dispatched in
// index order (what the hardware does), the lowest unfinished block index is
// resident on every rank, so it completes. (Blocks of one index waiting on
// each other across ranks while other indices hold every SM would need
// dispatch out of order on some rank.)
//
// In place (out == in): a line of the user buffer is touched by one block
// only (its offset). In phase A the block reads its input lines of every
// part but its own; a __syncthreads() separates that from phases B and C.
// In phase B the thread that writes output line l of my part has loaded
// input line l itself (the same thread, before). Phase C writes lines of the
// other parts, all read in phase A before the barrier. So no input line is
// overwritten before it was read.
//
// Two parities suffice with the three mailbox kernels interleaved
// (kernels/prims/epoch.cuh): part r has at least one line, whose A copy
// every peer writes in its launch, so r's launch waits for every peer's.
//
// Epoch update and failures as in the one-shot kernel (kernels/prims/):
// the last block done moves the epoch on; every wait gives up on the abort
// flag or MYCOLL_TIMEOUT and records DevError.
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/device_plan.h"
#include "kernels/dispatch.cuh"
#include "kernels/launch.h"
#include "kernels/prims/call_check.cuh"
#include "kernels/prims/epoch.cuh"
#include "kernels/prims/ll.cuh"
#include "kernels/reduce_ops.cuh"

namespace mycoll {
namespace {

constexpr int kThreads = 512;
constexpr int kMaxBlocks = 128;        // H200: 132 SMs
constexpr uint64_t kBlockLines = 128;  // another block per this many lines of a part
constexpr int kSend = 4;               // phase A: lines loaded before storing
constexpr int kU = 2;                  // phase B: lines per thread and round of polls
constexpr int kSrc = 8;                // phase B: sources polled at once
constexpr int kRecv = 4;               // phase C: lines polled at once

// Parts of a message: n parts of whole lines over max(lines, n) lines.
struct Parts {
  uint32_t base, rem;
  __device__ Parts(uint64_t lines, int n) {
    const uint64_t lx = lines > uint64_t(n) ? lines : uint64_t(n);
    base = uint32_t(lx / n);
    rem = uint32_t(lx % n);
  }
  __device__ uint64_t start(int j) const {
    return uint64_t(j) * base + (uint32_t(j) < rem ? j : rem);
  }
  __device__ uint32_t len(int j) const { return base + (uint32_t(j) < rem ? 1 : 0); }
  __device__ uint32_t max_len() const { return base + (rem > 0 ? 1 : 0); }
};

template <typename T, int OP>
__global__ void __launch_bounds__(kThreads) twoshot_kernel(CollKArgs a) {
  __shared__ uint64_t s_epoch;
  __shared__ int s_stop;
  const DevComm& cm = *a.comm;
  // In registers: the LL asm's memory clobbers would reload them from cm.
  const uint64_t mb_base = cm.mb_base, slot_bytes = cm.mb_slot, half = cm.ts_half;
  const int n = cm.nranks, me = cm.rank;
  const char* const local = cm.local;
  char* const ctl = cm.mb_ctl;
  const ll::Spin spin{dev::GiveUp::of(cm), dev::globaltimer(), &s_stop};
  const uint64_t call = dev::call_begin(cm, a.sig);
  if (threadIdx.x == 0) s_stop = 0;
  const dev::Epoch ep = dev::epoch_begin(ctl, &s_epoch);
  dev::call_check(cm, a.sig, call);
  const uint32_t flag = ep.flag;
  const int parity = ep.parity;
  // Sender s's slot of this launch's parity (FifoGeom::mb_off).
  auto slot_of = [&](int s) { return mb_base + (uint64_t(s) * 2 + parity) * slot_bytes; };
  const uint64_t lines = (a.bytes + 7) / 8;
  const Parts parts(lines, n);
  const uint32_t per = (parts.max_len() + gridDim.x - 1) / gridDim.x;
  const uint32_t o0 = blockIdx.x * per;
  const uint32_t o1 = o0 + per < parts.max_len() ? o0 + per : parts.max_len();
  const uint32_t cnt = o1 > o0 ? o1 - o0 : 0;  // offsets of this block in each part
  const uint32_t nt = blockDim.x;
  // Line l of the user buffers (zeros past the message; nothing stored there).
  auto load_in = [&](uint64_t l) {
    if (l >= lines) return uint64_t(0);
    return ll::load8(a.in + l * 8, a.bytes - l * 8 < 8 ? int(a.bytes - l * 8) : 8);
  };
  auto store_out = [&](uint64_t l, uint64_t v) {
    if (l < lines) ll::store8(a.out + l * 8, v, a.bytes - l * 8 < 8 ? int(a.bytes - l * 8) : 8);
  };
  // Item i of phases A and C: offset o0 + i % cnt of the part of peer me +- k.
  const uint32_t items = uint32_t(n - 1) * cnt;
  auto peer_of = [&](uint32_t i, bool up) {
    const int k = int(i / cnt) + 1;
    return up ? (me + k < n ? me + k : me + k - n) : (me - k >= 0 ? me - k : me - k + n);
  };

  // A. My input lines of every other part to its owner (loads first).
  const uint64_t a_send = slot_of(me);
  for (uint32_t i0 = threadIdx.x; i0 < items; i0 += nt * kSend) {
    uint64_t v[kSend];
#pragma unroll
    for (int u = 0; u < kSend; ++u) {
      const uint32_t i = i0 + u * nt;
      if (i >= items) continue;
      const int p = peer_of(i, true);
      const uint32_t o = o0 + i % cnt;
      v[u] = o < parts.len(p) ? load_in(parts.start(p) + o) : 0;
    }
#pragma unroll
    for (int u = 0; u < kSend; ++u) {
      const uint32_t i = i0 + u * nt;
      if (i >= items) continue;
      const int p = peer_of(i, true);
      const uint32_t o = o0 + i % cnt;
      if (o < parts.len(p)) ll::store_line(cm.remote[p] + a_send + uint64_t(o) * 16, v[u], flag);
    }
  }
  __syncthreads();  // in place: every input line of phase A read before C writes

  // B. My part: everyone's lines reduced in rank order, to my output and to
  // every peer.
  const uint64_t mine0 = parts.start(me);
  const uint32_t mend = o1 < parts.len(me) ? o1 : parts.len(me);
  const uint64_t b_send = slot_of(me) + half;
  for (uint32_t q0 = o0 + threadIdx.x; q0 < mend && !dev::stop_raised(&s_stop); q0 += nt * kU) {
    uint64_t acc[kU], mine[kU];
    bool want[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const uint32_t o = q0 + u * nt;
      want[u] = o < mend;
      mine[u] = want[u] ? load_in(mine0 + o) : 0;
    }
    auto at = [&](int s, int u) { return local + slot_of(s) + uint64_t(q0 + u * nt) * 16; };
    if (!ll::fold_lines<T, OP, kU, kSrc>(n, me, want, mine, at, flag, spin, acc)) break;
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const uint32_t o = q0 + u * nt;
      if (o < mend && a.avg_n) acc[u] = ll::div_avg8<T>(acc[u], a.avg_n);
    }
    for (int k = 1; k < n; ++k) {
      const int p = me + k < n ? me + k : me + k - n;
      char* dst = cm.remote[p] + b_send;
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const uint32_t o = q0 + u * nt;
        if (o < mend) ll::store_line(dst + uint64_t(o) * 16, acc[u], flag);
      }
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const uint32_t o = q0 + u * nt;
      if (o < mend) store_out(mine0 + o, acc[u]);
    }
  }

  // C. The other parts, reduced by their owners, into my output.
  for (uint32_t i0 = threadIdx.x; i0 < items && !dev::stop_raised(&s_stop); i0 += nt * kRecv) {
    uint64_t v[kRecv];
    bool ok[kRecv];
#pragma unroll
    for (int u = 0; u < kRecv; ++u) {
      const uint32_t i = i0 + u * nt;
      ok[u] = true;
      v[u] = 0;
      if (i >= items) continue;
      const int s = peer_of(i, false);
      const uint32_t o = o0 + i % cnt;
      if (o < parts.len(s))
        ok[u] = ll::load_line(local + slot_of(s) + half + uint64_t(o) * 16, flag, &v[u]);
    }
    bool quit = false;
#pragma unroll
    for (int u = 0; u < kRecv; ++u) {
      const uint32_t i = i0 + u * nt;
      if (i >= items) continue;
      const int s = peer_of(i, false);
      const uint32_t o = o0 + i % cnt;
      if (o >= parts.len(s)) continue;
      if (!ok[u] && !quit &&
          !spin.wait(local + slot_of(s) + half + uint64_t(o) * 16, flag, &v[u], s))
        quit = true;
      if (!quit) store_out(parts.start(s) + o, v[u]);
    }
    if (quit) break;
  }

  // The last block done moves the epoch on (kernels/prims/epoch.cuh).
  dev::epoch_end(ctl, ep);
}

MYCOLL_DEFINE_LAUNCH(Launch, CollKArgs, kThreads, twoshot_kernel<T, OP>)

}  // namespace

cudaError_t preload_twoshot_kernels() { return preload_dtype_op<Launch>(); }

int twoshot_blocks(uint64_t bytes, int nranks) {
  if (nranks < 1) return 1;
  uint64_t lines = (bytes + 7) / 8;
  if (lines < uint64_t(nranks)) lines = nranks;
  return blocks_for_lines((lines + nranks - 1) / nranks, kBlockLines, kMaxBlocks);
}

cudaError_t launch_twoshot(const void* in, void* out, uint64_t bytes, mycollDataType_t t,
                           mycollRedOp_t op, const DevComm* comm, int nranks, int max_blocks,
                           uint64_t sig, cudaStream_t stream) {
  const CollKArgs a =
      coll_kargs(Coll::AllReduce, in, out, bytes, comm, 0, op == mycollAvg, nranks, sig);
  const int nb = std::max(1, std::min(twoshot_blocks(bytes, nranks), max_blocks));
  return dispatch_dtype_op<Launch>(t, op, a, nb, stream);
}

}  // namespace mycoll
