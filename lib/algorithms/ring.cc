// Ring family: every rank sends to rank+1 and receives from rank-1.
//   allreduce     = ring reduce-scatter + ring all-gather over n segments
//   reducescatter = ring reduce-scatter over the n rank blocks
//   allgather     = ring all-gather over the n rank blocks
//   broadcast     = pipelined chain root, root+1, ..., root-1 (chunked)
//   reduce        = pipelined chain root+1, ..., root-1, root (chunked)
// Schedules, step counts and bytes: docs/algorithms.md.
#include "algorithms/builders.h"

namespace mycoll {
namespace algo {
namespace {

// Reduce-scatter then all-gather over n balanced segments of the buffer,
// accumulating in Output. Rank r ends the reduce-scatter owning segment r+1.
// In place (Input == Output) is safe: segment j is written (by a RecvReduce
// whose local operand is the same memory) at most once during the
// reduce-scatter, and Input of a segment is never read after that write.
Plan allreduce(const CollArgs& a) {
  const int n = a.nranks, r = a.rank, next = mod(r + 1, n), prev = mod(r - 1, n);
  Parts seg(a.count, n);
  StepTable t;
  long time = 0;
  for (int k = 0; k < n - 1; ++k, ++time) {
    int send_seg = mod(r - k, n), recv_seg = mod(r - k - 1, n);
    t.send(time, next, seg.range(k == 0 ? Buf::Input : Buf::Output, send_seg, send_seg + 1));
    t.recv_reduce(time, prev, seg.range(Buf::Output, recv_seg, recv_seg + 1),
                  seg.range(Buf::Input, recv_seg, recv_seg + 1));
  }
  for (int k = 0; k < n - 1; ++k, ++time) {
    int send_seg = mod(r + 1 - k, n), recv_seg = mod(r - k, n);
    t.send(time, next, seg.range(Buf::Output, send_seg, send_seg + 1));
    t.recv(time, prev, seg.range(Buf::Output, recv_seg, recv_seg + 1));
  }
  return t.finish();
}

// Step k: send the partial sum of block r-k-1, receive-reduce block r-k-2.
// Partial sums live in two Scratch blocks used alternately (the Input is the
// user's and stays untouched); the last step reduces block r into Output.
// In place, Output is Input block r, which is read only by that last step's
// RecvReduce (as its own local operand).
Plan reducescatter(const CollArgs& a) {
  const int n = a.nranks, r = a.rank, next = mod(r + 1, n), prev = mod(r - 1, n);
  auto tmp = [&](int k) { return Slice{Buf::Scratch, static_cast<size_t>(k % 2) * a.count, a.count}; };
  StepTable t;
  for (int k = 0; k < n - 1; ++k) {
    int send_blk = mod(r - k - 1, n), recv_blk = mod(r - k - 2, n);
    t.send(k, next, k == 0 ? block(a, Buf::Input, send_blk) : tmp(k - 1));
    t.recv_reduce(k, prev, k == n - 2 ? Slice{Buf::Output, 0, a.count} : tmp(k),
                  block(a, Buf::Input, recv_blk));
  }
  size_t scratch = n >= 4 ? 2 * a.count : (n == 3 ? a.count : 0);
  return t.finish(scratch);
}

// Own block copied into place, then n-1 steps each forwarding the block
// received in the previous step.
Plan allgather(const CollArgs& a) {
  const int n = a.nranks, r = a.rank, next = mod(r + 1, n), prev = mod(r - 1, n);
  StepTable t;
  t.copy(0, block(a, Buf::Output, r), Slice{Buf::Input, 0, a.count});
  for (int k = 0; k < n - 1; ++k) {
    t.send(k, next, block(a, Buf::Output, mod(r - k, n)));
    t.recv(k, prev, block(a, Buf::Output, mod(r - k - 1, n)));
  }
  return t.finish();
}

// Chain position p = rank - root: position p receives chunk c at time c+p-1
// and forwards it at time c+p, so each step moves one chunk per link.
Plan broadcast(const CollArgs& a) {
  const int n = a.nranks, r = a.rank, next = mod(r + 1, n), prev = mod(r - 1, n);
  const int p = mod(r - a.root, n);
  Chunks ch(a);
  StepTable t;
  for (int c = 0; c < ch.num(); ++c) {
    if (p == 0) {
      // The root sends from Input and copies chunk c to its own Output one
      // step later, so the local copy overlaps the chain instead of delaying it.
      t.send(c, next, ch.at(Buf::Input, c));
      t.copy(c + 1, ch.at(Buf::Output, c), ch.at(Buf::Input, c));
      continue;
    }
    t.recv(c + p - 1, prev, ch.at(Buf::Output, c));
    if (p < n - 1) t.send(c + p, next, ch.at(Buf::Output, c));
  }
  return t.finish();
}

// Chain position q = rank - root - 1 (root is last, q = n-1). Position q
// receive-reduces chunk c at time c+q-1 and forwards it at c+q. Non-root
// ranks have no Output, so partial sums go through two chunk-sized Scratch
// slots used alternately (chunk c+2 is written only after chunk c was sent).
Plan reduce(const CollArgs& a) {
  const int n = a.nranks, r = a.rank, next = mod(r + 1, n), prev = mod(r - 1, n);
  const int q = mod(r - a.root - 1, n);
  Chunks ch(a);
  auto slot = [&](int c) {
    return Slice{Buf::Scratch, static_cast<size_t>(c % 2) * ch.size(), ch.len(c)};
  };
  StepTable t;
  size_t scratch = 0;
  for (int c = 0; c < ch.num(); ++c) {
    if (q == 0) {
      t.send(c, next, ch.at(Buf::Input, c));
    } else if (q == n - 1) {
      t.recv_reduce(c + q - 1, prev, ch.at(Buf::Output, c), ch.at(Buf::Input, c));
    } else {
      t.recv_reduce(c + q - 1, prev, slot(c), ch.at(Buf::Input, c));
      t.send(c + q, next, slot(c));
      Slice s = slot(c);
      if (s.offset + s.count > scratch) scratch = s.offset + s.count;
    }
  }
  return t.finish(scratch);
}

}  // namespace

Plan ring_plan(const CollArgs& a) {
  switch (a.coll) {
    case Coll::AllReduce: return allreduce(a);
    case Coll::ReduceScatter: return reducescatter(a);
    case Coll::AllGather: return allgather(a);
    case Coll::Broadcast: return broadcast(a);
    case Coll::Reduce: return reduce(a);
    default: break;
  }
  return Plan{};  // unreachable: build_plan checked algo_supports
}

}  // namespace algo
}  // namespace mycoll
