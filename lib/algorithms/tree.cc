// Tree family.
//   allreduce      = pipelined reduce up a binary tree + pipelined broadcast down
//   broadcast      = binomial tree from root, pipelined in chunks
//   reduce         = binomial tree to root, pipelined in chunks
//   scatter/gather = binomial tree forwarding whole subtrees' blocks
// Every schedule is written in a global logical time (one time unit = one
// step in which every link carries at most one chunk), and the two ends of a
// transfer always use the same time, which makes the plans deadlock-free
// under rendezvous semantics. Details: docs/algorithms.md.
#include <algorithm>
#include <utility>

#include "algorithms/builders.h"

namespace mycoll {
namespace algo {
namespace {

// Ranks in breadth-first order from the root (parents before children).
std::vector<int> bfs_order(const Tree& t) {
  std::vector<int> order{t.root};
  for (size_t i = 0; i < order.size(); ++i)
    for (int u : t.children[order[i]]) order.push_back(u);
  return order;
}

std::vector<int> depths(const Tree& t) {
  std::vector<int> d(t.parent.size(), 0);
  for (int v : bfs_order(t))
    if (v != t.root) d[v] = d[t.parent[v]] + 1;
  return d;
}

// Reduction up a tree. A node receive-reduces chunk c from its i-th child at
// time c + send[child] and sends it up at time c + send[node]. Because
// RecvReduces into the same chunk must not share a step, the children of a
// node get strictly increasing send times (a child that would collide sends
// later, holding its result meanwhile), and a node sends one unit after its
// last child. kids[v] lists v's children by increasing send time.
struct UpSchedule {
  std::vector<long> send;
  std::vector<std::vector<int>> kids;
};

UpSchedule up_schedule(const Tree& t) {
  UpSchedule s;
  s.send.assign(t.parent.size(), 0);
  s.kids = t.children;
  std::vector<int> order = bfs_order(t);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    int v = *it;
    auto& kids = s.kids[v];
    std::stable_sort(kids.begin(), kids.end(),
                     [&](int x, int y) { return s.send[x] < s.send[y]; });
    long last = -1;
    for (int u : kids) {
      if (s.send[u] <= last) s.send[u] = last + 1;
      last = s.send[u];
    }
    s.send[v] = kids.empty() ? 0 : last + 1;
  }
  return s;
}

// Emits this rank's part of the reduction of Input up the tree. acc(c) is
// where the node accumulates chunk c (the root's must be Output).
template <typename Acc>
void emit_up(StepTable& t, const Tree& tr, const UpSchedule& up, int r, const Chunks& ch,
             Acc acc) {
  const auto& kids = up.kids[r];
  for (int c = 0; c < ch.num(); ++c) {
    for (size_t i = 0; i < kids.size(); ++i) {
      int u = kids[i];
      t.recv_reduce(c + up.send[u], u, acc(c), i == 0 ? ch.at(Buf::Input, c) : acc(c));
    }
    if (r != tr.root)
      t.send(c + up.send[r], tr.parent[r], kids.empty() ? ch.at(Buf::Input, c) : acc(c));
  }
}

// Broadcast down the tree into Output: the root sends chunk c from root_src
// at time c + start; a node at depth d receives it at c + start + d - 1 and
// forwards it to all its children one unit later.
void emit_down(StepTable& t, const Tree& tr, const std::vector<int>& depth, int r,
               const Chunks& ch, long start, Buf root_src) {
  for (int c = 0; c < ch.num(); ++c) {
    long at = c + start;
    if (r != tr.root) {
      at += depth[r] - 1;
      t.recv(at, tr.parent[r], ch.at(Buf::Output, c));
      ++at;
    }
    for (int u : tr.children[r]) t.send(at, u, ch.at(r == tr.root ? root_src : Buf::Output, c));
  }
}

}  // namespace

Plan tree_allreduce(const CollArgs& a, const Tree& tr) {
  UpSchedule up = up_schedule(tr);
  Chunks ch(a);
  StepTable t;
  emit_up(t, tr, up, a.rank, ch, [&](int c) { return ch.at(Buf::Output, c); });
  emit_down(t, tr, depths(tr), a.rank, ch, up.send[tr.root], Buf::Output);
  return t.finish();
}

Plan tree_broadcast(const CollArgs& a, const Tree& tr) {
  Chunks ch(a);
  StepTable t;
  if (a.rank == a.root) t.copy(0, Slice{Buf::Output, 0, a.count}, Slice{Buf::Input, 0, a.count});
  emit_down(t, tr, depths(tr), a.rank, ch, 0, Buf::Input);
  return t.finish();
}

// Non-root inner nodes accumulate in K chunk-sized Scratch slots, K = the
// number of chunks alive at once (first receive to send, inclusive).
Plan tree_reduce(const CollArgs& a, const Tree& tr) {
  UpSchedule up = up_schedule(tr);
  Chunks ch(a);
  const int r = a.rank;
  const auto& kids = up.kids[r];
  const bool is_root = r == a.root;
  long slots = kids.empty() ? 1 : up.send[r] - up.send[kids[0]] + 1;
  size_t scratch = 0;
  auto acc = [&](int c) {
    if (is_root) return ch.at(Buf::Output, c);
    Slice s{Buf::Scratch, static_cast<size_t>(c % slots) * ch.size(), ch.len(c)};
    scratch = std::max(scratch, s.offset + s.count);
    return s;
  };
  StepTable t;
  emit_up(t, tr, up, r, ch, acc);
  return t.finish(scratch);
}

namespace {

// Blocks are handled in relative rank order x = rank - root (mod n): the
// binomial subtree of relative rank v holds x in [v, v + size(v)).
int subtree_size(int v, int n) { return v == 0 ? n : std::min(v & -v, n - v); }

// [lo, hi) cut before every x in (lo, hi) with cut(x).
template <typename Cut>
std::vector<std::pair<int, int>> pieces(int lo, int hi, Cut cut) {
  std::vector<std::pair<int, int>> out;
  int start = lo;
  for (int x = lo + 1; x < hi; ++x)
    if (cut(x)) {
      out.emplace_back(start, x);
      start = x;
    }
  out.emplace_back(start, hi);
  return out;
}

// Messages between a node and its child carry the child's subtree blocks;
// they are split where either side's memory is discontiguous: the child's own
// block (Input or Output) vs the rest (Scratch), and, on the root, between
// blocks that are not adjacent in the user's blocked buffer (every block when
// stride != count, else where the relative order wraps to actual block 0).
// Non-root nodes keep subtree blocks x > v packed in Scratch at (x - v - 1).
struct Rooted {
  const CollArgs& a;
  int act(int x) const { return (x + a.root) % a.nranks; }
  int rel(int r) const { return mod(r - a.root, a.nranks); }
  bool root_cut(int x) const { return block_stride(a) != a.count || act(x) == 0; }
  Slice on_root(Buf buf, int x0, int x1) const {
    return Slice{buf, act(x0) * block_stride(a), (x1 - x0) * a.count};
  }
  Slice in_scratch(int v, int x0, int x1) const {
    return Slice{Buf::Scratch, (x0 - v - 1) * a.count, (x1 - x0) * a.count};
  }
};

// Node v sends its subtree up at time height(v); the parent receives child
// u's subtree at height(u).
Plan gather(const CollArgs& a) {
  Tree tr = binomial_tree(a.nranks, a.root);
  Rooted R{a};
  const int n = a.nranks, r = a.rank, v = R.rel(r);
  std::vector<long> height(n, 0);
  std::vector<int> order = bfs_order(tr);
  for (auto it = order.rbegin(); it != order.rend(); ++it)
    for (int u : tr.children[*it]) height[*it] = std::max(height[*it], height[u] + 1);
  StepTable t;
  const bool is_root = r == a.root;
  if (is_root) t.copy(0, block(a, Buf::Output, r), Slice{Buf::Input, 0, a.count});
  for (int u : tr.children[r]) {
    int uu = R.rel(u);
    auto cut = [&](int x) { return x == uu + 1 || (is_root && R.root_cut(x)); };
    for (auto [x0, x1] : pieces(uu, uu + subtree_size(uu, n), cut))
      t.recv(height[u], u, is_root ? R.on_root(Buf::Output, x0, x1) : R.in_scratch(v, x0, x1));
  }
  if (!is_root) {
    bool parent_root = tr.parent[r] == a.root;
    auto cut = [&](int x) { return x == v + 1 || (parent_root && R.root_cut(x)); };
    for (auto [x0, x1] : pieces(v, v + subtree_size(v, n), cut))
      t.send(height[r], tr.parent[r],
             x0 == v ? Slice{Buf::Input, 0, a.count} : R.in_scratch(v, x0, x1));
  }
  return t.finish(is_root ? 0 : (subtree_size(v, n) - 1) * a.count);
}

// The root sends every child its subtree at time 0; a node at depth d
// receives at d-1 (own block straight into Output) and forwards at d.
Plan scatter(const CollArgs& a) {
  Tree tr = binomial_tree(a.nranks, a.root);
  std::vector<int> depth = depths(tr);
  Rooted R{a};
  const int n = a.nranks, r = a.rank, v = R.rel(r);
  const bool is_root = r == a.root;
  StepTable t;
  if (is_root) t.copy(0, Slice{Buf::Output, 0, a.count}, block(a, Buf::Input, r));
  if (!is_root) {
    bool parent_root = tr.parent[r] == a.root;
    auto cut = [&](int x) { return x == v + 1 || (parent_root && R.root_cut(x)); };
    for (auto [x0, x1] : pieces(v, v + subtree_size(v, n), cut))
      t.recv(depth[r] - 1, tr.parent[r],
             x0 == v ? Slice{Buf::Output, 0, a.count} : R.in_scratch(v, x0, x1));
  }
  for (int u : tr.children[r]) {
    int uu = R.rel(u);
    auto cut = [&](int x) { return x == uu + 1 || (is_root && R.root_cut(x)); };
    for (auto [x0, x1] : pieces(uu, uu + subtree_size(uu, n), cut))
      t.send(depth[r], u, is_root ? R.on_root(Buf::Input, x0, x1) : R.in_scratch(v, x0, x1));
  }
  return t.finish(is_root ? 0 : (subtree_size(v, n) - 1) * a.count);
}

}  // namespace

Plan tree_plan(const CollArgs& a) {
  switch (a.coll) {
    case Coll::AllReduce: return tree_allreduce(a, binary_tree(a.nranks));
    case Coll::Broadcast: return tree_broadcast(a, binomial_tree(a.nranks, a.root));
    case Coll::Reduce: return tree_reduce(a, binomial_tree(a.nranks, a.root));
    case Coll::Scatter: return scatter(a);
    case Coll::Gather: return gather(a);
    default: break;
  }
  return Plan{};  // unreachable: build_plan checked algo_supports
}

}  // namespace algo
}  // namespace mycoll
