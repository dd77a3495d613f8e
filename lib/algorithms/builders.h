// Internal to lib/algorithms: the per-family plan builders and the small
// helpers they share. build_plan() (plan.cc) validates CollArgs, handles the
// trivial cases (count 0, one rank) and then calls one builder below; a
// builder may therefore assume nranks >= 2, count >= 1, 0 <= rank, root <
// nranks, stride >= count, and that its family serves a.coll.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "algorithms/plan.h"

namespace mycoll {
namespace algo {

inline int mod(long x, int n) {
  long m = x % n;
  return static_cast<int>(m < 0 ? m + n : m);
}

// Distance between consecutive rank blocks (CollArgs::stride, 0 -> count).
inline size_t block_stride(const CollArgs& a) { return a.stride ? a.stride : a.count; }

// Slice of `len` elements at element `off` of rank block `b` of a blocked buffer.
inline Slice block(const CollArgs& a, Buf buf, int b, size_t off = 0, size_t len = SIZE_MAX) {
  return Slice{buf, b * block_stride(a) + off, len == SIZE_MAX ? a.count : len};
}

// `total` elements cut into `parts` contiguous pieces whose sizes differ by at
// most one (the first total % parts pieces are one larger). Pieces may be empty.
class Parts {
 public:
  Parts(size_t total, int parts) : total_(total), parts_(parts) {}
  size_t off(int i) const {
    size_t base = total_ / parts_, extra = total_ % parts_;
    size_t ui = static_cast<size_t>(i);
    return ui * base + (ui < extra ? ui : extra);
  }
  size_t len(int i) const { return off(i + 1) - off(i); }
  // Elements [off(lo), off(hi)) of buffer buf.
  Slice range(Buf buf, int lo, int hi) const { return Slice{buf, off(lo), off(hi) - off(lo)}; }

 private:
  size_t total_;
  int parts_;
};

// Pipelining chunks of a whole-buffer collective: chunk size CollArgs::chunk
// (0 or >= count -> one chunk of count).
class Chunks {
 public:
  explicit Chunks(const CollArgs& a)
      : count_(a.count), size_(a.chunk == 0 || a.chunk >= a.count ? a.count : a.chunk) {}
  int num() const { return static_cast<int>((count_ + size_ - 1) / size_); }
  size_t size() const { return size_; }
  size_t off(int c) const { return static_cast<size_t>(c) * size_; }
  size_t len(int c) const {
    size_t o = off(c);
    return count_ - o < size_ ? count_ - o : size_;
  }
  Slice at(Buf buf, int c) const { return Slice{buf, off(c), len(c)}; }

 private:
  size_t count_;
  size_t size_;
};

// Collects ops by (logical) time; finish() turns the times into consecutive
// Steps, dropping empty ones and putting a step's Copy ops first. Ops with a
// count of 0 are dropped on entry, so builders may add them freely: both
// sides of a transfer compute the same counts, hence drop the same messages.
// Times only order one rank's ops; they need not align across ranks (the
// builders align them anyway, which is what makes their plans deadlock-free
// under rendezvous semantics). Ops of one time keep their insertion order,
// which is the FIFO posting order between a pair of ranks.
class StepTable {
 public:
  void copy(long t, Slice dst, Slice src);
  // dst = dst <op> src, local; kept in order with the step's copies.
  void reduce(long t, Slice dst, Slice src);
  void send(long t, int peer, Slice src);
  void recv(long t, int peer, Slice dst);
  void recv_reduce(long t, int peer, Slice dst, Slice src);
  Plan finish(size_t scratch_count = 0);

 private:
  struct Bucket {
    std::vector<Op> copies;
    std::vector<Op> transfers;
  };
  std::map<long, Bucket> by_time_;
};

// Rooted trees over the ranks, for the tree family. children[v] lists v's
// children in the order the builders handle them.
struct Tree {
  int root = 0;
  std::vector<int> parent;  // -1 for the root
  std::vector<std::vector<int>> children;
};
// Binary tree in heap order (children of v: 2v+1, 2v+2), rooted at rank 0.
Tree binary_tree(int n);
// Binomial tree rooted at root over relative ranks v = rank - root (mod n):
// parent(v) clears v's lowest set bit; children v + 2^k for 2^k < lowbit(v),
// smallest subtree first.
Tree binomial_tree(int n, int root);

// Pipelined schedules over any rooted tree (tree.cc), shared by the tree and
// hier families. A node reduces chunk c up after its children, in a global
// time that both ends of every transfer share (deadlock-free), and the
// broadcast forwards chunk c to all children one step after receiving it.
//   allreduce: reduce to tr.root (accumulating in Output), broadcast back.
//   broadcast: tr.root must be a.root.
//   reduce:    tr.root must be a.root; inner nodes use Scratch chunk slots.
Plan tree_allreduce(const CollArgs& a, const Tree& tr);
Plan tree_broadcast(const CollArgs& a, const Tree& tr);
Plan tree_reduce(const CollArgs& a, const Tree& tr);

// CollArgs::host_of as host indices: hosts numbered 0, 1, ... in order of
// their lowest rank; ranks[h] = the ranks of host h, ascending. nullptr
// host_of gives one host holding every rank.
struct Hosts {
  std::vector<int> host;                // per rank
  std::vector<std::vector<int>> ranks;  // per host
  int count() const { return static_cast<int>(ranks.size()); }
};
Hosts host_layout(const CollArgs& a);

// Family builders (see docs/algorithms.md for each schedule).
Plan ring_plan(const CollArgs& a);
Plan tree_plan(const CollArgs& a);
Plan rhd_plan(const CollArgs& a);
Plan direct_plan(const CollArgs& a);
Plan hier_plan(const CollArgs& a);
Plan twoshot_plan(const CollArgs& a);
Plan doubling_plan(const CollArgs& a);  // rhd.cc (shares its fold)

}  // namespace algo
}  // namespace mycoll
