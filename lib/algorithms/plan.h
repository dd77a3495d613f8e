// Algorithms are data: a Plan is what one rank does for one collective, as a
// short list of steps over slices of its buffers. Plans are built by pure
// functions (no I/O, no GPU); the host engine and the device engine execute
// the same Plans; the plan simulator checks every algorithm exhaustively.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mycoll {

enum class Coll : uint8_t {
  AllReduce,
  Broadcast,
  Reduce,
  AllGather,
  ReduceScatter,
  AllToAll,
  Scatter,
  Gather,
  SendRecv,
};
constexpr int kNumColls = 9;
const char* coll_name(Coll c);  // "allreduce", "broadcast", ... (lower case, as in MYCOLL_ALGO)

// Collective traits, the one place that says them (engines, enqueue, plans,
// the NCCL shim ask here instead of listing collectives).
// Reduces: combines the ranks' inputs with a mycollRedOp_t.
constexpr bool coll_reduces(Coll c) {
  return c == Coll::AllReduce || c == Coll::Reduce || c == Coll::ReduceScatter;
}
// Rooted: one rank (root) is the only source or the only destination.
constexpr bool coll_is_rooted(Coll c) {
  return c == Coll::Broadcast || c == Coll::Reduce || c == Coll::Scatter || c == Coll::Gather;
}
// Input / output laid out as nranks blocks of `count` elements, block r for
// rank r (the blocked buffer); count is then per block.
constexpr bool coll_input_blocked(Coll c) {
  return c == Coll::ReduceScatter || c == Coll::AllToAll || c == Coll::Scatter;
}
constexpr bool coll_output_blocked(Coll c) {
  return c == Coll::AllGather || c == Coll::AllToAll || c == Coll::Gather;
}
// Blocked: count is per rank block of one of its buffers.
constexpr bool coll_is_blocked(Coll c) { return coll_input_blocked(c) || coll_output_blocked(c); }
// Elements of the whole message: the blocked buffer (all-gather's output,
// reduce-scatter's, all-to-all's and scatter's input, gather's output) for
// blocked collectives, the one buffer of the others.
constexpr uint64_t coll_whole_count(Coll c, uint64_t count, int nranks) {
  return coll_is_blocked(c) ? count * static_cast<uint64_t>(nranks) : count;
}

// Algorithm families. Not every family serves every collective:
// algo_supports() says which (see docs/algorithms.md). Hier = two-level
// trees: a chain inside each host, a tree over the hosts' chain heads.
// Doubling = all-reduce by recursive doubling of the whole vector.
enum class Algo : uint8_t { Ring, Tree, Rhd, Direct, Hier, TwoShot, Doubling };
constexpr int kNumAlgos = 7;
// "ring", "tree", "rhd", "direct", "hier", "twoshot", "doubling"
const char* algo_name(Algo a);
bool algo_supports(Algo a, Coll c);

// The three buffers a plan may address. Input = the user's send buffer,
// Output = the user's receive buffer, Scratch = engine-owned temporary of
// Plan::scratch_count elements.
enum class Buf : uint8_t { Input, Output, Scratch };

// count elements starting at element offset of buffer buf.
struct Slice {
  Buf buf = Buf::Input;
  size_t offset = 0;
  size_t count = 0;
};

enum class OpKind : uint8_t {
  Send,        // send src to peer
  Recv,        // receive into dst from peer
  RecvReduce,  // dst = src (local) <op> incoming from peer; dst may equal src
  Copy,        // dst = src, local
  Reduce,      // dst = dst <op> src, local (runs with the copies, in order)
};

struct Op {
  OpKind kind = OpKind::Copy;
  int peer = -1;  // Send/Recv/RecvReduce; -1 for Copy
  Slice dst;      // Recv, RecvReduce, Copy, Reduce
  Slice src;      // Send, RecvReduce (local operand), Copy, Reduce
};

