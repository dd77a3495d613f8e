// Direct family: every block goes straight from its source rank to its
// destination rank.
//   allreduce = one shot: all inputs to all ranks, then a local reduction
//   allgather = every rank sends its block to every rank (one step)
//   reducescatter = every rank sends block b to rank b, which reduces them
//   twoshot allreduce = direct reduce-scatter of n parts, then direct
//     all-gather of the reduced parts (two steps, 2(n-1)/n of the message
//     out per rank: one shot's latency class at ring-like traffic)
//   alltoall = pairwise exchange: step k sends to rank+k, receives from rank-k
//   scatter  = root sends block b to rank b (one step)
//   gather   = rank b sends its block to root (one step)
// Details: docs/algorithms.md.
#include "algorithms/builders.h"

namespace mycoll {
namespace algo {
namespace {

// In place (Input == Output), the block received at step k from rank r-k is
// block r-k, which this rank still has to send at step n-k. For 2k <= n that
// send comes later (or in the same step), so the block is received into
// Scratch slot k-1 and copied into place at the start of step n-k+1 (or in a
// final step). For 2k > n the block was already sent and is received in place.
Plan alltoall(const CollArgs& a) {
  const int n = a.nranks, r = a.rank;
  StepTable t;
  t.copy(1, block(a, Buf::Output, r), block(a, Buf::Input, r));
  size_t scratch = 0;
  for (int k = 1; k < n; ++k) {
    int to = mod(r + k, n), from = mod(r - k, n);
    t.send(k, to, block(a, Buf::Input, to));
    if (a.in_place && 2 * k <= n) {
      Slice slot{Buf::Scratch, static_cast<size_t>(k - 1) * a.count, a.count};
      t.recv(k, from, slot);
      t.copy(n - k + 1, block(a, Buf::Output, from), slot);
      scratch = slot.offset + slot.count;
    } else {
      t.recv(k, from, block(a, Buf::Output, from));
    }
  }
  return t.finish(scratch);
}

// One-shot all-reduce for small messages: one step in which every rank sends
// its whole input to every other rank and receives theirs into Scratch slot
// (its own input is copied to its slot first), then a local step reducing
// slots 0..n-1 in rank order, so every rank computes bit-identical results.
Plan allreduce(const CollArgs& a) {
  const int n = a.nranks, r = a.rank;
  auto slot = [&](int b) { return Slice{Buf::Scratch, static_cast<size_t>(b) * a.count, a.count}; };
  StepTable t;
  t.copy(0, slot(r), Slice{Buf::Input, 0, a.count});
  for (int k = 1; k < n; ++k) {
    t.send(0, mod(r + k, n), Slice{Buf::Input, 0, a.count});
    t.recv(0, mod(r - k, n), slot(mod(r - k, n)));
  }
  const Slice out{Buf::Output, 0, a.count};
  t.copy(1, out, slot(0));
  for (int b = 1; b < n; ++b) t.reduce(1, out, slot(b));
  return t.finish(static_cast<size_t>(n) * a.count);
}

Plan allgather(const CollArgs& a) {
  const int n = a.nranks, r = a.rank;
  StepTable t;
  if (!a.in_place) t.copy(0, block(a, Buf::Output, r), Slice{Buf::Input, 0, a.count});
  for (int k = 1; k < n; ++k) {
    t.send(0, mod(r + k, n), Slice{Buf::Input, 0, a.count});
    const int from = mod(r - k, n);
    t.recv(0, from, block(a, Buf::Output, from));
  }
  return t.finish();
}

// Peers' copies of this rank's block land in Scratch slot b (rank b's copy),
// then one local pass reduces them into the output: own block first, the
// others in rank order.
Plan reducescatter(const CollArgs& a) {
  const int n = a.nranks, r = a.rank;
  auto slot = [&](int b) { return Slice{Buf::Scratch, static_cast<size_t>(b) * a.count, a.count}; };
  StepTable t;
  for (int k = 1; k < n; ++k) {
    const int to = mod(r + k, n), from = mod(r - k, n);
    t.send(0, to, block(a, Buf::Input, to));
    t.recv(0, from, slot(from));
  }
  const Slice out{Buf::Output, 0, a.count};
  t.copy(1, out, block(a, Buf::Input, r));
  for (int b = 0; b < n; ++b)
    if (b != r) t.reduce(1, out, slot(b));
  return t.finish(static_cast<size_t>(n) * a.count);
}

Plan scatter(const CollArgs& a) {
  StepTable t;
  if (a.rank == a.root) {
    t.copy(0, Slice{Buf::Output, 0, a.count}, block(a, Buf::Input, a.rank));
    for (int b = 0; b < a.nranks; ++b)
      if (b != a.root) t.send(0, b, block(a, Buf::Input, b));
  } else {
    t.recv(0, a.root, Slice{Buf::Output, 0, a.count});
  }
  return t.finish();
}

Plan gather(const CollArgs& a) {
  StepTable t;
  if (a.rank == a.root) {
    t.copy(0, block(a, Buf::Output, a.rank), Slice{Buf::Input, 0, a.count});
    for (int b = 0; b < a.nranks; ++b)
      if (b != a.root) t.recv(0, b, block(a, Buf::Output, b));
  } else {
    t.send(0, a.root, Slice{Buf::Input, 0, a.count});
  }
  return t.finish();
}

}  // namespace

Plan direct_plan(const CollArgs& a) {
  switch (a.coll) {
    case Coll::AllReduce: return allreduce(a);
    case Coll::AllGather: return allgather(a);
    case Coll::ReduceScatter: return reducescatter(a);
    case Coll::AllToAll: return alltoall(a);
    case Coll::Scatter: return scatter(a);
    case Coll::Gather: return gather(a);
    default: break;
  }
  return Plan{};  // unreachable: build_plan checked algo_supports
}

// Two-shot all-reduce: the message in n parts (Parts); step 0 sends part b
// to rank b and receives the peers' copies of part r into Scratch slots;
// step 1 reduces part r (own copy first, the others in rank order; only rank
// r computes it, so every rank ends with the same bits), sends it to every
// peer and receives their reduced parts in place. In place works: step 0
// has sent every input part before step 1 overwrites it.
Plan twoshot_plan(const CollArgs& a) {
  const int n = a.nranks, r = a.rank;
  const Parts p(a.count, n);
  const size_t width = p.len(0);  // the largest part
  auto slot = [&](int b) { return Slice{Buf::Scratch, static_cast<size_t>(b) * width, p.len(r)}; };
  StepTable t;
  for (int k = 1; k < n; ++k) {
    const int to = mod(r + k, n), from = mod(r - k, n);
    t.send(0, to, p.range(Buf::Input, to, to + 1));
    t.recv(0, from, slot(from));
  }
  const Slice mine = p.range(Buf::Output, r, r + 1);
  t.copy(1, mine, p.range(Buf::Input, r, r + 1));
  for (int b = 0; b < n; ++b)
    if (b != r) t.reduce(1, mine, slot(b));
  for (int k = 1; k < n; ++k) {
    const int to = mod(r + k, n), from = mod(r - k, n);
    t.send(1, to, mine);
    t.recv(1, from, p.range(Buf::Output, from, from + 1));
  }
  return t.finish(static_cast<size_t>(n) * width);
}

}  // namespace algo
}  // namespace mycoll
