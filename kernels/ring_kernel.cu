// Fused ring kernel: all-reduce, all-gather and reduce-scatter with the ring
// algorithm on GPU communicators whose peers are all mapped over CUDA IPC,
// for messages large enough that bandwidth, not latency, decides.
//
// Why not the plan kernel: a ring plan is 2(n-1) steps (all-reduce) of
// "send one chunk, receive-and-reduce another"; the plan kernel finishes a
// step (every slot of it received and written to the output) before the next
// step may send what it produced, and its send and receive halves are two
// warp groups of one block. Here every thread of a channel's block runs each
// primitive on whole FIFO slots: receive slot i from the previous rank,
// combine it with the local input, write it straight into the next rank's
// FIFO (and the output where the result is final). A slot travels the whole
// ring without waiting for the rest of its chunk, and the output is written
// once, never re-read.
//
// Wire protocol: the plan kernel's bandwidth FIFOs and counters, unchanged
// (kernels/device_plan.h, DevPeer): channel c sends to rank r+1 through the
// (me -> next, c) data ring and receives from r-1 through (prev -> me, c);
// `head` (slots published) and `tail` (slots consumed) counters per ring;
// this rank's running counts in its state lines ([0] sent to next, [1]
// received from prev), read at the start and written back at the end. Both
// kernels keep the same counts, so plan-kernel and ring-kernel launches
// interleave freely on a communicator.
//
// Primitives (M = which of the four streams a slot touches):
//   kR  a slot from prev's FIFO      kL  the local input
//   kS  a slot into next's FIFO      kD  the output
// value = kR ? (kL ? local <op> fifo : fifo) : local; written to every
// destination present. Ring all-reduce on chunk k = (r - s) mod n at step s:
//   s = 0: S|L; 0 < s < n-1: R|L|S; s = n-1: R|L|S|D (Avg divides here);
//   n-1 < s < 2n-2: R|S|D; s = 2n-2: R|D.
// All-gather (chunk = block (r - s) mod n): S|L (|D out of place); R|S|D;
// R|D. Reduce-scatter (block (r - s - 1) mod n): S|L; R|L|S; R|L|D. Every
// rank uses the same chunk geometry (it depends only on the message size,
// the channel count and n), so a slot's length is known to both ends.
// Broadcast is the chain root, root+1, ..., root-1 along the same ring:
// position p = r - root runs one primitive over its whole channel range,
// S|L (|D out of place) at the root, R|S|D in the middle, R|D at the end.
// Reduce is the chain root+1, ..., root: S|L first, R|L|S, then R|L|D at
// the root. A chain has no cycle (its last rank sends nothing), so a
// primitive may span more than a FIFO: the slots stream through.
//
// The same file holds the direct kernel (all-to-all, scatter, gather): one
// block per (peer, channel) sends its range of the peer's block from the
// input and receives the same range of the peer's block into the output
// (all-to-all; scatter and gather move one direction), through the same
// per-peer bandwidth FIFOs and counters, plus a few blocks copying this
// rank's own block. Every block's progress depends on one block of one
// peer; the grid stays within the GPU's SMs (every block resident), which
// the host guarantees.
//
// Data layout: channel c owns a contiguous range of the message (all-reduce)
// or of every block (all-gather, reduce-scatter), 16-byte aligned; all-reduce
// cuts its range into loops of n chunks of at most kChunk bytes. Slots move
// in batches of up to a quarter FIFO: thread 0 waits until the batch's slots
// are both published by prev and free at next, the block moves them, then
// thread 0 fences (system scope, after the block barrier orders everyone's
// stores before it) and publishes head to next and tail to prev.
//
// In place: a thread that writes an output element has read the input
// elements it needs at that position itself (the same primitive), and every
// other input chunk is read by an earlier primitive of the same block.
//
// Every wait polls the abort flag and another block's failure now and then
// and gives up after MYCOLL_TIMEOUT of no progress, recording DevError.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "engine/reduce.h"
#include "kernels/copy.cuh"
#include "kernels/device_plan.h"
#include "kernels/dispatch.cuh"
#include "kernels/launch.h"
#include "kernels/ll.cuh"
#include "kernels/reduce_ops.cuh"