// Execution contract of a Step:
//  1. Local ops (Copy, Reduce) run first, in order.
//  2. Then every Send/Recv/RecvReduce of the step is in flight at once; the
//     step ends when all of them are complete. No op of a step may read
//     what another op of the same step writes.
//  3. Messages between an ordered pair (a -> b) match in posting order: the
//     k-th Send from a to b is the k-th Recv/RecvReduce on b from a, with the
//     same element count.
//  Steps run in order. A plan is deadlock-free when every send is matched
//  by a receive that its peer has in flight at the same time, without
//  buffering (rendezvous); the simulator checks exactly that.
struct Step {
  std::vector<Op> ops;
};

struct Plan {
  std::vector<Step> steps;
  size_t scratch_count = 0;  // elements of Scratch the plan needs
  // For reduction collectives: the slice holding this rank's final reduced
  // result (engines divide it by nranks for Avg). count 0 when none.
  Slice result{Buf::Output, 0, 0};
};

// What a plan is built from. Counts are in elements.
struct CollArgs {
  Coll coll = Coll::AllReduce;
  int nranks = 1;
  int rank = 0;
  int root = 0;  // Broadcast, Reduce, Scatter, Gather
  // AllReduce/Broadcast/Reduce: elements of the whole buffer.
  // AllGather/ReduceScatter/AllToAll/Scatter/Gather: elements per rank block.
  size_t count = 0;
  // Block-structured collectives: distance in elements between the starts of
  // consecutive rank blocks in the blocked buffer (0 means count). Lets an
  // engine run one plan per channel over a column of every block.
  size_t stride = 0;
  // Pipelining granularity for tree/chain algorithms (0 = whole message).
  size_t chunk = 0;
  // In-place as NCCL defines it (same pointer; all-gather input = this rank's
  // block of output; reduce-scatter output = this rank's block of input;
  // gather: root's input = its block of output; scatter: root's output = its
  // block of input; all-to-all: input == output). Builders must stay correct
  // under that aliasing; the simulator runs both ways.
  bool in_place = false;
  // All-to-all: every block in one step (all sends and receives at once; in
  // place, every received block lands in Scratch and is copied into place
  // in a second step) instead of the pairwise exchange's n-1 steps. The
  // host engine asks for it for small blocks (AlgoPolicy::alltoall_one_step);
  // other collectives ignore it.
  bool one_step = false;
  // Host layout, in the rank numbering the plan is built in: host_of[r] is
  // an id of rank r's host (equal ids = same host; any ints), nranks entries.
  // nullptr = every rank on one host. Read during build_plan only (the
  // caller keeps the array alive for that long). Only topology-aware
  // builders look at it: hier (its chains and host tree) and rhd all-reduce
  // (which exchanges inside hosts first); every other plan ignores it.
  const int* host_of = nullptr;
};

// Element counts of Input and Output a collective addresses on this rank
// (0 for a buffer it does not use, e.g. non-root Output of Reduce).
struct BufferCounts {
  size_t input = 0;
  size_t output = 0;
};
BufferCounts buffer_counts(const CollArgs& a);

// Builds the plan. Throws mycoll::Error(InvalidUsage) when algo does not
// serve a.coll, InvalidArgument for an out-of-range root/rank.
Plan build_plan(Algo algo, const CollArgs& a);

