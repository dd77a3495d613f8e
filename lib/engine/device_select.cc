#include "engine/device_select.h"

#include <algorithm>

namespace mycoll {

const char* dev_kernel_name(DevKernel k) {
  switch (k) {
    case DevKernel::Plan: return "plan";
    case DevKernel::Ring: return "ring";
    case DevKernel::LlColl: return "ll_coll";
    case DevKernel::Direct: return "direct";
    case DevKernel::P2pLl: return "p2p_ll";
  }
  return "?";
}

namespace {

// Whether the fused ring kernel takes a ring call of `whole` bytes.
bool ring_kernel_size(const DevLimits& l, uint64_t whole) {
  const uint64_t from = ring_kernel_from(Coll::AllReduce, l);
  return from > 0 && whole >= from;
}

bool ring_row(const DevCall& c, const DevLimits& l, uint64_t whole) {
  const uint64_t from = ring_kernel_from(c.coll, l);
  return c.algo == Algo::Ring && from > 0 && whole >= from;
}

// A reduce sender writes the whole buffer to the root, which fits the
// root's LL buffer by the same test.
bool ll_coll_row(const DevCall& c, const DevLimits& l, uint64_t whole) {
  if (l.ll_coll_bytes == 0 || whole > l.ll_coll_bytes) return false;
  switch (c.coll) {
    case Coll::AllGather:
    case Coll::ReduceScatter:
    case Coll::AllToAll: return c.algo == Algo::Direct;
    // Broadcast and reduce: the flat tree (direct schedule) runs unless
    // MYCOLL_ALGO forces another algorithm's plan.
    case Coll::Broadcast:
      return whole <= l.ll_bcast_bytes && (!c.algo_forced || c.algo == Algo::Direct);
    case Coll::Reduce:
      return whole <= l.ll_reduce_bytes && (!c.algo_forced || c.algo == Algo::Direct);
    default: return false;
  }
}

bool direct_row(const DevCall& c, const DevLimits& l, uint64_t whole) {
  if (l.any_proxy || c.algo != Algo::Direct || l.direct_bytes == 0) return false;
  if (c.coll != Coll::AllToAll && c.coll != Coll::Scatter && c.coll != Coll::Gather) return false;
  return whole >= l.direct_bytes && c.direct_channels > 0;
}

}  // namespace

// Broadcast and reduce (the chain) take the fused ring kernel also
// wherever the LL kernel's flat tree stops: between the two the plan
// kernel's pipelined chain took twice as long at 512 KiB on four H200s
// (docs/performance.md, "Session 25").
uint64_t ring_kernel_from(Coll c, const DevLimits& l) {
  if (l.any_proxy || l.ring_bytes == 0) return 0;
  switch (c) {
    case Coll::AllReduce:
    case Coll::AllGather:
    case Coll::ReduceScatter: return l.ring_bytes;
    case Coll::Broadcast: return std::min(l.ring_bytes, l.ll_bcast_bytes + 1);
    case Coll::Reduce: return std::min(l.ring_bytes, l.ll_reduce_bytes + 1);
    default: return 0;
  }
}

bool p2p_ll_takes(const P2pShape& s, const DevLimits& l) {
  return l.p2p_ll_slice_bytes > 0 && s.ll_peers && s.slices > 0 &&
         s.max_slice <= l.p2p_ll_slice_bytes && s.max_msg <= UINT32_MAX &&
         s.keys <= l.p2p_ll_keys && s.slices <= l.p2p_ll_slices && s.max_key_slices <= 255;
}

DevChoice select_device_kernel(const DevCall& c, const DevLimits& l) {
  DevChoice r;
  if (c.coll == Coll::SendRecv) {
    r.schedule = "per message";
    if (p2p_ll_takes(c.p2p, l)) return DevChoice{DevKernel::P2pLl, "per message", "ll"};
    return r;
  }
  if (l.nranks < 2 || c.block_bytes == 0) return r;
  const uint64_t whole = coll_whole_count(c.coll, c.block_bytes, l.nranks);
  if (ring_row(c, l, whole)) {
    const bool chain = c.coll == Coll::Broadcast || c.coll == Coll::Reduce;
    return DevChoice{DevKernel::Ring, chain ? "chain" : "ring", "simple"};
  }
  if (ll_coll_row(c, l, whole)) {
    const bool flat = c.coll == Coll::Broadcast || c.coll == Coll::Reduce;
    return DevChoice{DevKernel::LlColl, flat ? "flat tree" : "direct", "ll"};
  }
  if (direct_row(c, l, whole)) return DevChoice{DevKernel::Direct, "direct", "simple"};
  if (c.coll == Coll::AllReduce && c.algo == Algo::Direct && c.block_bytes <= l.oneshot_bytes)
    return DevChoice{DevKernel::LlColl, "direct", "ll"};
  if (c.coll == Coll::AllReduce && c.algo == Algo::TwoShot && c.block_bytes <= l.twoshot_bytes)
    return DevChoice{DevKernel::LlColl, "rs+ag", "ll", true};
  r.schedule = algo_name(c.algo);
  return r;
}

Algo device_auto_algo(Coll c, uint64_t whole, const DevLimits& l) {
  const int n = l.nranks;
  constexpr uint64_t MiB = uint64_t(1) << 20;
  // The rules below that prefer the ring hold for the fused ring kernel,
  // not the plan's ring.
  const bool ring_kernel = ring_kernel_size(l, whole);
  switch (c) {
    case Coll::AllReduce:
      if (n >= 2 && n <= 8 && whole <= l.oneshot_bytes) return Algo::Direct;
      if (n >= 2 && whole <= l.twoshot_bytes) return Algo::TwoShot;
      if (n <= 8 && whole * uint64_t(n > 1 ? n - 1 : 0) <= MiB) return Algo::Direct;
      // Up to 4 ranks the fused ring kernel is ahead of rhd above 4 MiB
      // (docs/performance.md, "Session 20").
      if (n > 2 && whole <= (n > 4 || !ring_kernel ? 8 : 4) * MiB) return Algo::Rhd;
      return Algo::Ring;
    case Coll::AllGather:
    case Coll::ReduceScatter:
      // Two ranks: the fused ring kernel is ahead of the LL kernel from
      // 2 MiB (docs/performance.md, "Session 41"; at 1 MiB the LL kernel
      // leads by 3-4 us); up to 4 ranks it is ahead of rhd's plan wherever
      // the LL kernel stops ("Session 20").
      if (n >= 2 && whole > 0 && whole <= l.ll_coll_bytes &&
          (n > 2 || whole < 2 * MiB || !ring_kernel))
        return Algo::Direct;
      if (n > 2 && whole <= 4 * MiB && (n > 4 || !ring_kernel)) return Algo::Rhd;
      return Algo::Ring;
    default: return AlgoPolicy::auto_choice(c, n, whole);
  }
}

Algo device_algo(const AlgoPolicy& policy, Coll c, uint64_t whole, const DevLimits& l) {
  if (policy.forced(c) || l.any_proxy) return policy.choose(c, l.nranks, whole);
  return device_auto_algo(c, whole, l);
}

std::string describe(const DevChoice& c) {
  return std::string(dev_kernel_name(c.kernel)) + " kernel (" + c.schedule + " schedule, " +
         c.proto + " protocol)";
}

}  // namespace mycoll
