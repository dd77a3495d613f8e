// The LL kernel: every mailbox schedule for small and mid-size messages on GPU communicators
// whose peers are all mapped over CUDA IPC, one launch each: all-reduce in one shot or two
// (reduce-scatter + all-gather), all-gather, reduce-scatter, broadcast, reduce and all-to-all.
// Rank r writes LL lines (kernels/prims/ll.cuh) into peer p's inbox at lc(r, b), its mailbox
// slot, with the flag and parity b of the launch epoch (kernels/prims/epoch.cuh), and reads
// lc(s, b) of its own inbox. `bytes` is one block (two-shot: one part); block g of a launch
// handles one contiguous range of lines of every block.
//
// What an edit must keep (the protocols and the arguments: docs/algorithms.md, "GPU one-shot
// all-reduce (the LL kernel)", "GPU two-shot all-reduce (the LL kernel)" and "GPU LL
// all-gather, reduce-scatter, broadcast, reduce and all-to-all kernel"):
// - Every rank waits for a line that every peer writes in the same launch: data or, where that
//   peer sends it none (broadcast, reduce), an ack (line 0 of the peer's slot, written with the
//   peer's sends). Two parities suffice only then.
// - Folds reduce the sources in rank order 0..n-1, so every rank gets the same bits.
// - Block g waits only on lines that block g of a peer writes before waiting on anything
//   (two-shot: also the fold's results, which wait only on sends), and block 0 on block 0's
//   acks: the grid needs no co-residency.
// - In place, no input line is overwritten before it is read: the one-shot all-reduce at
//   n > 2 and all-to-all need their __syncthreads(); elsewhere the thread that writes a line
//   read it itself (one-shot at n = 2, two-shot, reduce-scatter, reduce).
// - The last block done moves the epoch on; every wait gives up as in kernels/prims/wait.cuh.
#include <cuda_runtime.h>

#include <algorithm>

#include "algorithms/schedule.h"
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
constexpr int kMaxBlocks = 32;
constexpr uint64_t kBlockLines = 256;    // another block per this many lines
constexpr int kTsMaxBlocks = 128;        // two-shot all-reduce (H200: 132 SMs)
constexpr uint64_t kTsBlockLines = 128;  // two-shot: another block per this many lines of a part
constexpr int kU = 4;                    // copies: lines per thread and round of polls
constexpr int kRU = 2;                   // folds: lines per thread and round
// Folds: sources polled at once; 8 ranks poll in two rounds
// (docs/performance.md, "Measurements behind constants").
constexpr int kSrc = 4;
constexpr int kMoveOp = -1;  // the byte mover's instantiation (below)

// One block's view of a launch, in registers (the LL asm's memory clobbers
// would reload values read through cm).
struct Ctx {
  const DevComm* cm;
  int n, me, parity;
  uint32_t flag;
  uint64_t base, slot_bytes, bytes;  // the mailbox (FifoGeom::mb_*), this launch's block bytes
  uint32_t clip;                     // no user byte at or past this offset (two-shot: the message)
  uint32_t lbeg, range;              // this block's lines [lbeg, lbeg + range)
  char* local;
  int* stop;
  ll::Spin spin;  // waits of this launch (the block's stop flag)

  // Sender s's buffer of this launch's parity in the inbox at `inbox`.
  __device__ char* buf(char* inbox, int s) const {
    return inbox + base + (uint64_t(s) * 2 + parity) * slot_bytes;
  }
  // Bytes of line l of the block at byte offset `off` of a user buffer:
  // the block's `bytes`, cut at clip (0 for the two-shot all-reduce's lines
  // past the message; only it clips, kClip). Offsets fit 32 bits:
  // FifoGeom's lc, os and ts bytes are int32.
  template <bool kClip>
  __device__ int valid(uint32_t off, uint32_t l) const {
    if (!kClip) return ll::bytes_in_line(bytes, l);
    const uint32_t at = off + l * 8;
    const int v = ll::bytes_in_line(bytes, l);
    return at >= clip ? 0 : (clip - at < uint32_t(v) ? int(clip - at) : v);
  }
};

