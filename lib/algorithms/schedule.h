// Schedules written once, for the host and the GPU. A ring schedule says, for
// every step of one rank, which block of the message it moves and how: a
// primitive over four streams (the mode bits below). The host turns each
// primitive into Plan ops (lib/algorithms/ring.cc), which the host engine
// runs and the plan simulator checks; the fused GPU kernels run the same
// primitives through kernels/prims (kernels/colls/ring.cu), so a schedule
// fixed here is fixed for both. A direct schedule (at the end) says what
// one rank sends, receives, copies and folds in one exchange; the host
// plans, the LL kernel and the direct kernel all read it. Only <cstdint> and Coll: this header is
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

// ---------------------------------------------------------------------------
// Direct schedules: every block goes straight from the rank that holds it to
// the rank that needs it, in one exchange (two for the two-shot all-reduce).
// What one rank does, as data; the host lays it over Plan steps and Scratch
// slots (lib/algorithms/direct.cc, checked by the plan simulator), the LL
// kernel over mailbox lines (kernels/colls/ll_coll.cu: one-shot and two-shot
// all-reduce, all-gather, reduce-scatter, all-to-all, the flat-tree
// broadcast and reduce) and the direct kernel over one bandwidth FIFO per
// peer (kernels/colls/direct.cu: all-to-all, scatter, gather).
//
// Peers come in runs of consecutive ranks (mod n): the k-th send goes to
// send_first + k, the k-th receive comes from recv_first + k. A rank
// either exchanges with every peer, with one (the root), or with none.
struct DirectRank {
  int nsend, send_first;  // peer p gets input block p (send_blocked) or the whole input
  int nrecv,
      recv_first;  // sender s's data lands in output block s (recv_blocked) or the whole output
  bool send_blocked, recv_blocked;
  // Own data to its place: input (block r when send_blocked) to output
  // (block r when recv_blocked); nothing to do where those are the same
  // bytes (in place).
  bool copy;
  // The rank-order fold: every peer's copy of this rank's block and its own
  // (input block r when send_blocked, else the input), ranks 0..n-1 in
  // order so every rank that computes a block gets the same bits, into the
  // output (block r when recv_blocked, else the output).
  bool fold;
  // Two-shot: the fold's result goes on to every peer (the second exchange,
  // an all-gather of the reduced parts: its receives are nrecv above).
  bool fan;
  // Byte offsets of rank k's block of the input / output, block bytes B (0
  // where that side is whole): what every reader adds to its buffer base.
  MYCOLL_SCHED_FN uint64_t send_off(int k, uint64_t B) const {
    return send_blocked ? uint64_t(k) * B : 0;
  }
  MYCOLL_SCHED_FN uint64_t recv_off(int k, uint64_t B) const {
    return recv_blocked ? uint64_t(k) * B : 0;
  }
};

// Rank r of n. two_shot: the all-reduce as a direct reduce-scatter of n parts
// followed by a direct all-gather of the reduced parts (blocks are parts).
//   all-reduce, one shot: input to every peer; fold of all inputs
//   all-reduce, two shots: part p to peer p; fold of part r; fan; parts in
//   all-gather:     input to every peer; block s from every peer; own copy
//   reduce-scatter: block p to peer p; fold of block r
//   all-to-all:     block p to peer p; block s from every peer; own copy
//   broadcast:      the root: input to every peer, own copy; others: from the root
//   reduce:         the root: fold; others: input to the root
//   scatter:        the root: block p to peer p, own copy; others: from the root
//   gather:         the root: block s from every peer, own copy; others: to the root
MYCOLL_SCHED_FN DirectRank direct_rank(Coll c, bool two_shot, int n, int r, int root) {
  const int next = r + 1 < n ? r + 1 : 0;
  DirectRank d{0, next, 0, next, false, false, false, false, false};
  const bool is_root = r == root;
  switch (c) {
    case Coll::AllReduce:
      d.nsend = n - 1;
      d.fold = true;
      if (two_shot) {
        d.send_blocked = d.recv_blocked = d.fan = true;
        d.nrecv = n - 1;
      }
      break;
    case Coll::AllGather:
      d.nsend = d.nrecv = n - 1;
      d.recv_blocked = d.copy = true;
      break;
    case Coll::ReduceScatter:
      d.nsend = n - 1;
      d.send_blocked = d.fold = true;
      break;
    case Coll::AllToAll:
      d.nsend = d.nrecv = n - 1;
      d.send_blocked = d.recv_blocked = d.copy = true;
      break;
    case Coll::Broadcast:
    case Coll::Scatter:
      if (is_root) {
        d.nsend = n - 1;
        d.send_blocked = c == Coll::Scatter;
        d.copy = true;
      } else {
        d.nrecv = 1;
        d.recv_first = root;
      }
      break;
    case Coll::Reduce:
    case Coll::Gather:
      if (!is_root) {
        d.nsend = 1;
        d.send_first = root;
      } else if (c == Coll::Reduce) {
        d.fold = true;
      } else {
        d.nrecv = n - 1;
        d.recv_blocked = d.copy = true;
      }
      break;
    default: break;
  }
  return d;
}

// Whether run [first, first + count) (mod n) holds rank p (0 <= first, p < n).
MYCOLL_SCHED_FN bool direct_in_run(int first, int count, int p, int n) {
  const int d = p - first;
  return (d < 0 ? d + n : d) < count;
}

}  // namespace sched
}  // namespace mycoll
