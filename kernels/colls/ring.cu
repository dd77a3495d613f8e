// Fused ring kernel: all-reduce, all-gather and reduce-scatter with the ring algorithm, and
// broadcast and reduce as chains along the ring, on GPU communicators whose peers are all
// mapped over CUDA IPC, for messages large enough that bandwidth decides: each primitive of
// lib/algorithms/schedule.h (ring_prim, ring_walk) on whole FIFO slots, by the whole block.
// What an edit must keep:
// - The wire protocol is the plan kernel's bandwidth FIFOs and counters (kernels/prims/fifo.cuh;
//   state [0] sent to next, [1] received from prev), so launches of both kernels interleave.
// - Every rank uses the same chunk geometry (message size, channel count and n only).
// - A ring chunk is at most half a FIFO (kChunkSlotsDiv), or the ring deadlocks.
// - In place: a thread that writes an output element read that position's inputs itself in
//   the same primitive; every other input chunk is read by an earlier primitive of the block.
// Why a kernel of its own, the primitives per step and the measurements: docs/algorithms.md,
// "GPU fused ring kernel".
#include <cuda_runtime.h>

#include <cstdint>

#include "algorithms/schedule.h"
#include "engine/reduce.h"
#include "kernels/device_plan.h"
#include "kernels/dispatch.cuh"
#include "kernels/launch.h"
#include "kernels/prims/call_check.cuh"
#include "kernels/prims/fifo.cuh"
#include "kernels/prims/vec.cuh"