// My lines to ndst peers p = first, first + 1, ... (mod n): line l of
// in + p * in_stride into p's lc(me, b). Items (peer, line) spread over the
// threads; every input load of a round before its stores.
template <bool kClip>
__device__ void send_lines(const Ctx& x, const char* in, uint64_t in_stride, int first, int ndst) {
  char* const* remote = x.cm->remote;
  const uint32_t items = x.range * uint32_t(ndst);
  for (uint32_t i0 = threadIdx.x; i0 < items; i0 += blockDim.x * kU) {
    uint64_t v[kU] = {};
    int p[kU] = {};
    uint32_t l[kU] = {};
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const uint32_t i = i0 + u * blockDim.x;
      if (i >= items) continue;
      const int k = int(i / x.range);
      l[u] = x.lbeg + i % x.range;
      p[u] = first + k < x.n ? first + k : first + k - x.n;
      const uint64_t off = uint64_t(p[u]) * in_stride;
      v[u] = ll::load8(in + off + uint64_t(l[u]) * 8, x.valid<kClip>(off, l[u]));
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const uint32_t i = i0 + u * blockDim.x;
      if (i < items) ll::store_line(x.buf(remote[p[u]], x.me) + uint64_t(l[u]) * 16, v[u], x.flag);
    }
  }
}

// This block's lines of in into out (a local copy: own block, root's buffer).
__device__ void copy_lines(const Ctx& x, const char* in, char* out) {
  for (uint32_t i = threadIdx.x; i < x.range; i += blockDim.x) {
    const uint64_t l = x.lbeg + i;
    const int v = x.valid<false>(0, l);
    ll::store8(out + l * 8, ll::load8(in + l * 8, v), v);
  }
}

// From nsrc senders s = first, first + 1, ... (mod n) of my inbox: line l of
// lc(s, b) + from into out + s * out_stride. All loads of a round issued
// before waiting on any.
template <bool kClip>
__device__ void recv_lines(const Ctx& x, int first, int nsrc, uint64_t from, char* out,
                           uint64_t out_stride) {
  const uint32_t items = x.range * uint32_t(nsrc);
  for (uint32_t i0 = threadIdx.x; i0 < items && !dev::stop_raised(x.stop); i0 += blockDim.x * kU) {
    uint64_t v[kU] = {};
    bool ok[kU];
    int s[kU] = {};
    uint32_t l[kU] = {};
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const uint32_t i = i0 + u * blockDim.x;
      ok[u] = true;
      if (i >= items) continue;
      const int k = int(i / x.range);
      l[u] = x.lbeg + i % x.range;
      s[u] = first + k < x.n ? first + k : first + k - x.n;
      ok[u] = ll::load_line(x.buf(x.local, s[u]) + from + uint64_t(l[u]) * 16, x.flag, &v[u]);
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const uint32_t i = i0 + u * blockDim.x;
      if (i >= items) continue;
      if (!ok[u]) {
        uint64_t w;
        if (!x.spin.wait(x.buf(x.local, s[u]) + from + uint64_t(l[u]) * 16, x.flag, &w, s[u]))
          return;
        v[u] = w;
      }
      const uint64_t off = uint64_t(s[u]) * out_stride;
      ll::store8(out + off + uint64_t(l[u]) * 8, v[u], x.valid<kClip>(off, l[u]));
    }
  }
}

// Acks (see the top of the file), by block 0, with every peer p outside the
// run of nskip peers from first (kSend: the peers this rank sends data to,
// else those it gets data from): kSend, line 0 of lc(me, b) into p's inbox;
// else waits for line 0 of lc(p, b) in mine.
template <bool kSend>
__device__ void acks(const Ctx& x, int first, int nskip) {
  if (blockIdx.x != 0) return;
  for (int p = int(threadIdx.x); p < x.n; p += int(blockDim.x)) {
    if (p == x.me || sched::direct_in_run(first, nskip, p, x.n)) continue;
    uint64_t v;
    if (kSend)
      ll::store_line(x.buf(x.cm->remote[p], x.me), 0, x.flag);
    else if (!ll::load_line(x.buf(x.local, p), x.flag, &v) &&
             !x.spin.wait(x.buf(x.local, p), x.flag, &v, p))
      return;
  }
}

