// Schedules written once, for the host and the GPU. A schedule says, for
// every step of one rank, which block of the message it moves and how: a
// primitive over four streams (the mode bits below). The host turns each
// primitive into Plan ops (lib/algorithms/ring.cc), which the host engine
// runs and the plan simulator checks; the fused GPU kernels run the same
// primitives through kernels/prims (kernels/colls/ring.cu), so a schedule
// fixed here is fixed for both. Only <cstdint> and Coll: this header is
// compiled by the host compiler and by nvcc for device code.
#pragma once

#include <cstdint>

#include "algorithms/plan.h"

#if defined(__CUDACC__)
#define MYCOLL_SCHED_FN __host__ __device__ __forceinline__
#else
#define MYCOLL_SCHED_FN inline
#endif

namespace mycoll {
namespace sched {

// The streams a primitive touches:
//   kR  a block received from the previous rank   kL  the local input
//   kS  the block sent on to the next rank         kD  the destination
// value = kR ? (kL ? local <op> received : received) : local, written to
// every destination present (kS, kD). A primitive without kD whose value is
// not final (a partial sum on its way round) has no destination on the GPU
// (the value lives in the FIFO); the host lands it in a buffer of the plan.
enum : int { kR = 1, kL = 2, kS = 4, kD = 8 };

MYCOLL_SCHED_FN int ring_mod(int x, int n) {
  const int m = x % n;
  return m < 0 ? m + n : m;
}

// One primitive of a ring schedule: block `block` of the message (rank
// blocks for all-gather and reduce-scatter, segments for all-reduce, 0 for
// the chains), mode bits, and `pos`, the step at which it sends: it
// receives (kR) what its predecessor sent at pos - 1.
struct RingPrim {
  int block;
  int mode;
  int pos;
};

// Primitives per rank: all-reduce 2n-1 (reduce-scatter then all-gather
// around the ring), all-gather and reduce-scatter n, broadcast and reduce
// one per chunk (the chain: the root, root+1, ..., root-1 for broadcast;
// root+1, ..., root for reduce).
MYCOLL_SCHED_FN int ring_steps(Coll c, int n) {
  return c == Coll::AllReduce                                 ? 2 * n - 1
         : (c == Coll::AllGather || c == Coll::ReduceScatter) ? n
                                                              : 1;
}

// Step s of rank r of n. in_place: the rank's input is its own block of the
// output (all-gather) or the output itself (broadcast), so no copy is due.
//   all-reduce, block (r - s) mod n:    s = 0: S|L; 0 < s < n-1: R|L|S;
//     s = n-1: R|L|S|D (the sum is final); n-1 < s < 2n-2: R|S|D; 2n-2: R|D
//   all-gather, block (r - s) mod n:    S|L (|D out of place); R|S|D; R|D
//   reduce-scatter, block (r-s-1) mod n: S|L; R|L|S; R|L|D
//   broadcast, position p = r - root:   S|L (|D out of place); R|S|D; R|D
//   reduce, position q = r - root - 1:  S|L; R|L|S; R|L|D (the root)
MYCOLL_SCHED_FN RingPrim ring_prim(Coll c, int n, int r, int root, int s, bool in_place) {
  switch (c) {
    case Coll::AllReduce: {
      const int mode = s == 0          ? (kS | kL)
                       : s < n - 1     ? (kR | kL | kS)
                       : s == n - 1    ? (kR | kL | kS | kD)
                       : s < 2 * n - 2 ? (kR | kS | kD)
                                       : (kR | kD);
      return RingPrim{ring_mod(r - s, n), mode, s};
    }
    case Coll::AllGather: {
      const int mode = s == 0      ? (in_place ? (kS | kL) : (kS | kL | kD))
                       : s < n - 1 ? (kR | kS | kD)
                                   : (kR | kD);
      return RingPrim{ring_mod(r - s, n), mode, s};
    }
    case Coll::ReduceScatter: {
      const int mode = s == 0 ? (kS | kL) : s < n - 1 ? (kR | kL | kS) : (kR | kL | kD);
      return RingPrim{ring_mod(r - s - 1, n), mode, s};
    }
    case Coll::Broadcast: {
      const int p = ring_mod(r - root, n);
      const int mode = p == 0      ? (in_place ? (kS | kL) : (kS | kL | kD))
                       : p < n - 1 ? (kR | kS | kD)
                                   : (kR | kD);
      return RingPrim{0, mode, p};
    }
    case Coll::Reduce: {
      const int q = ring_mod(r - root - 1, n);
      const int mode = q == 0 ? (kS | kL) : q < n - 1 ? (kR | kL | kS) : (kR | kL | kD);
      return RingPrim{0, mode, q};
    }
    default: return RingPrim{0, 0, 0};
  }
}

// The byte layout the fused GPU ring kernel runs the schedule over, one
// channel of nch: channel ch owns a contiguous range [c0, c1) of the message
// (all-reduce, broadcast, reduce) or of every rank block (all-gather,
// reduce-scatter), 16-byte aligned; `most` bytes (half a FIFO) is the
// largest block one primitive moves in a ring (all-reduce cuts its range
// into rounds of n blocks, all-gather and reduce-scatter into rounds of one
// block per rank), while a chain's one primitive streams its whole range
// (a chain has no cycle: its last rank sends nothing). `bytes` is the whole
// message (all-reduce, broadcast, reduce) or one rank block.
//
// emit(mode, local_off, dst_off, len) runs one primitive: local_off is the
// offset of its kL operand in the input, dst_off of its kD destination in
// the output (each meaningful only when the mode has the bit). Returns false
// to stop (the GPU gave up); ring_walk then returns false.
// Channel ch of nch's range [*c0, *c1) of `bytes`, 16-byte aligned (empty
// when the message has fewer 16-byte pieces than channels); also how the
// direct kernel splits a peer's block over its channels.
MYCOLL_SCHED_FN void channel_range(uint64_t bytes, int ch, int nch, uint64_t* c0, uint64_t* c1) {
  const uint64_t per = ((bytes + nch - 1) / nch + 15) / 16 * 16;
  *c0 = uint64_t(ch) * per < bytes ? uint64_t(ch) * per : bytes;
  *c1 = *c0 + per < bytes ? *c0 + per : bytes;
}

template <typename Emit>
MYCOLL_SCHED_FN bool ring_walk(Coll c, int n, int r, int root, bool in_place, uint64_t bytes,
                               int ch, int nch, uint64_t most, Emit&& emit) {
  const uint64_t B = bytes;
  uint64_t c0, c1;
  channel_range(B, ch, nch, &c0, &c1);
  if (c1 == c0) return true;
  if (c == Coll::AllReduce) {
    const uint64_t share = ((c1 - c0 + n - 1) / n + 15) / 16 * 16;
    const uint64_t cs = share < most ? share : most;
    for (uint64_t lo = c0; lo < c1; lo += uint64_t(n) * cs) {
      const uint64_t L = lo + uint64_t(n) * cs < c1 ? lo + uint64_t(n) * cs : c1;
      for (int s = 0; s < 2 * n - 1; ++s) {
        const RingPrim p = ring_prim(c, n, r, root, s, in_place);
        const uint64_t o = lo + uint64_t(p.block) * cs;
        if (o >= L) continue;
        if (!emit(p.mode, o, o, L - o < cs ? L - o : cs)) return false;
      }
    }
    return true;
  }
  // (The GPU kernel runs this one primitive itself, the same way: see
  // kernels/colls/ring.cu.)
  if (c == Coll::Broadcast || c == Coll::Reduce) {
    const RingPrim p = ring_prim(c, n, r, root, 0, in_place);
    return emit(p.mode, c0, c0, c1 - c0);
  }
  // All-gather: the local operand is this rank's input, the destination its
  // block of the output; reduce-scatter the other way round.
  const bool ag = c == Coll::AllGather;
  for (uint64_t o = c0; o < c1; o += most) {
    const uint64_t len = c1 - o < most ? c1 - o : most;
    for (int s = 0; s < n; ++s) {
      const RingPrim p = ring_prim(c, n, r, root, s, in_place);
      const uint64_t blk = uint64_t(p.block) * B + o;
      if (!emit(p.mode, ag ? o : blk, ag ? blk : o, len)) return false;
    }
  }
  return true;
}

}  // namespace sched
}  // namespace mycoll
