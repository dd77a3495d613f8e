// Direct family: every block goes straight from the rank that holds it to
// the rank that needs it. What each rank sends, receives, copies and folds
// is the direct schedule of lib/algorithms/schedule.h (sched::direct_rank),
// which the GPU's LL and direct kernels run too; this file lays it over Plan
// steps and Scratch slots:
//   allreduce = one shot: all inputs to all ranks, then a local reduction
//   twoshot allreduce = direct reduce-scatter of n parts, then direct
//     all-gather of the reduced parts (two steps, 2(n-1)/n of the message
//     out per rank: one shot's latency class at ring-like traffic)
//   allgather, reducescatter, scatter, gather = one exchange (a local
//     reduction after it for reducescatter)
//   broadcast, reduce = flat trees: the root sends to / receives from every
//     rank in one exchange
//   alltoall = pairwise exchange: step k sends to rank+k, receives from rank-k;
//     with a.one_step (small host blocks) every block in one step
// Details: docs/algorithms.md.
#include "algorithms/builders.h"
#include "algorithms/schedule.h"

namespace mycoll {
namespace algo {
namespace {

Plan lay_direct(const CollArgs& a, bool two_shot) {
  const int n = a.nranks, r = a.rank;
  const sched::DirectRank d = sched::direct_rank(a.coll, two_shot, n, r, a.root);
  const Parts parts(a.count, n);
  // Block b of the input or output as the schedule addresses it: two-shot
  // parts, rank blocks of a blocked buffer, else the whole buffer.
  auto blk = [&](Buf buf, bool blocked, int b) {
    if (two_shot) return parts.range(buf, b, b + 1);
    return blocked ? block(a, buf, b) : Slice{buf, 0, a.count};
  };
  auto in = [&](int b) { return blk(Buf::Input, d.send_blocked, b); };
  auto out = [&](int b) { return blk(Buf::Output, d.recv_blocked, b); };
  // All-to-all goes pairwise, one peer a step (step k: to rank+k, from
  // rank-k), which its in-place slots below rely on, unless a.one_step;
  // the others exchange in one step (step 0), a fold and the two-shot's
  // second exchange in the next.
  const bool a2a = a.coll == Coll::AllToAll;
  const bool pairwise = a2a && !a.one_step;
  auto at = [&](int dist) { return pairwise ? static_cast<long>(dist) : 0L; };
  StepTable t;
  size_t scratch = 0;
  // Block s from rank s into this rank's output, dist = r - s (mod n) apart.
  // In place (all-to-all: input == output), the block received at step k
  // from rank r-k is block r-k, which this rank still has to send at step
  // n-k. For 2k <= n that send comes later (or in the same step), so the
  // block is received into Scratch slot k-1 and copied into place at the
  // start of step n-k+1 (or in a final step). For 2k > n the block was
  // already sent and is received in place. In one step every block is still
  // to be sent: all go through Scratch, copied in step 1.
  auto recv_block = [&](int s) {
    const int dist = mod(r - s, n);
    if (a2a && a.in_place && (a.one_step || 2 * dist <= n)) {
      const Slice slot{Buf::Scratch, static_cast<size_t>(dist - 1) * a.count, a.count};
      t.recv(at(dist), s, slot);
      t.copy(a.one_step ? 1 : n - dist + 1, out(s), slot);
      if (slot.offset + slot.count > scratch) scratch = slot.offset + slot.count;
    } else {
      t.recv(d.fold ? 1 : at(dist), s, out(s));
    }
  };
  if (a2a) {
    // Distance k = 1 .. n-1: block r+k to rank r+k, block r-k from rank
    // r-k; in one step the transfers keep that order (the order the small-
    // message path's fused pairwise steps have).
    for (int k = 1; k < n; ++k) {
      t.send(at(k), mod(r + k, n), in(mod(r + k, n)));
      recv_block(mod(r - k, n));
    }
    if (d.copy && !a.in_place) t.copy(at(1), out(r), in(r));
    return t.finish(scratch);
  }
  for (int k = 0; k < d.nsend; ++k) {
    const int p = mod(d.send_first + k, n);
    t.send(0, p, in(p));
  }
  if (d.copy && !a.in_place) t.copy(0, out(r), in(r));
  if (d.fold) {
    // Peers' copies of this rank's block land in Scratch slot s (rank s's
    // copy); in place, the own block goes to slot r first, since the fold
    // writes the output (= the input) before it reaches rank r.
    const size_t width = two_shot ? parts.len(0) : a.count;
    auto slot = [&](int b) {
      return Slice{Buf::Scratch, static_cast<size_t>(b) * width, in(r).count};
    };
    for (int k = 1; k < n; ++k) t.recv(0, mod(r - k, n), slot(mod(r - k, n)));
    if (a.in_place) t.copy(0, slot(r), in(r));
    const Slice dst = out(r);
    for (int b = 0; b < n; ++b) {
      const Slice src = b != r ? slot(b) : a.in_place ? slot(r) : in(r);
      if (b == 0)
        t.copy(1, dst, src);
      else
        t.reduce(1, dst, src);
    }
    if (d.fan)
      for (int k = 1; k < n; ++k) t.send(1, mod(r + k, n), dst);
    scratch = static_cast<size_t>(n) * width;
  }
  for (int k = 0; k < d.nrecv; ++k) recv_block(mod(d.recv_first + k, n));
  return t.finish(scratch);
}

}  // namespace

Plan direct_plan(const CollArgs& a) { return lay_direct(a, false); }

Plan twoshot_plan(const CollArgs& a) { return lay_direct(a, true); }

}  // namespace algo
}  // namespace mycoll