// OP kMoveOp: the byte mover (all-gather, all-to-all, broadcast; T
// uint8_t); any other OP: the reductions (all-reduce, reduce-scatter,
// reduce) of T. Each instantiation compiles only its own collectives'
// steps: the smaller the kernel, the faster its small calls.
template <typename T, int OP>
__global__ void __launch_bounds__(kThreads) ll_coll_kernel(CollKArgs a) {
  // Programmatic dependent launch (launch_ll_coll's pdl, kernels/launch.h):
  // wait for the predecessor grid before touching memory; no early trigger.
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  constexpr bool kMove = OP == kMoveOp;
  __shared__ uint64_t s_epoch;
  __shared__ int s_stop;
  const DevComm& cm = *a.comm;
  Ctx x;
  x.cm = a.comm;
  x.n = cm.nranks;
  x.me = cm.rank;
  x.base = cm.mb_base;
  x.slot_bytes = cm.mb_slot;
  x.local = cm.local;
  x.bytes = a.bytes;
  x.clip = a.clip;
  x.stop = &s_stop;
  char* const ctl = cm.mb_ctl;
  x.spin = ll::Spin{dev::GiveUp::of(cm), dev::globaltimer(), &s_stop};
  const uint64_t call = dev::call_begin(cm, a.sig);
  if (threadIdx.x == 0) s_stop = 0;
  const dev::Epoch ep = dev::epoch_begin(ctl, &s_epoch);
  x.flag = ep.flag;
  x.parity = ep.parity;
  const uint32_t lines = uint32_t((a.bytes + 7) / 8);
  const uint32_t per = (lines + gridDim.x - 1) / gridDim.x;
  x.lbeg = blockIdx.x * per;
  x.range = x.lbeg >= lines ? 0 : (lines - x.lbeg < per ? lines - x.lbeg : per);
  const int n = x.n, me = x.me;
  const int next = me + 1 < n ? me + 1 : 0;

  const bool in_place = a.in == a.out;
  // What this rank does in this launch: the direct schedule
  // (lib/algorithms/schedule.h) as data, so that each step below is one
  // call site (a small kernel: it comes through the instruction cache at
  // every launch). Blocks are a.bytes apart (two-shot: parts). Each call
  // with a constant collective, so each instantiation compiles only its own
  // collectives' rows (a call with a.kind: 0.9-1.3 KB more code).
  const sched::DirectRank d =
      kMove ? (a.kind == Coll::AllToAll ? sched::direct_rank(Coll::AllToAll, false, n, me, a.root)
               : a.kind == Coll::Broadcast
                   ? sched::direct_rank(Coll::Broadcast, false, n, me, a.root)
                   : sched::direct_rank(Coll::AllGather, false, n, me, a.root))
            : (a.kind == Coll::ReduceScatter
                   ? sched::direct_rank(Coll::ReduceScatter, false, n, me, a.root)
               : a.kind == Coll::Reduce ? sched::direct_rank(Coll::Reduce, false, n, me, a.root)
               : a.two_shot             ? sched::direct_rank(Coll::AllReduce, true, n, me, a.root)
                            : sched::direct_rank(Coll::AllReduce, false, n, me, a.root));
  const uint64_t B = a.bytes;
  const char* own_in = a.in + d.send_off(me, B);
  const uint64_t own_off = d.recv_off(me, B);  // own block of the output
  // Sends first (input lines to d.nsend peers; acks to every peer this rank
  // sends no data to), then the call check (kernels/prims/call_check.cuh),
  // then what reads a peer's line: the checker warp's wait delays no line a
  // peer waits for. The in-place barrier (see the top of the file) comes
  // ahead of the call check, so no warp waits for the checker's compare.
  if (d.nsend) send_lines<!kMove>(x, a.in, d.send_off(1, B), d.send_first, d.nsend);
  if (d.nsend < n - 1) acks<true>(x, d.send_first, d.nsend);
  if (!kMove && a.kind == Coll::AllReduce && in_place && !a.two_shot && n > 2) __syncthreads();
  dev::call_check(cm, a.sig, call);
  if constexpr (kMove) {
    if (d.copy && own_in != a.out + own_off) copy_lines(x, own_in, a.out + own_off);
    // In place all-to-all: this block's reads of its input lines before its
    // writes.
    if (a.kind == Coll::AllToAll && in_place) __syncthreads();
  }
  // This block's lines, folded, before the receives (two-shot peers wait
  // for the results): each result line to my output and, two-shot, at
  // once to every peer at lc(me, b) + half, from the fold's registers
  // (zero in the byte mover at compile time).
  const uint64_t half = !kMove && d.fan ? (B / 8) * 16 : 0;
  if constexpr (!kMove) {
    if (d.fold) {
      char* fout = a.out + own_off;
      char* const* remote = cm.remote;
      const int nfan = d.fan ? n - 1 : 0;
      ll::fold_range<T, OP, kRU, kSrc>(
          n, me, x.lbeg, x.lbeg + x.range,
          [&](uint32_t l) {
            return ll::load8(own_in + uint64_t(l) * 8, x.valid<true>(own_off, l));
          },
          [&](int s) { return x.buf(x.local, s); },
          [&](uint32_t l, uint64_t r) {
            for (int k = 0; k < nfan; ++k) {
              const int p = next + k < n ? next + k : next + k - n;
              ll::store_line(x.buf(remote[p], me) + half + uint64_t(l) * 16, r, x.flag);
            }
            ll::store8(fout + uint64_t(l) * 8, r, x.valid<true>(own_off, l));
          },
          a.avg_n, x.flag, x.spin);
    }
  }
  // Receives (sender s's lines at lc(s, b) + half into output block s, or
  // the output), then the acks of every peer this rank gets no data from.
  if (d.nrecv) recv_lines<!kMove>(x, d.recv_first, d.nrecv, half, a.out, d.recv_off(1, B));
  if (!d.fold && d.nrecv < n - 1) acks<false>(x, d.recv_first, d.nrecv);

  // The last block done moves the epoch on (kernels/prims/epoch.cuh).
  dev::epoch_end(ctl, ep);
}

