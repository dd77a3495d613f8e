// Hier family: two-level trees for several hosts (CollArgs::host_of).
//   allreduce = pipelined reduce up + broadcast down the two-level tree
//   broadcast = pipelined broadcast down the two-level tree from root
//   reduce    = pipelined reduce up the two-level tree to root
// The two-level tree: inside each host the ranks form a chain (head first,
// each rank's parent is the one before it); the chain heads form a binary
// tree over the hosts in heap order of the host index relative to the root's
// host. The root's host starts its chain at the root; every other host at
// its lowest rank. Together that is one rooted tree over the ranks, which the
// pipelined schedules of tree.cc run (chunks stream through chains and the
// host tree alike). Only chain heads send across hosts: a head exchanges
// with its parent host and at most two child hosts. Details:
// docs/algorithms.md.
#include <algorithm>

#include "algorithms/builders.h"

namespace mycoll {
namespace algo {
namespace {

Tree two_level_tree(const CollArgs& a, int root) {
  const Hosts h = host_layout(a);
  const int nh = h.count(), root_host = h.host[root];
  Tree t;
  t.root = root;
  t.parent.assign(a.nranks, -1);
  t.children.assign(a.nranks, {});
  std::vector<int> head(nh);
  for (int x = 0; x < nh; ++x) {
    std::vector<int> chain = h.ranks[x];
    if (x == root_host)  // start at the root, then the host's other ranks cyclically
      std::rotate(chain.begin(), std::find(chain.begin(), chain.end(), root), chain.end());
    head[x] = chain[0];
    for (size_t j = 1; j < chain.size(); ++j) {
      t.parent[chain[j]] = chain[j - 1];
      t.children[chain[j - 1]].push_back(chain[j]);
    }
  }
  // Binary tree over relative host indices v = host - root_host (mod nh).
  for (int v = 1; v < nh; ++v) {
    int x = (v + root_host) % nh, px = ((v - 1) / 2 + root_host) % nh;
    t.parent[head[x]] = head[px];
    t.children[head[px]].push_back(head[x]);
  }
  return t;
}

}  // namespace

Plan hier_plan(const CollArgs& a) {
  switch (a.coll) {
    case Coll::AllReduce: return tree_allreduce(a, two_level_tree(a, 0));
    case Coll::Broadcast: return tree_broadcast(a, two_level_tree(a, a.root));
    case Coll::Reduce: return tree_reduce(a, two_level_tree(a, a.root));
    default: break;
  }
  return Plan{};  // unreachable: build_plan checked algo_supports
}

}  // namespace algo
}  // namespace mycoll