namespace mycoll {
namespace {

constexpr int kThreads = 512;
constexpr int kUnroll = 8;                  // 16-byte vectors in flight per thread
// Largest chunk one primitive moves: half a FIFO. A rank sends a whole
// chunk (the first primitive) before it receives anything; were that a full
// FIFO, every rank's receive-and-send would wait for room that only its
// successor's receive-and-send can make: a deadlock around the ring. With at
// most half, a receive-and-send always finds room or data.
constexpr uint64_t kChunkSlotsDiv = 2;

enum : int { kR = 1, kL = 2, kS = 4, kD = 8 };

struct RingArgs {
  const char* in;
  char* out;
  // all-reduce, broadcast, reduce: the message; all-gather: input block;
  // reduce-scatter: output block
  uint64_t bytes;
  const DevComm* comm;
  int32_t kind;    // RingColl
  int32_t avg_n;   // Avg: divide by this at the final reduction; 0 = no division
  int32_t root;    // broadcast, reduce
};

struct DirectArgs {
  const char* in;
  char* out;
  uint64_t bytes;  // one block
  const DevComm* comm;
  int32_t kind;    // DirectColl
  int32_t root;    // scatter, gather
  int32_t nch;     // channels per stream
  int32_t nstreams;
  int32_t copy;    // 1: blocks nstreams * nch .. copy this rank's own block
};

template <int N>
struct Bits;
template <>
struct Bits<1> { using type = unsigned char; };
template <>
struct Bits<2> { using type = unsigned short; };
template <>
struct Bits<4> { using type = unsigned int; };
template <>
struct Bits<8> { using type = unsigned long long; };

using ll::ld_vol;
using ll::st_vol;
// A counter read that orders this thread's later loads after it; the block
// barrier that follows extends that to every thread (cumulativity), so no
// other thread needs a fence of its own.
__device__ __forceinline__ uint64_t ld_acquire(const char* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
// Orders every store the block made before the barrier preceding it (by
// cumulativity) before the counter store that follows.
__device__ __forceinline__ void fence_release() {
  asm volatile("fence.acq_rel.sys;" ::: "memory");
}
__device__ __forceinline__ bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

// Copy primitives (no reduction): one instantiation per element size, shared
// by every kernel. value = kR ? fifo : local, to fout (kS) and dst (kD).
template <typename U, int M>
__device__ __noinline__ void move_copy(const char* fin, const char* loc, char* fout, char* dst,
                                       uint64_t len) {
  const int tid = threadIdx.x, nt = blockDim.x;
  const char* src = (M & kR) ? fin : loc;
  uint64_t done = 0;
  if (aligned16(src) && (!(M & kS) || aligned16(fout)) && (!(M & kD) || aligned16(dst))) {
    const uint64_t nv = len / 16;
    const uint4* s = reinterpret_cast<const uint4*>(src);
    for (uint64_t i = tid; i < nv; i += uint64_t(nt) * kUnroll) {
      uint4 v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (i + u * nt < nv) v[u] = (M & kR) ? __ldcv(s + i + u * nt) : s[i + u * nt];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (i + u * nt < nv) {
          if (M & kS) reinterpret_cast<uint4*>(fout)[i + u * nt] = v[u];
          if (M & kD) reinterpret_cast<uint4*>(dst)[i + u * nt] = v[u];
        }
    }
    done = nv * 16;
  }
  const U* s = reinterpret_cast<const U*>(src + done);
  const uint64_t ne = (len - done) / sizeof(U);
  for (uint64_t i = tid; i < ne; i += nt) {
    const U v = (M & kR) ? __ldcv(s + i) : s[i];
    if (M & kS) reinterpret_cast<U*>(fout + done)[i] = v;
    if (M & kD) reinterpret_cast<U*>(dst + done)[i] = v;
  }
}

// Reducing primitives: value = local <op> fifo (then / avg_n), to fout (kS)
// and dst (kD).
template <typename T, int OP, int M>
__device__ __forceinline__ void move_reduce(const char* fin, const char* loc, char* fout, char* dst,
                                            uint64_t len, int avg_n) {
  using U = typename Bits<sizeof(T)>::type;
  const int tid = threadIdx.x, nt = blockDim.x;
  uint64_t done = 0;
  if (aligned16(fin) && aligned16(loc) && (!(M & kS) || aligned16(fout)) &&
      (!(M & kD) || aligned16(dst))) {
    const uint64_t nv = len / 16;
    const uint4* x = reinterpret_cast<const uint4*>(loc);
    const uint4* y = reinterpret_cast<const uint4*>(fin);
    for (uint64_t i = tid; i < nv; i += uint64_t(nt) * kUnroll) {
      uint4 va[kUnroll], vb[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (i + u * nt < nv) {
          va[u] = x[i + u * nt];
          vb[u] = __ldcv(y + i + u * nt);
        }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (i + u * nt < nv) {
          uint4 v = dev::apply16<T, OP>(va[u], vb[u]);
          if ((M & kD) && avg_n) v = ll::div_avg_packed<T>(v, avg_n);
          if (M & kS) reinterpret_cast<uint4*>(fout)[i + u * nt] = v;
          if (M & kD) reinterpret_cast<uint4*>(dst)[i + u * nt] = v;
        }
    }
    done = nv * 16;
  }
  const T* x = reinterpret_cast<const T*>(loc + done);
  const U* y = reinterpret_cast<const U*>(fin + done);
  const uint64_t ne = (len - done) / sizeof(T);
  for (uint64_t i = tid; i < ne; i += nt) {
    const U b = __ldcv(y + i);
    T bv;
    memcpy(&bv, &b, sizeof(T));
    T v = dev::Red<T, OP>::apply(x[i], bv);
    if ((M & kD) && avg_n) v = dev::div_avg<T>(v, avg_n);
    if (M & kS) reinterpret_cast<T*>(fout + done)[i] = v;
    if (M & kD) reinterpret_cast<T*>(dst + done)[i] = v;
  }
}

template <typename T, int OP, bool kReduce>
__device__ __forceinline__ void move_slot(int mode, const char* fin, const char* loc, char* fout,
                                          char* dst, uint64_t len, int avg_n) {
  using U = typename Bits<sizeof(T)>::type;
  switch (mode) {
    case kS | kL: move_copy<U, kS | kL>(fin, loc, fout, dst, len); return;
    case kS | kL | kD: move_copy<U, kS | kL | kD>(fin, loc, fout, dst, len); return;
    case kR | kS | kD: move_copy<U, kR | kS | kD>(fin, loc, fout, dst, len); return;
    case kR | kD: move_copy<U, kR | kD>(fin, loc, fout, dst, len); return;
    default: break;
  }
  if constexpr (kReduce) {
    switch (mode) {
      case kR | kL | kS: move_reduce<T, OP, kR | kL | kS>(fin, loc, fout, dst, len, 0); return;
      case kR | kL | kS | kD:
        move_reduce<T, OP, kR | kL | kS | kD>(fin, loc, fout, dst, len, avg_n);
        return;
      case kR | kL | kD: move_reduce<T, OP, kR | kL | kD>(fin, loc, fout, dst, len, avg_n); return;
      default: break;
    }
  }
}

struct Shared {
  uint64_t sent;   // slots sent to next on this channel (all kernels, ever)
  uint64_t recvd;  // slots received from prev
  uint64_t n;      // the current batch (direct kernel: slots to send)
  uint64_t nr;     // direct kernel: slots to receive in the current batch
  int stop;
};

// One channel's view of its two FIFOs.
struct Chan {
  const DevComm* cm;
  char* send_data;
  char* send_head;
  const char* send_tail;
  const char* recv_data;
  const char* recv_head;
  char* recv_tail;
  uint64_t sb;  // slot bytes
  uint64_t ns;  // slots per FIFO
  int next, prev;
};

// Channel ch's FIFOs to `to` and from `from` (either may be -1: unused).
__device__ __forceinline__ Chan make_chan(const DevComm& cm, int to, int from, int ch) {
  Chan c;
  c.cm = &cm;
  c.next = to;
  c.prev = from;
  const DevPeer& pr = cm.peers[to >= 0 ? to : from];
  c.sb = pr.slot_bytes;
  c.ns = uint64_t(pr.nslots);
  c.send_data = nullptr;
  c.send_head = nullptr;
  c.send_tail = nullptr;
  c.recv_data = nullptr;
  c.recv_head = nullptr;
  c.recv_tail = nullptr;
  if (to >= 0) {
    const DevPeer& p = cm.peers[to];
    c.send_data = p.send_data + uint64_t(ch) * c.ns * c.sb;
    c.send_head = p.send_head + uint64_t(ch) * 384;
    c.send_tail = p.send_tail + uint64_t(ch) * 384;
  }
  if (from >= 0) {
    const DevPeer& p = cm.peers[from];
    c.recv_data = p.recv_data + uint64_t(ch) * c.ns * c.sb;
    c.recv_head = p.recv_head + uint64_t(ch) * 384;
    c.recv_tail = p.recv_tail + uint64_t(ch) * 384;
  }
  return c;
}

// Thread 0 of a waiting block, every 256th poll: the error code to give up
// with (the abort flag or another block's failure, read every 16K polls;
// MYCOLL_TIMEOUT without progress since `since`), else 0.
__device__ __forceinline__ int poll_give_up(const Chan& c, uint32_t spins, uint64_t since) {
  if ((spins & 0x3fff) == 0 &&
      (*c.cm->abort || *reinterpret_cast<volatile int32_t*>(&c.cm->error->code)))
    return *c.cm->abort ? mycollRemoteError : -1;
  if (ll::globaltimer() - since > c.cm->timeout_ns) return mycollTimeout;
  return 0;
}

// Records why the block stops (code > 0: this block found it; -1: another
// block did): waiting on data from the peer if a receive is pending and
// nothing new was published, else on room at the peer.
__device__ __forceinline__ void stop_block(const Chan& c, Shared& sh, int code, bool recv_pending) {
  const bool on_recv = recv_pending && ld_vol(c.recv_head) == sh.recvd;
  if (code > 0) ll::give_up(*c.cm, code, on_recv ? c.prev : c.next, on_recv ? kDevRecv : kDevSend);
  sh.stop = 1;
}

// Runs one primitive over `bytes` (a chunk): all threads of the block.
// Returns false when the block gave up (timeout, abort, another block's
// failure).
template <typename T, int OP, bool kReduce>
__device__ bool prim(const Chan& c, Shared& sh, int mode, const char* loc, char* dst,
                     uint64_t bytes, int avg_n) {
  const uint64_t total = (bytes + c.sb - 1) / c.sb;
  const uint64_t cap = c.ns >= 8 ? c.ns / 4 : 1;
  for (uint64_t done = 0; done < total;) {
    if (threadIdx.x == 0) {
      const uint64_t since = ll::globaltimer();
      uint32_t spins = 0;
      uint64_t n = 0;
      for (;;) {
        n = total - done < cap ? total - done : cap;
        if (mode & kR) {
          const uint64_t ready = ld_acquire(c.recv_head) - sh.recvd;
          if (ready < n) n = ready;
        }
        if (mode & kS) {
          const uint64_t room = c.ns - (sh.sent - ld_vol(c.send_tail));
          if (room < n) n = room;
        }
        if (n > 0) break;
        if ((++spins & 255) != 0) continue;
        if (const int code = poll_give_up(c, spins, since)) {
          stop_block(c, sh, code, mode & kR);
          break;
        }
      }
      sh.n = n;
    }
    __syncthreads();
    if (sh.stop) return false;
    const uint64_t n = sh.n;
    for (uint64_t j = 0; j < n; ++j) {
      const uint64_t off = (done + j) * c.sb;
      const uint64_t len = bytes - off < c.sb ? bytes - off : c.sb;
      const char* fin = c.recv_data + ((sh.recvd + j) % c.ns) * c.sb;
      char* fout = c.send_data + ((sh.sent + j) % c.ns) * c.sb;
      move_slot<T, OP, kReduce>(mode, fin, loc ? loc + off : nullptr, fout,
                                dst ? dst + off : nullptr, len, avg_n);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      // The barrier orders the block's stores (and loads: the slots we
      // consumed) before this fence, the fence before the counters. Other
      // threads read sh.sent / sh.recvd again only after the next batch's
      // barrier.
      fence_release();
      if (mode & kS) {
        sh.sent += n;
        st_vol(c.send_head, sh.sent);
      }
      if (mode & kR) {
        sh.recvd += n;
        st_vol(c.recv_tail, sh.recvd);
      }
    }
    done += n;
  }
  return true;
}

template <typename T, int OP, bool kReduce>
__global__ void __launch_bounds__(kThreads, 1) ring_kernel(RingArgs a) {
  __shared__ Shared sh;
  const DevComm& cm = *a.comm;
  const FifoGeom& g = cm.geom;
  const int n = cm.nranks, r = cm.rank, ch = blockIdx.x, nch = gridDim.x;
  const Chan c = make_chan(cm, (r + 1) % n, (r + n - 1) % n, ch);
  uint64_t* st_next = reinterpret_cast<uint64_t*>(cm.local + g.state_off(c.next, ch));
  uint64_t* st_prev = reinterpret_cast<uint64_t*>(cm.local + g.state_off(c.prev, ch));
  if (threadIdx.x == 0) {
    sh.sent = st_next[0];
    sh.recvd = st_prev[1];
    sh.stop = 0;
  }
  __syncthreads();

  // This channel's range [c0, c1) of the message (all-reduce) or of every
  // block (all-gather, reduce-scatter), 16-byte aligned.
  const uint64_t B = a.bytes;
  const uint64_t per = ((B + nch - 1) / nch + 15) / 16 * 16;
  const uint64_t c0 = uint64_t(ch) * per < B ? uint64_t(ch) * per : B;
  const uint64_t c1 = c0 + per < B ? c0 + per : B;
  // Largest chunk: half a FIFO of whole slots (at least one; a 1-slot FIFO
  // is refused at init), 16-byte aligned as slots are.
  const uint64_t half = c.ns / kChunkSlotsDiv > 0 ? c.ns / kChunkSlotsDiv : 1;
  const uint64_t most = half * c.sb;
  bool ok = true;
  if (a.kind == kRingAllReduce) {
    const uint64_t share = ((c1 - c0 + n - 1) / n + 15) / 16 * 16;
    const uint64_t cs = share < most ? share : most;
    for (uint64_t lo = c0; ok && lo < c1; lo += uint64_t(n) * cs) {
      const uint64_t L = lo + uint64_t(n) * cs < c1 ? lo + uint64_t(n) * cs : c1;
      for (int s = 0; ok && s <= 2 * n - 2; ++s) {
        const int k = ((r - s) % n + n) % n;
        const uint64_t o = lo + uint64_t(k) * cs;
        if (o >= L) continue;
        const uint64_t sz = L - o < cs ? L - o : cs;
        int mode;
        if (s == 0) mode = kS | kL;
        else if (s < n - 1) mode = kR | kL | kS;
        else if (s == n - 1) mode = kR | kL | kS | kD;
        else if (s < 2 * n - 2) mode = kR | kS | kD;
        else mode = kR | kD;
        ok = prim<T, OP, kReduce>(c, sh, mode, a.in + o, a.out + o, sz, a.avg_n);
      }
    }
  } else if (a.kind == kRingBroadcast || a.kind == kRingReduce) {
    if (c1 > c0) {
      int mode;
      if (a.kind == kRingBroadcast) {
        const int p = (r - a.root + n) % n;
        mode = p == 0 ? (a.in == a.out ? (kS | kL) : (kS | kL | kD))
               : p < n - 1 ? (kR | kS | kD) : (kR | kD);
      } else {
        const int q = (r - a.root - 1 + 2 * n) % n;
        mode = q == 0 ? (kS | kL) : q < n - 1 ? (kR | kL | kS) : (kR | kL | kD);
      }
      ok = prim<T, OP, kReduce>(c, sh, mode, a.in ? a.in + c0 : nullptr,
                                a.out ? a.out + c0 : nullptr, c1 - c0, a.avg_n);
    }
  } else {
    const bool ag = a.kind == kRingAllGather;
    for (uint64_t o = c0; ok && o < c1; o += most) {
      const uint64_t sz = c1 - o < most ? c1 - o : most;
      for (int s = 0; ok && s < n; ++s) {
        const int k = ag ? ((r - s) % n + n) % n : ((r - s - 1) % n + 2 * n) % n;
        const uint64_t blk = uint64_t(k) * B + o;
        const char* loc;
        char* dst;
        int mode;
        if (ag) {
          loc = a.in + o;
          dst = a.out + blk;
          if (s == 0) mode = a.out + uint64_t(r) * B == a.in ? (kS | kL) : (kS | kL | kD);
          else if (s < n - 1) mode = kR | kS | kD;
          else mode = kR | kD;
        } else {
          loc = a.in + blk;
          dst = a.out + o;
          mode = s == 0 ? (kS | kL) : s < n - 1 ? (kR | kL | kS) : (kR | kL | kD);
        }
        ok = prim<T, OP, kReduce>(c, sh, mode, loc, dst, sz, a.avg_n);
      }
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    st_next[0] = sh.sent;
    st_prev[1] = sh.recvd;
  }
}

// One (peer, channel) of the direct kernel: send `sbytes` from src to the
// peer and receive `rbytes` from it into dst, slot by slot as room and data
// allow, both in each batch. In place (dst == src, all-to-all) a slot is
// received only once the slot at the same offset was sent in an earlier
// batch (a barrier apart), so nothing is overwritten before it is read; the
// peer's block does the same with us, so both always make progress: a
// receive waits for our own earlier send only, a send for room the peer
// frees by receiving. Returns false when the block gave up.
template <typename U>
__device__ bool exchange(const Chan& c, Shared& sh, const char* src, uint64_t sbytes, char* dst,
                         uint64_t rbytes, bool inplace) {
  const uint64_t st = (sbytes + c.sb - 1) / c.sb, rt = (rbytes + c.sb - 1) / c.sb;
  const uint64_t cap = c.ns >= 8 ? c.ns / 4 : 1;
  uint64_t sd = 0, rd = 0;  // slots of this range sent / received
  while (sd < st || rd < rt) {
    if (threadIdx.x == 0) {
      const uint64_t since = ll::globaltimer();
      uint32_t spins = 0;
      uint64_t ns = 0, nr = 0;
      for (;;) {
        ns = st - sd < cap ? st - sd : cap;
        if (ns > 0) {
          const uint64_t room = c.ns - (sh.sent - ld_vol(c.send_tail));
          if (room < ns) ns = room;
        }
        nr = rt - rd < cap ? rt - rd : cap;
        if (inplace && sd - rd < nr) nr = sd - rd;
        if (nr > 0) {
          const uint64_t ready = ld_acquire(c.recv_head) - sh.recvd;
          if (ready < nr) nr = ready;
        }
        if (ns > 0 || nr > 0) break;
        if ((++spins & 255) != 0) continue;
        if (const int code = poll_give_up(c, spins, since)) {
          stop_block(c, sh, code, rd < rt);
          break;
        }
      }
      sh.n = ns;
      sh.nr = nr;
    }
    __syncthreads();
    if (sh.stop) return false;
    const uint64_t ns = sh.n, nr = sh.nr;
    for (uint64_t j = 0; j < ns; ++j) {
      const uint64_t off = (sd + j) * c.sb;
      const uint64_t len = sbytes - off < c.sb ? sbytes - off : c.sb;
      move_copy<U, kS | kL>(nullptr, src + off,
                            c.send_data + ((sh.sent + j) % c.ns) * c.sb, nullptr, len);
    }
    for (uint64_t j = 0; j < nr; ++j) {
      const uint64_t off = (rd + j) * c.sb;
      const uint64_t len = rbytes - off < c.sb ? rbytes - off : c.sb;
      move_copy<U, kR | kD>(c.recv_data + ((sh.recvd + j) % c.ns) * c.sb, nullptr, nullptr,
                            dst + off, len);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      fence_release();
      if (ns) {
        sh.sent += ns;
        st_vol(c.send_head, sh.sent);
      }
      if (nr) {
        sh.recvd += nr;
        st_vol(c.recv_tail, sh.recvd);
      }
    }
    sd += ns;
    rd += nr;
  }
  return true;
}

// Stream i of this rank: its peer, and whether it sends and receives there.
// All-to-all exchanges both ways with peers r+1, r+2, ...; a scatter root
// sends to each peer, a gather root receives from each; their other ranks
// receive from or send to the root.
struct Stream {
  int peer;
  bool send, recv;
};

__device__ __forceinline__ Stream direct_stream(const DirectArgs& a, int n, int r, int i) {
  Stream s;
  if (a.kind == kDirectAllToAll) {
    s.peer = (r + 1 + i) % n;
    s.send = s.recv = true;
  } else if (r == a.root) {
    s.peer = (r + 1 + i) % n;
    s.send = a.kind == kDirectScatter;
    s.recv = !s.send;
  } else {
    s.peer = a.root;
    s.send = a.kind == kDirectGather;
    s.recv = !s.send;
  }
  return s;
}

template <typename U>
__global__ void __launch_bounds__(kThreads, 1) direct_kernel(DirectArgs a) {
  __shared__ Shared sh;
  const DevComm& cm = *a.comm;
  const int n = cm.nranks, r = cm.rank;
  const int b = blockIdx.x, body = a.nstreams * a.nch;
  const uint64_t B = a.bytes;
  if (b >= body) {
    // This rank's own block (the host launches these blocks only where it
    // is not already in place): all-to-all and a scatter root copy input
    // block r, a gather root copies its input to output block r.
    const char* src = a.kind == kDirectGather ? a.in : a.in + uint64_t(r) * B;
    char* dst = a.kind == kDirectScatter ? a.out : a.out + uint64_t(r) * B;
    dev::copy_bytes<false>(dst, src, B, uint64_t(b - body) * blockDim.x + threadIdx.x,
                           uint64_t(gridDim.x - body) * blockDim.x);
    return;
  }
  const int ch = b % a.nch;
  const Stream s = direct_stream(a, n, r, b / a.nch);
  const Chan c = make_chan(cm, s.send ? s.peer : -1, s.recv ? s.peer : -1, ch);
  uint64_t* state = reinterpret_cast<uint64_t*>(cm.local + cm.geom.state_off(s.peer, ch));
  if (threadIdx.x == 0) {
    sh.sent = state[0];
    sh.recvd = state[1];
    sh.stop = 0;
  }
  __syncthreads();
  // This channel's range [c0, c1) of the block, 16-byte aligned; the block
  // is the peer's in the blocked buffer (at the root) or the whole buffer.
  const uint64_t per = ((B + a.nch - 1) / a.nch + 15) / 16 * 16;
  const uint64_t c0 = uint64_t(ch) * per < B ? uint64_t(ch) * per : B;
  const uint64_t c1 = c0 + per < B ? c0 + per : B;
  const bool blocked_in = a.kind == kDirectAllToAll || (a.kind == kDirectScatter && r == a.root);
  const bool blocked_out = a.kind == kDirectAllToAll || (a.kind == kDirectGather && r == a.root);
  const char* src = s.send ? a.in + (blocked_in ? uint64_t(s.peer) * B : 0) + c0 : nullptr;
  char* dst = s.recv ? a.out + (blocked_out ? uint64_t(s.peer) * B : 0) + c0 : nullptr;
  if (c1 > c0)
    exchange<U>(c, sh, src, s.send ? c1 - c0 : 0, dst, s.recv ? c1 - c0 : 0,
                s.send && s.recv && a.in == a.out);
  __syncthreads();
  if (threadIdx.x == 0) {
    if (s.send) state[0] = sh.sent;
    if (s.recv) state[1] = sh.recvd;
  }
}

template <typename T, int OP>
struct LaunchReduce {
  static cudaError_t run(const RingArgs& a, int nch, cudaStream_t s) {
    ring_kernel<T, OP, true><<<nch, kThreads, 0, s>>>(a);
    return cudaGetLastError();
  }
  static cudaError_t preload() { return preload_kernel(ring_kernel<T, OP, true>); }
};

template <typename U>
cudaError_t launch_copy(const RingArgs& a, int nch, cudaStream_t s) {
  ring_kernel<U, mycollSum, false><<<nch, kThreads, 0, s>>>(a);
  return cudaGetLastError();
}

}  // namespace

cudaError_t preload_ring_kernels() {
  cudaError_t e = preload_dtype_op<LaunchReduce>();
  for (cudaError_t r : {preload_kernel(ring_kernel<unsigned char, mycollSum, false>),
                        preload_kernel(ring_kernel<unsigned short, mycollSum, false>),
                        preload_kernel(ring_kernel<unsigned int, mycollSum, false>),
                        preload_kernel(ring_kernel<unsigned long long, mycollSum, false>),
                        preload_kernel(direct_kernel<unsigned char>),
                        preload_kernel(direct_kernel<unsigned short>),
                        preload_kernel(direct_kernel<unsigned int>),
                        preload_kernel(direct_kernel<unsigned long long>)})
    if (e == cudaSuccess) e = r;
  return e;
}

cudaError_t launch_ring(RingColl kind, const void* in, void* out, uint64_t bytes,
                        mycollDataType_t t, mycollRedOp_t op, int root, const DevComm* comm,
                        int nranks, int nchannels, cudaStream_t stream) {
  RingArgs a;
  a.in = static_cast<const char*>(in);
  a.out = static_cast<char*>(out);
  a.bytes = bytes;
  a.comm = comm;
  a.kind = kind;
  a.avg_n = op == mycollAvg ? nranks : 0;
  a.root = root;
  if (kind != kRingAllGather && kind != kRingBroadcast)
    return dispatch_dtype_op<LaunchReduce>(t, op, a, nchannels, stream);
  switch (dtype_size(t)) {
    case 1: return launch_copy<unsigned char>(a, nchannels, stream);
    case 2: return launch_copy<unsigned short>(a, nchannels, stream);
    case 4: return launch_copy<unsigned int>(a, nchannels, stream);
    case 8: return launch_copy<unsigned long long>(a, nchannels, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t launch_direct(DirectColl kind, const void* in, void* out, uint64_t bytes,
                          mycollDataType_t t, int root, const DevComm* comm, int nranks,
                          int rank, int nchannels, int copy_blocks, cudaStream_t stream) {
  DirectArgs a;
  a.in = static_cast<const char*>(in);
  a.out = static_cast<char*>(out);
  a.bytes = bytes;
  a.comm = comm;
  a.kind = kind;
  a.root = root;
  a.nch = nchannels;
  a.nstreams = direct_streams(kind, nranks, rank, root);
  const int grid = a.nstreams * nchannels + copy_blocks;
  if (grid == 0) return cudaSuccess;
  switch (dtype_size(t)) {
    case 1: direct_kernel<unsigned char><<<grid, kThreads, 0, stream>>>(a); break;
    case 2: direct_kernel<unsigned short><<<grid, kThreads, 0, stream>>>(a); break;
    case 4: direct_kernel<unsigned int><<<grid, kThreads, 0, stream>>>(a); break;
    case 8: direct_kernel<unsigned long long><<<grid, kThreads, 0, stream>>>(a); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace mycoll
