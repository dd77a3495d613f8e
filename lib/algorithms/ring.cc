// Ring family: every rank sends to rank+1 and receives from rank-1. The
// schedules (which block each step moves, and how) are written once in
// lib/algorithms/schedule.h, shared with the fused GPU ring kernel
// (kernels/colls/ring.cu); this file lays them over the plan's buffers:
//   allreduce     = ring reduce-scatter + ring all-gather over n segments
//   reducescatter = ring reduce-scatter over the n rank blocks
//   allgather     = ring all-gather over the n rank blocks
//   broadcast     = pipelined chain root, root+1, ..., root-1 (chunked)
//   reduce        = pipelined chain root+1, ..., root-1, root (chunked)
// Schedules, step counts and bytes: docs/algorithms.md.
#include <algorithm>

#include "algorithms/builders.h"
#include "algorithms/schedule.h"

namespace mycoll {
namespace algo {
namespace {

using sched::kD;
using sched::kL;
using sched::kR;
using sched::kS;

// Where one primitive of a schedule reads and writes in the plan.
struct PrimSlices {
  Slice local;  // its kL operand
  Slice dst;    // its kD destination
  Slice land;   // where a received value that is not final lands (kR without kD)
};

// Primitive p as plan ops, its send at time t0 + p.pos: a receive (kR)
// lands at pos - 1 (what the predecessor sent then), reduced with the local
// operand when kL; the send (kS) forwards what was received, else the local
// operand; a destination without a receive is a local copy, one step after
// the send when there is one (the copy overlaps the chain instead of
// delaying it).
void emit(StepTable& t, long t0, const sched::RingPrim& p, int prev, int next,
          const PrimSlices& s) {
  const long ts = t0 + p.pos;
  const Slice at = (p.mode & kD) ? s.dst : s.land;
  if (p.mode & kR) {
    if (p.mode & kL)
      t.recv_reduce(ts - 1, prev, at, s.local);
    else
      t.recv(ts - 1, prev, at);
  }
  if (p.mode & kS) t.send(ts, next, (p.mode & kR) ? at : s.local);
  if ((p.mode & kD) && !(p.mode & kR)) t.copy((p.mode & kS) ? ts + 1 : ts, s.dst, s.local);
}

// n balanced segments of the buffer, accumulating in Output: partial sums
// land in their segment of Output. In place (Input == Output) is safe:
// segment j is written (by a RecvReduce whose local operand is the same
// memory) at most once during the reduce-scatter, and Input of a segment is
// never read after that write.
Plan allreduce(const CollArgs& a) {
  const int n = a.nranks, r = a.rank;
  Parts seg(a.count, n);
  StepTable t;
  for (int s = 0; s < sched::ring_steps(a.coll, n); ++s) {
    const sched::RingPrim p = sched::ring_prim(a.coll, n, r, a.root, s, a.in_place);
    const Slice out = seg.range(Buf::Output, p.block, p.block + 1);
    emit(t, 0, p, mod(r - 1, n), mod(r + 1, n),
         {seg.range(Buf::Input, p.block, p.block + 1), out, out});
  }
  return t.finish();
}

// Partial sums live in two Scratch blocks used alternately (the Input is
// the user's and stays untouched); the last step reduces block r into
// Output. In place, Output is Input block r, which is read only by that last
// step's RecvReduce (as its own local operand).
Plan reducescatter(const CollArgs& a) {
  const int n = a.nranks, r = a.rank;
  StepTable t;
  for (int s = 0; s < n; ++s) {
    const sched::RingPrim p = sched::ring_prim(a.coll, n, r, a.root, s, a.in_place);
    const Slice tmp{Buf::Scratch, static_cast<size_t>((s + 1) % 2) * a.count, a.count};
    emit(t, 0, p, mod(r - 1, n), mod(r + 1, n),
         {block(a, Buf::Input, p.block), Slice{Buf::Output, 0, a.count}, tmp});
  }
  size_t scratch = n >= 4 ? 2 * a.count : (n == 3 ? a.count : 0);
  return t.finish(scratch);
}

// Own block copied into place (out of place), every block received into
// Output and forwarded from there.
Plan allgather(const CollArgs& a) {
  const int n = a.nranks, r = a.rank;
  StepTable t;
  for (int s = 0; s < n; ++s) {
    const sched::RingPrim p = sched::ring_prim(a.coll, n, r, a.root, s, a.in_place);
    const Slice out = block(a, Buf::Output, p.block);
    emit(t, 0, p, mod(r - 1, n), mod(r + 1, n), {Slice{Buf::Input, 0, a.count}, out, out});
  }
  return t.finish();
}

// The chains, pipelined by chunks: the rank at chain position p runs its one
// primitive on chunk c at time c + p, so each step moves one chunk per link.
// Reduce: ranks before the root have no Output, so partial sums go through
// two chunk-sized Scratch slots used alternately (chunk c+2 is written only
// after chunk c was sent).
Plan chain(const CollArgs& a) {
  const int n = a.nranks, r = a.rank;
  const sched::RingPrim p = sched::ring_prim(a.coll, n, r, a.root, 0, a.in_place);
  Chunks ch(a);
  StepTable t;
  size_t scratch = 0;
  for (int c = 0; c < ch.num(); ++c) {
    Slice land = ch.at(Buf::Output, c);
    if (a.coll == Coll::Reduce && !(p.mode & kD)) {
      land = Slice{Buf::Scratch, static_cast<size_t>(c % 2) * ch.size(), ch.len(c)};
      if (p.mode & kR) scratch = std::max(scratch, land.offset + land.count);
    }
    emit(t, c, p, mod(r - 1, n), mod(r + 1, n),
         {ch.at(Buf::Input, c), ch.at(Buf::Output, c), land});
  }
  return t.finish(scratch);
}

}  // namespace

Plan ring_plan(const CollArgs& a) {
  switch (a.coll) {
    case Coll::AllReduce: return allreduce(a);
    case Coll::ReduceScatter: return reducescatter(a);
    case Coll::AllGather: return allgather(a);
    case Coll::Broadcast:
    case Coll::Reduce: return chain(a);
    default: break;
  }
  return Plan{};  // unreachable: build_plan checked algo_supports
}

}  // namespace algo
}  // namespace mycoll
