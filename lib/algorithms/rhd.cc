// Recursive halving / doubling family, for any number of ranks.
//   allreduce     = Rabenseifner: recursive-halving reduce-scatter +
//                   recursive-doubling all-gather over p segments
//   reducescatter = recursive halving over the rank blocks
//   allgather     = recursive doubling over the rank blocks
//   doubling      = all-reduce by recursive doubling of the whole vector
//                   (log2 p steps of one message each way: fewer steps and
//                   messages than Rabenseifner's 2 log2 p, each carrying the
//                   whole vector; for small messages)
// With n not a power of two, p = the largest power of two <= n and
// rem = n - p: ranks 0..2*rem-1 pair up (2i, 2i+1); the even one folds its
// data into the odd one before the p-rank core runs and gets the result back
// after it. The core runs on "new ranks": the odd rank of a pair i is new
// rank i, a rank r >= 2*rem is new rank r - rem. Details: docs/algorithms.md.
// All-reduce is topology-aware (CollArgs::host_of): over several hosts its
// halving steps take the distances whose partners share a host first.
#include <algorithm>
#include <utility>

#include "algorithms/builders.h"

namespace mycoll {
namespace algo {
namespace {

struct Fold {
  int n, p, rem;
  explicit Fold(int nranks) : n(nranks), p(1), rem(0) {
    while (p * 2 <= n) p *= 2;
    rem = n - p;
  }
  bool folded_away(int r) const { return r < 2 * rem && r % 2 == 0; }  // even rank of a pair
  bool folds_in(int r) const { return r < 2 * rem && r % 2 == 1; }     // odd rank of a pair
  int new_rank(int r) const { return r < 2 * rem ? r / 2 : r - rem; }  // for non-folded-away r
  int real_rank(int nr) const { return nr < rem ? 2 * nr + 1 : nr + rem; }
  // First rank block of new rank nr's segment (the blocks whose owners it
  // represents: {2nr, 2nr+1} for a pair, else {nr + rem}); nr may be p.
  int first_block(int nr) const { return nr < rem ? 2 * nr : nr + rem; }
};

// Distances of the all-reduce's halving steps, in order (the doubling uses
// them backwards). One host: p/2, ..., 1. Several hosts: ordered by how many
// new ranks' partners at that distance live on another host, fewest first
// (ties keep the descending order). The halving's first steps move the
// largest halves and the doubling's last steps the largest windows, so those
// stay inside hosts; with h hosts of k ranks (powers of two, host-major)
// the first log2 k halving steps are local and a rank sends about 2m/k
// across hosts instead of 2m(1 - 1/h).
std::vector<int> halving_distances(const Fold& f, const CollArgs& a) {
  std::vector<int> ds;
  for (int d = f.p / 2; d >= 1; d /= 2) ds.push_back(d);
  if (a.host_of == nullptr) return ds;
  const Hosts h = host_layout(a);
  if (h.count() == 1) return ds;
  std::vector<std::pair<int, int>> keyed;  // (crossing partners, d)
  for (int d : ds) {
    int crossing = 0;
    for (int nr = 0; nr < f.p; ++nr)
      crossing += h.host[f.real_rank(nr)] != h.host[f.real_rank(nr ^ d)];
    keyed.emplace_back(crossing, d);
  }
  std::stable_sort(keyed.begin(), keyed.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  for (size_t i = 0; i < ds.size(); ++i) ds[i] = keyed[i].second;
  return ds;
}

// The whole all-reduce of a folded-away rank (both all-reduces): its input
// to its partner, the result back.
Plan folded_away_allreduce(const CollArgs& a) {
  StepTable t;
  t.send(0, a.rank + 1, Slice{Buf::Input, 0, a.count});
  t.recv(1, a.rank + 1, Slice{Buf::Output, 0, a.count});
  return t.finish();
}

Plan allreduce(const CollArgs& a) {
  Fold f(a.nranks);
  const int r = a.rank;
  const Slice in_all{Buf::Input, 0, a.count}, out_all{Buf::Output, 0, a.count};
  StepTable t;
  if (f.folded_away(r)) return folded_away_allreduce(a);
  long time = 0;
  bool in_output = false;  // whether Output holds this rank's running sums
  if (f.folds_in(r)) {
    t.recv_reduce(time++, r - 1, out_all, in_all);
    in_output = true;
  }
  Parts seg(a.count, f.p);
  const int nr = f.new_rank(r);
  const std::vector<int> dists = halving_distances(f, a);
  // The window [lo, hi) of segments this rank is responsible for. Partners
  // at distance d agree on every bit handled before d, hence on the window.
  int lo = 0, hi = f.p;
  std::vector<std::pair<int, int>> windows;  // before each halving step
  // Halving: keep the half of the window the partner does not keep (the
  // lower half when bit d of nr is 0).
  for (int d : dists) {
    int peer = f.real_rank(nr ^ d), mid = lo + (hi - lo) / 2;
    bool low = (nr & d) == 0;
    int klo = low ? lo : mid, khi = low ? mid : hi, slo = low ? mid : lo, shi = low ? hi : mid;
    Buf src = in_output ? Buf::Output : Buf::Input;
    t.send(time, peer, seg.range(src, slo, shi));
    t.recv_reduce(time, peer, seg.range(Buf::Output, klo, khi), seg.range(src, klo, khi));
    in_output = true;
    windows.emplace_back(lo, hi);
    lo = klo;
    hi = khi;
    ++time;
  }
  // Doubling: exchange windows with the same partners in reverse order until
  // all p segments are here.
  for (auto it = dists.rbegin(); it != dists.rend(); ++it, ++time) {
    auto [plo, phi] = windows.back();
    windows.pop_back();
    int peer = f.real_rank(nr ^ *it), mid = plo + (phi - plo) / 2;
    t.send(time, peer, seg.range(Buf::Output, lo, hi));
    t.recv(time, peer,
           lo == plo ? seg.range(Buf::Output, mid, phi) : seg.range(Buf::Output, plo, mid));
    lo = plo;
    hi = phi;
  }
  if (f.folds_in(r)) t.send(time, r - 1, out_all);
  return t.finish();
}

// Recursive doubling of the whole vector (Algo::Doubling): at distance
// d = 1, 2, ..., p/2 a rank sends its running result to new rank nr ^ d and
// combines the partner's with it. The lower group's result is the left
// operand of every combine (the fold's too: rank r-1's input before rank
// r's), so every rank evaluates the same expression, operand order
// included, and ends with the same bits even where an op's result depends
// on the order (max(-0, +0), the payload of max(NaN, NaN); only which
// payload a sum or product of two NaNs keeps is the compiler's choice in
// each add). RecvReduce computes local <op> incoming, so the lower side
// receive-reduces; the upper side receives into its next buffer and
// reduces its own result into it (Reduce: dst <op> src) at the start of
// the next step. A step may not write the buffer it sends, so the running
// result alternates between Output and Scratch, laid out so that the last
// write lands in Output; in place, where the first write would land in
// Output (the Input it sends, or reduces after receiving), the result is
// built in Scratch instead and copied out at the end.
Plan doubling_allreduce(const CollArgs& a) {
  Fold f(a.nranks);
  const int r = a.rank;
  const Slice out_all{Buf::Output, 0, a.count};
  StepTable t;
  if (f.folded_away(r)) return folded_away_allreduce(a);
  int core = 0;
  for (int d = 1; d < f.p; d *= 2) ++core;
  const int writes = core + (f.folds_in(r) ? 1 : 0);
  // Write j targets Output when writes - 1 - j is even.
  bool to_output = (writes - 1) % 2 == 0;
  const bool copy_out = a.in_place && to_output;
  if (copy_out) to_output = false;
  auto all = [&](Buf b) { return Slice{b, 0, a.count}; };
  long time = 0;
  Buf cur = Buf::Input;
  bool scratch = false, owed = false;
  // Combines the partner's result (arriving at `time`) with cur into the
  // next buffer; `lower`: this rank's result is the left operand.
  auto combine = [&](int peer, bool lower) {
    const Buf dst = to_output ? Buf::Output : Buf::Scratch;
    if (lower) {
      t.recv_reduce(time, peer, all(dst), all(cur));
    } else {
      t.recv(time, peer, all(dst));
      t.reduce(time + 1, all(dst), all(cur));
    }
    owed = !lower;
    cur = dst;
    scratch |= !to_output;
    to_output = !to_output;
  };
  if (f.folds_in(r)) combine(r - 1, false), ++time;
  const int nr = f.new_rank(r);
  for (int d = 1; d < f.p; d *= 2, ++time) {
    t.send(time, f.real_rank(nr ^ d), all(cur));
    combine(f.real_rank(nr ^ d), (nr & d) == 0);
  }
  if (owed) ++time;  // the last combine's reduce has a step of its own
  if (copy_out) t.copy(time++, out_all, all(Buf::Scratch));
  if (f.folds_in(r)) t.send(time, r - 1, out_all);
  return t.finish(scratch ? a.count : 0);
}

// Working copy W = Scratch holding all n blocks packed (block b at b*count).
// Before a rank has reduced anything its operand is `src`: the Input itself
// when stride == count (already packed), else W after packing copies. The
// last halving step reduces this rank's own block straight into Output; in
// place that is Input block r, which nothing reads afterwards.
Plan reducescatter(const CollArgs& a) {
  Fold f(a.nranks);
  const int n = a.nranks, r = a.rank;
  const bool packed = block_stride(a) != a.count;
  auto blocks = [&](Buf buf, int b0, int b1) {
    return Slice{buf, b0 * a.count, (b1 - b0) * a.count};
  };
  const Slice out{Buf::Output, 0, a.count};
  StepTable t;
  if (packed)
    for (int b = 0; b < n; ++b) t.copy(0, blocks(Buf::Scratch, b, b + 1), block(a, Buf::Input, b));
  const Buf first_src = packed ? Buf::Scratch : Buf::Input;
  const size_t scratch = static_cast<size_t>(n) * a.count;
  if (f.folded_away(r)) {
    t.send(0, r + 1, blocks(first_src, 0, n));
    t.recv(1, r + 1, out);
    return t.finish(packed ? scratch : 0);
  }
  long time = 0;
  bool in_w = packed;
  if (f.folds_in(r)) {
    t.recv_reduce(time++, r - 1, blocks(Buf::Scratch, 0, n), blocks(first_src, 0, n));
    in_w = true;
  }
  const int nr = f.new_rank(r);
  int lo = 0, hi = f.p;
  for (int d = f.p / 2; d >= 1; d /= 2, ++time) {
    int peer = f.real_rank(nr ^ d), mid = lo + d;
    bool low = (nr & d) == 0;
    int klo = low ? lo : mid, khi = low ? mid : hi, slo = low ? mid : lo, shi = low ? hi : mid;
    Buf src = in_w ? Buf::Scratch : first_src;
    int sb0 = f.first_block(slo), sb1 = f.first_block(shi);
    if (d == 1) {  // the partner splits its receive at its own block, the last one
      t.send(time, peer, blocks(src, sb0, sb1 - 1));
      t.send(time, peer, blocks(src, sb1 - 1, sb1));
    } else {
      t.send(time, peer, blocks(src, sb0, sb1));
    }
    int kb0 = f.first_block(klo), kb1 = f.first_block(khi);
    if (d == 1) {  // kept window = own segment = blocks {r-1, r} or {r}
      t.recv_reduce(time, peer, blocks(Buf::Scratch, kb0, r), blocks(src, kb0, r));
      t.recv_reduce(time, peer, out, blocks(src, r, r + 1));
    } else {
      t.recv_reduce(time, peer, blocks(Buf::Scratch, kb0, kb1), blocks(src, kb0, kb1));
    }
    in_w = true;
    lo = klo;
    hi = khi;
  }
  if (f.folds_in(r)) t.send(time, r - 1, blocks(Buf::Scratch, r - 1, r));
  return t.finish(scratch);
}

// Working buffer W = Output when stride == count (blocks already packed),
// else Scratch with the n blocks packed, copied out to Output at the end.
Plan allgather(const CollArgs& a) {
  Fold f(a.nranks);
  const int n = a.nranks, r = a.rank;
  const bool packed = block_stride(a) != a.count;
  const Buf w = packed ? Buf::Scratch : Buf::Output;
  auto blocks = [&](int b0, int b1) { return Slice{w, b0 * a.count, (b1 - b0) * a.count}; };
  const Slice in{Buf::Input, 0, a.count};
  StepTable t;
  long time = 0;
  if (f.folded_away(r)) {
    t.send(time++, r + 1, in);
    t.recv(time++, r + 1, blocks(0, n));
  } else {
    t.copy(time, blocks(r, r + 1), in);
    if (f.folds_in(r)) t.recv(time++, r - 1, blocks(r - 1, r));
    const int nr = f.new_rank(r);
    int lo = nr, hi = nr + 1;
    for (int d = 1; d < f.p; d *= 2, ++time) {
      int peer = f.real_rank(nr ^ d), plo = lo ^ d;
      t.send(time, peer, blocks(f.first_block(lo), f.first_block(hi)));
      t.recv(time, peer, blocks(f.first_block(plo), f.first_block(plo + d)));
      lo = lo < plo ? lo : plo;
      hi = lo + 2 * d;
    }
    if (f.folds_in(r)) t.send(time, r - 1, blocks(0, n));
  }
  if (packed)
    for (int b = 0; b < n; ++b) t.copy(time, block(a, Buf::Output, b), blocks(b, b + 1));
  return t.finish(packed ? static_cast<size_t>(n) * a.count : 0);
}

}  // namespace

Plan rhd_plan(const CollArgs& a) {
  switch (a.coll) {
    case Coll::AllReduce: return allreduce(a);
    case Coll::ReduceScatter: return reducescatter(a);
    case Coll::AllGather: return allgather(a);
    default: break;
  }
  return Plan{};  // unreachable: build_plan checked algo_supports
}

Plan doubling_plan(const CollArgs& a) { return doubling_allreduce(a); }

}  // namespace algo
}  // namespace mycoll