// Algorithm choice: MYCOLL_ALGO spec parsed once.
//   "" or "auto"          -> size/rank rule (docs/algorithms.md)
//   "ring" | "tree" | "rhd" | "direct" | "hier" | "twoshot" | "doubling" -> that family for every
//   collective
//                            it serves, auto for the others
//   "allreduce:rhd,broadcast:tree" -> per collective (others auto)
// A per-collective entry naming an algorithm that does not serve that
// collective, or an unknown name, is InvalidArgument at parse time.
class AlgoPolicy {
 public:
  AlgoPolicy() = default;
  static AlgoPolicy parse(const std::string& spec);
  // The algorithm for a collective of `bytes` total message size.
  Algo choose(Coll c, int nranks, size_t bytes) const;
  // The automatic rule alone.
  static Algo auto_choice(Coll c, int nranks, size_t bytes);
  // The largest all-reduce (bytes) the automatic rule gives the one shot.
  static size_t one_shot_max_bytes(int nranks);
  // More ranks on this host than CPU cores: every step waits for a peer to
  // be scheduled, so the automatic rule prefers fewer steps (rhd all-reduce
  // up to 8 MiB instead of the ring's 2(n-1) steps).
  void set_oversubscribed(bool v) { oversubscribed_ = v; }
  bool oversubscribed() const { return oversubscribed_; }
  // What links the ranks of a host-memory communicator (every rank's
  // buffers in host memory): Shm = every pair talks through shared memory
  // (one host), Network = some pair crosses a network transport (socket,
  // ib, ucx; sockets between namespaces, or several hosts with shm inside
  // each). None = not a host-memory communicator (GPU buffers anywhere).
  enum class HostLinks : uint8_t { None, Shm, Network };
  // Shm: all-gather and reduce-scatter take host_blocks() of the rule's
  // choice (measured there; across a network the rule's rhd took less time
  // than direct up to 4 KiB: 0.5-0.85x, docs/performance.md, "Session 58").
  // Network: small all-reduces take recursive doubling (network_doubling).
  // Shm with a core per rank: small gathers and scatters at 8+ ranks take
  // the tree (shm_rooted_tree).
  void set_host_links(HostLinks v) { host_links_ = v; }
  // all-gather / reduce-scatter of host memory: direct for small messages
  // at 3-8 ranks, else `rule` (the automatic rule's choice).
  static Algo host_blocks(Coll c, int nranks, size_t bytes, Algo rule);
  // Whether an all-reduce of `bytes` of host memory across a network takes
  // recursive doubling of the whole vector.
  static bool network_doubling(int nranks, size_t bytes);
  // Whether an all-reduce of `bytes` of host memory over shm takes
  // recursive doubling (oversubscribed: more ranks than cores on the host).
  static bool shm_doubling(int nranks, size_t bytes, bool oversubscribed);
  // Whether a gather or scatter of `bytes` (the root's whole buffer) of host
  // memory over shm takes the tree rather than direct.
  static bool shm_rooted_tree(int nranks, size_t bytes, bool oversubscribed);
  // Whether a host all-to-all of `block_bytes` per rank block runs in one
  // step (CollArgs::one_step) rather than pairwise.
  bool alltoall_one_step(int nranks, size_t block_bytes) const;
  // Ranks span this many hosts (1 = one host). With several hosts the
  // automatic rule moves tree-shaped choices (and mid-size all-reduce) to
  // hier; with one host it is exactly the single-host rule.
  void set_hosts(int hosts) { hosts_ = hosts; }
  // The automatic rule for a communicator of nranks over `hosts` hosts.
  static Algo auto_choice_hosts(Coll c, int nranks, int hosts, size_t bytes);
  // GPU communicators whose peers are all on cuda_ipc do not use the
  // automatic rule: the device engine's selection table has its own
  // (device_auto_algo, lib/engine/device_select.h), next to the kernels it
  // chooses for.
  // Whether MYCOLL_ALGO names the algorithm of collective c (an entry for c,
  // or a global family that serves c), i.e. choose() does not use the rule.
  bool forced(Coll c) const;

 private:
  Algo auto_rule(Coll c, int nranks, size_t bytes) const;
  int forced_[kNumColls] = {-1, -1, -1, -1, -1, -1, -1, -1, -1};
  int global_ = -1;
  bool oversubscribed_ = false;
  HostLinks host_links_ = HostLinks::None;
  int hosts_ = 1;
};

}  // namespace mycoll
