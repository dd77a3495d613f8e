// Names, capabilities, buffer extents and the build_plan() entry point; the
// shared StepTable and tree helpers of the family builders.
#include <string>

#include "algorithms/builders.h"
#include "base/error.h"

namespace mycoll {

const char* coll_name(Coll c) {
  switch (c) {
    case Coll::AllReduce: return "allreduce";
    case Coll::Broadcast: return "broadcast";
    case Coll::Reduce: return "reduce";
    case Coll::AllGather: return "allgather";
    case Coll::ReduceScatter: return "reducescatter";
    case Coll::AllToAll: return "alltoall";
    case Coll::Scatter: return "scatter";
    case Coll::Gather: return "gather";
    case Coll::SendRecv: return "sendrecv";
  }
  return "unknown";
}

const char* algo_name(Algo a) {
  switch (a) {
    case Algo::Ring: return "ring";
    case Algo::Tree: return "tree";
    case Algo::Rhd: return "rhd";
    case Algo::Direct: return "direct";
    case Algo::Hier: return "hier";
    case Algo::TwoShot: return "twoshot";
    case Algo::Doubling: return "doubling";
  }
  return "unknown";
}

bool algo_supports(Algo a, Coll c) {
  switch (a) {
    case Algo::Ring:
      return c == Coll::AllReduce || c == Coll::ReduceScatter || c == Coll::AllGather ||
             c == Coll::Broadcast || c == Coll::Reduce;
    case Algo::Tree:
      return c == Coll::AllReduce || c == Coll::Broadcast || c == Coll::Reduce ||
             c == Coll::Scatter || c == Coll::Gather;
    case Algo::Rhd: return c == Coll::AllReduce || c == Coll::ReduceScatter || c == Coll::AllGather;
    case Algo::Direct:
      return c == Coll::AllReduce || c == Coll::AllGather || c == Coll::ReduceScatter ||
             c == Coll::AllToAll || c == Coll::Scatter || c == Coll::Gather ||
             c == Coll::Broadcast || c == Coll::Reduce;
    case Algo::TwoShot:
    case Algo::Doubling: return c == Coll::AllReduce;
    case Algo::Hier: return c == Coll::AllReduce || c == Coll::Broadcast || c == Coll::Reduce;
  }
  return false;
}

BufferCounts buffer_counts(const CollArgs& a) {
  size_t n = a.nranks > 0 ? static_cast<size_t>(a.nranks) : 0;
  size_t blocked = (a.count == 0 || n == 0) ? 0 : (n - 1) * algo::block_stride(a) + a.count;
  const bool is_root = a.rank == a.root;
  BufferCounts b{coll_input_blocked(a.coll) ? blocked : a.count,
                 coll_output_blocked(a.coll) ? blocked : a.count};
  // Rooted collectives: only the root reads its input (broadcast, scatter)
  // or writes its output (reduce, gather).
  if (!is_root && (a.coll == Coll::Broadcast || a.coll == Coll::Scatter)) b.input = 0;
  if (!is_root && (a.coll == Coll::Reduce || a.coll == Coll::Gather)) b.output = 0;
  return b;
}

namespace {

void validate(Algo algo, const CollArgs& a) {
  if (static_cast<int>(algo) >= kNumAlgos)
    throw_error(mycollInvalidArgument,
                "build_plan: unknown algorithm id " + std::to_string(static_cast<int>(algo)));
  if (static_cast<int>(a.coll) >= kNumColls)
    throw_error(mycollInvalidArgument,
                "build_plan: unknown collective id " + std::to_string(static_cast<int>(a.coll)));
  if (!algo_supports(algo, a.coll))
    throw_error(mycollInvalidUsage, std::string("build_plan: algorithm '") + algo_name(algo) +
                                        "' does not serve collective '" + coll_name(a.coll) + "'");
  if (a.nranks < 1)
    throw_error(mycollInvalidArgument, std::string("build_plan ") + coll_name(a.coll) +
                                           ": nranks " + std::to_string(a.nranks) + " < 1");
  if (a.rank < 0 || a.rank >= a.nranks)
    throw_error(mycollInvalidArgument, std::string("build_plan ") + coll_name(a.coll) + ": rank " +
                                           std::to_string(a.rank) + " out of range [0, " +
                                           std::to_string(a.nranks) + ")");
  if (coll_is_rooted(a.coll) && (a.root < 0 || a.root >= a.nranks))
    throw_error(mycollInvalidArgument, std::string("build_plan ") + coll_name(a.coll) + ": root " +
                                           std::to_string(a.root) + " out of range [0, " +
                                           std::to_string(a.nranks) + ")");
  if (coll_is_blocked(a.coll) && a.stride != 0 && a.stride < a.count)
    throw_error(mycollInvalidArgument, std::string("build_plan ") + coll_name(a.coll) +
                                           ": stride " + std::to_string(a.stride) + " < count " +
                                           std::to_string(a.count));
}

}  // namespace

Plan build_plan(Algo algo, const CollArgs& a) {
  validate(algo, a);
  Plan plan;
  if (a.count == 0) return plan;
  if (a.nranks == 1) {
    // Every collective on one rank is "Output = Input" (block 0 of a blocked
    // buffer starts at 0); the engine skips it when both are the same memory.
    Step s;
    Op op;
    op.kind = OpKind::Copy;
    op.dst = Slice{Buf::Output, 0, a.count};
    op.src = Slice{Buf::Input, 0, a.count};
    s.ops.push_back(op);
    plan.steps.push_back(s);
  } else {
    switch (algo) {
      case Algo::Ring: plan = algo::ring_plan(a); break;
      case Algo::Tree: plan = algo::tree_plan(a); break;
      case Algo::Rhd: plan = algo::rhd_plan(a); break;
      case Algo::Direct: plan = algo::direct_plan(a); break;
      case Algo::Hier: plan = algo::hier_plan(a); break;
      case Algo::TwoShot: plan = algo::twoshot_plan(a); break;
      case Algo::Doubling: plan = algo::doubling_plan(a); break;
    }
  }
  const bool reduced = coll_reduces(a.coll) && (a.coll != Coll::Reduce || a.rank == a.root);
  plan.result = Slice{Buf::Output, 0, reduced ? a.count : 0};
  return plan;
}

namespace algo {

void StepTable::copy(long t, Slice dst, Slice src) {
  if (dst.count == 0) return;
  Op op;
  op.kind = OpKind::Copy;
  op.dst = dst;
  op.src = src;
  by_time_[t].copies.push_back(op);
}

void StepTable::reduce(long t, Slice dst, Slice src) {
  if (dst.count == 0) return;
  Op op;
  op.kind = OpKind::Reduce;
  op.dst = dst;
  op.src = src;
  by_time_[t].copies.push_back(op);
}

void StepTable::send(long t, int peer, Slice src) {
  if (src.count == 0) return;
  Op op;
  op.kind = OpKind::Send;
  op.peer = peer;
  op.src = src;
  by_time_[t].transfers.push_back(op);
}

void StepTable::recv(long t, int peer, Slice dst) {
  if (dst.count == 0) return;
  Op op;
  op.kind = OpKind::Recv;
  op.peer = peer;
  op.dst = dst;
  by_time_[t].transfers.push_back(op);
}

void StepTable::recv_reduce(long t, int peer, Slice dst, Slice src) {
  if (dst.count == 0) return;
  Op op;
  op.kind = OpKind::RecvReduce;
  op.peer = peer;
  op.dst = dst;
  op.src = src;
  by_time_[t].transfers.push_back(op);
}

Plan StepTable::finish(size_t scratch_count) {
  Plan plan;
  plan.scratch_count = scratch_count;
  for (auto& [t, bucket] : by_time_) {
    if (bucket.copies.empty() && bucket.transfers.empty()) continue;
    Step s;
    s.ops = std::move(bucket.copies);
    s.ops.insert(s.ops.end(), bucket.transfers.begin(), bucket.transfers.end());
    plan.steps.push_back(std::move(s));
  }
  by_time_.clear();
  return plan;
}

Tree binary_tree(int n) {
  Tree t;
  t.root = 0;
  t.parent.assign(n, -1);
  t.children.assign(n, {});
  for (int v = 1; v < n; ++v) {
    t.parent[v] = (v - 1) / 2;
    t.children[(v - 1) / 2].push_back(v);
  }
  return t;
}

Hosts host_layout(const CollArgs& a) {
  Hosts h;
  h.host.assign(a.nranks, 0);
  std::map<int, int> index;  // host id -> host index, in order of lowest rank
  for (int r = 0; r < a.nranks; ++r) {
    int id = a.host_of ? a.host_of[r] : 0;
    auto it = index.emplace(id, static_cast<int>(index.size())).first;
    h.host[r] = it->second;
    if (h.host[r] == static_cast<int>(h.ranks.size())) h.ranks.emplace_back();
    h.ranks[h.host[r]].push_back(r);
  }
  return h;
}

Tree binomial_tree(int n, int root) {
  Tree t;
  t.root = root;
  t.parent.assign(n, -1);
  t.children.assign(n, {});
  for (int v = 0; v < n; ++v) {
    int actual = (v + root) % n;
    if (v != 0) t.parent[actual] = ((v & (v - 1)) + root) % n;
    long limit = v == 0 ? static_cast<long>(n) : static_cast<long>(v & -v);
    for (long bit = 1; bit < limit && v + bit < n; bit <<= 1)
      t.children[actual].push_back(static_cast<int>((v + bit + root) % n));
  }
  return t;
}

}  // namespace algo
}  // namespace mycoll