namespace mycoll {
namespace {

using namespace dev;

constexpr int kThreads = 512;
// Largest chunk one primitive moves: half a FIFO (see the top of the file).
constexpr uint64_t kChunkSlotsDiv = 2;

// One slot of a primitive. Copy modes need T only for its size (one
// instantiation per element size, not inlined: shared by every caller).
template <typename U, int M>
__device__ __noinline__ void slot_copy(const char* fin, const char* loc, char* fout, char* dst,
                                       uint64_t len) {
  vec_move<U, mycollSum, M>(fin, loc, fout, dst, len, 0, threadIdx.x, blockDim.x);
}

template <typename T, int OP, bool kReduce>
__device__ __forceinline__ void move_slot(int mode, const char* fin, const char* loc, char* fout,
                                          char* dst, uint64_t len, int avg_n) {
  using U = typename Bits<sizeof(T)>::type;
  switch (mode) {
    case kS | kL: slot_copy<U, kS | kL>(fin, loc, fout, dst, len); return;
    case kS | kL | kD: slot_copy<U, kS | kL | kD>(fin, loc, fout, dst, len); return;
    case kR | kS | kD: slot_copy<U, kR | kS | kD>(fin, loc, fout, dst, len); return;
    case kR | kD: slot_copy<U, kR | kD>(fin, loc, fout, dst, len); return;
    default: break;
  }
  if constexpr (kReduce) {
    const int tid = threadIdx.x, nt = blockDim.x;
    switch (mode) {
      case kR | kL | kS:
        vec_move<T, OP, kR | kL | kS>(fin, loc, fout, dst, len, 0, tid, nt);
        return;
      case kR | kL | kS | kD:
        vec_move<T, OP, kR | kL | kS | kD>(fin, loc, fout, dst, len, avg_n, tid, nt);
        return;
      case kR | kL | kD:
        vec_move<T, OP, kR | kL | kD>(fin, loc, fout, dst, len, avg_n, tid, nt);
        return;
      default: break;
    }
  }
}

// Runs one primitive over `bytes` (a chunk): all threads of the block.
// Returns false when the block gave up (timeout, abort, another block's
// failure).
template <typename T, int OP, bool kReduce>
__device__ bool prim(const Chan& c, FifoShared& sh, int mode, const char* loc, char* dst,
                     uint64_t bytes, int avg_n) {
  const uint64_t total = (bytes + c.sb - 1) / c.sb;
  for (uint64_t done = 0; done < total;) {
    if (!batch_begin(c, sh, (mode & kS) ? total - done : 0, (mode & kR) ? total - done : 0, true))
      return false;
    const uint64_t n = (mode & kS) ? sh.ns : sh.nr;
    for (uint64_t j = 0; j < n;) {
      const uint64_t run = c.back_to_back(sh, j, n, mode & kR, mode & kS);
      const uint64_t off = (done + j) * c.sb;
      const uint64_t len = bytes - off < run * c.sb ? bytes - off : run * c.sb;
      move_slot<T, OP, kReduce>(mode, c.in_slot(sh, j), loc ? loc + off : nullptr,
                                c.out_slot(sh, j), dst ? dst + off : nullptr, len, avg_n);
      j += run;
    }
    batch_end(c, sh, (mode & kS) ? n : 0, (mode & kR) ? n : 0);
    done += n;
  }
  return true;
}

template <typename T, int OP, bool kReduce>
__global__ void __launch_bounds__(kThreads, 1) ring_kernel(CollKArgs a) {
  // launch_ring's pdl (kernels/launch.h): wait for the predecessor grid; no early trigger.
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  __shared__ FifoShared sh;
  const DevComm& cm = *a.comm;
  const FifoGeom& g = cm.geom;
  const int n = cm.nranks, r = cm.rank;
  // In place: all-gather's input is this rank's output block, broadcast's
  // input the output (no local copy is due).
  const bool in_place =
      a.kind == Coll::AllGather ? a.out + uint64_t(r) * a.bytes == a.in : a.in == a.out;
  const bool chain = a.kind == Coll::Broadcast || a.kind == Coll::Reduce;
  const int chain_mode = chain ? sched::ring_prim(a.kind, n, r, a.root, 0, in_place).mode : 0;
  int b0;  // the first channel's block (after the call check's)
  if (call_check_block(cm, a.sig, &b0, a.defer_to)) return;
  const int ch = int(blockIdx.x) - b0, nch = int(gridDim.x) - b0;
  const Chan c = make_chan(cm, (r + 1) % n, (r + n - 1) % n, ch);
  uint64_t* st_next = reinterpret_cast<uint64_t*>(cm.local + g.state_off(c.next, ch));
  uint64_t* st_prev = reinterpret_cast<uint64_t*>(cm.local + g.state_off(c.prev, ch));
  if (threadIdx.x == 0) {
    sh.sent = st_next[0];
    sh.recvd = st_prev[1];
    sh.stop = 0;
  }
  __syncthreads();

  // Largest chunk: half a FIFO of whole slots (at least one; a 1-slot FIFO
  // is refused at init), 16-byte aligned as slots are.
  const uint64_t half = c.ns / kChunkSlotsDiv > 0 ? c.ns / kChunkSlotsDiv : 1;
  if (chain) {
    // A chain is one primitive over the channel's range, called here
    // directly as ring_walk would (docs/performance.md, "Session 10": the
    // callback's layout of this path was slower).
    uint64_t c0, c1;
    sched::channel_range(a.bytes, ch, nch, &c0, &c1);
    if (c1 > c0)
      prim<T, OP, kReduce>(c, sh, chain_mode, a.in ? a.in + c0 : nullptr,
                           a.out ? a.out + c0 : nullptr, c1 - c0, a.avg_n);
  } else {
    sched::ring_walk(a.kind, n, r, a.root, in_place, a.bytes, ch, nch, half * c.sb,
                     [&](int mode, uint64_t lo, uint64_t dso, uint64_t len) {
                       return prim<T, OP, kReduce>(c, sh, mode, a.in ? a.in + lo : nullptr,
                                                   a.out ? a.out + dso : nullptr, len, a.avg_n);
                     });
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    st_next[0] = sh.sent;
    st_prev[1] = sh.recvd;
  }
}

MYCOLL_DEFINE_LAUNCH(LaunchReduce, CollKArgs, kThreads, ring_kernel<T, OP, true>)
MYCOLL_DEFINE_LAUNCH(LaunchCopy, CollKArgs, kThreads, ring_kernel<T, OP, false>)

}  // namespace

cudaError_t preload_ring_kernels() {
  return first_error({preload_dtype_op<LaunchReduce>(), preload_sizes<LaunchCopy>()});
}

cudaError_t launch_ring(Coll kind, const void* in, void* out, uint64_t bytes, mycollDataType_t t,
                        mycollRedOp_t op, int root, const DevComm* comm, int nranks, int nchannels,
                        uint64_t sig, int defer_to, bool pdl, cudaStream_t stream) {
  CollKArgs a = coll_kargs(kind, in, out, bytes, comm, root, op == mycollAvg, nranks, sig);
  a.defer_to = defer_to;
  const int blocks = nchannels + (sig != 0 ? 1 : 0);  // + the call check's block
  if (kind != Coll::AllGather && kind != Coll::Broadcast)
    return dispatch_dtype_op<LaunchReduce>(t, op, a, blocks, stream, pdl);
  return dispatch_size<LaunchCopy>(t, a, blocks, stream, pdl);
}

}  // namespace mycoll