// pdl: the kernel's griddepcontrol.wait keeps it after its predecessor.
MYCOLL_DEFINE_LAUNCH(Launch, CollKArgs, kThreads, ll_coll_kernel<T, OP>)

}  // namespace

cudaError_t preload_ll_coll_kernels() {
  return first_error({Launch<uint8_t, kMoveOp>::preload(), preload_dtype_op<Launch>()});
}

bool kernels_pdl_ready() {
  cudaFuncAttributes attr;
  const bool ok = cudaFuncGetAttributes(&attr, ll_coll_kernel<uint8_t, kMoveOp>) == cudaSuccess &&
                  attr.binaryVersion >= 90;
  cudaGetLastError();
  return ok;
}

int ll_coll_grid(bool two_shot, uint64_t bytes, int nranks, int max_blocks) {
  const int nb = two_shot ? blocks_for_lines(FifoGeom::ts_part_lines_of(bytes, nranks),
                                             kTsBlockLines, kTsMaxBlocks)
                          : blocks_for_lines((bytes + 7) / 8, kBlockLines, kMaxBlocks);
  return std::max(1, std::min(nb, max_blocks));
}

cudaError_t launch_ll_coll(Coll kind, bool two_shot, const void* in, void* out, uint64_t bytes,
                           mycollDataType_t t, mycollRedOp_t op, int root, const DevComm* comm,
                           int nranks, int max_blocks, uint64_t sig, bool pdl,
                           cudaStream_t stream) {
  const bool reduce =
      kind == Coll::AllReduce || kind == Coll::ReduceScatter || kind == Coll::Reduce;
  if (two_shot && kind != Coll::AllReduce) return cudaErrorInvalidValue;
  CollKArgs a =
      coll_kargs(kind, in, out, bytes, comm, root, reduce && op == mycollAvg, nranks, sig);
  const int nb = ll_coll_grid(two_shot, bytes, nranks, max_blocks);
  if (two_shot) {
    a.two_shot = 1;
    a.bytes = FifoGeom::ts_part_lines_of(bytes, nranks) * 8;
    a.clip = uint32_t(bytes);
  }
  // Moving bytes needs no element type: one instantiation serves them all.
  if (!reduce) return Launch<uint8_t, kMoveOp>::run(a, nb, stream, pdl);
  return dispatch_dtype_op<Launch>(t, op, a, nb, stream, pdl);
}

}  // namespace mycoll
