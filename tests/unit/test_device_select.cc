// The device engine's selection table (lib/engine/device_select.h): which
// kernel serves a call, checked row by row against the conditions written
// out independently here, over every collective x algorithm x size around
// every limit x rank count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/error.h"
#include "engine/device_select.h"

namespace mycoll {
namespace {

DevLimits defaults(int n) {
  DevLimits l;
  l.nranks = n;
  l.ring_bytes = 1 << 20;
  l.direct_bytes = 1 << 20;
  l.oneshot_bytes = 64 << 10;
  l.twoshot_bytes = 4 << 20;
  l.ll_coll_bytes = 2 << 20;
  l.ll_bcast_bytes = 256 << 10;
  l.ll_reduce_bytes = 256 << 10;
  return l;
}

DevCall call(Coll c, Algo a, uint64_t block, bool forced = false, int direct_ch = 4) {
  DevCall d;
  d.coll = c;
  d.algo = a;
  d.block_bytes = block;
  d.algo_forced = forced;
  d.direct_channels = direct_ch;
  return d;
}

// The table of device_select.h, written again as plain conditions.
// (kernel, whether the LL kernel runs the two-shot all-reduce)
struct Want {
  DevKernel kernel;
  bool two_shot = false;
  Want(DevKernel k, bool ts = false) : kernel(k), two_shot(ts) {}
};
Want expected(const DevCall& c, const DevLimits& l) {
  if (l.nranks < 2 || c.block_bytes == 0 || c.coll == Coll::SendRecv) return DevKernel::Plan;
  const bool blocked = c.coll == Coll::AllGather || c.coll == Coll::ReduceScatter ||
                       c.coll == Coll::AllToAll || c.coll == Coll::Scatter ||
                       c.coll == Coll::Gather;
  const uint64_t whole = blocked ? c.block_bytes * l.nranks : c.block_bytes;
  const bool ring_coll = c.coll == Coll::AllReduce || c.coll == Coll::AllGather ||
                         c.coll == Coll::ReduceScatter || c.coll == Coll::Broadcast ||
                         c.coll == Coll::Reduce;
  if (!l.any_proxy && c.algo == Algo::Ring && l.ring_bytes && ring_coll && whole >= l.ring_bytes)
    return DevKernel::Ring;
  // The chains also where the LL kernel stops.
  if (!l.any_proxy && c.algo == Algo::Ring && l.ring_bytes &&
      ((c.coll == Coll::Broadcast && whole > l.ll_bcast_bytes) ||
       (c.coll == Coll::Reduce && whole > l.ll_reduce_bytes)))
    return DevKernel::Ring;
  if (l.ll_coll_bytes && whole <= l.ll_coll_bytes) {
    if ((c.coll == Coll::AllGather || c.coll == Coll::ReduceScatter || c.coll == Coll::AllToAll) &&
        c.algo == Algo::Direct)
      return DevKernel::LlColl;
    if (c.coll == Coll::Broadcast && whole <= l.ll_bcast_bytes &&
        (!c.algo_forced || c.algo == Algo::Direct))
      return DevKernel::LlColl;
    if (c.coll == Coll::Reduce && whole <= l.ll_reduce_bytes &&
        (!c.algo_forced || c.algo == Algo::Direct))
      return DevKernel::LlColl;
  }
  if (!l.any_proxy && c.algo == Algo::Direct && l.direct_bytes &&
      (c.coll == Coll::AllToAll || c.coll == Coll::Scatter || c.coll == Coll::Gather) &&
      whole >= l.direct_bytes && c.direct_channels > 0)
    return DevKernel::Direct;
  if (c.coll == Coll::AllReduce && c.algo == Algo::Direct && c.block_bytes <= l.oneshot_bytes)
    return DevKernel::LlColl;
  if (c.coll == Coll::AllReduce && c.algo == Algo::TwoShot && c.block_bytes <= l.twoshot_bytes)
    return Want(DevKernel::LlColl, true);
  return DevKernel::Plan;
}

TEST(DeviceSelect, EveryCallMatchesTheTable) {
  const std::vector<uint64_t> sizes = {0,
                                       1,
                                       8,
                                       7777,
                                       (64 << 10) - 1,
                                       64 << 10,
                                       (64 << 10) + 1,
                                       256 << 10,
                                       (256 << 10) + 1,
                                       512 << 10,
                                       (1 << 20) - 1,
                                       1 << 20,
                                       (2 << 20) + 3,
                                       4 << 20,
                                       (4 << 20) + 1,
                                       1ull << 30};
  int checked = 0;
  for (int n : {1, 2, 3, 4, 5, 8}) {
    for (bool proxy : {false, true}) {
      DevLimits l = defaults(n);
      l.any_proxy = proxy;
      for (int ci = 0; ci < kNumColls; ++ci)
        for (int ai = 0; ai < kNumAlgos; ++ai)
          for (uint64_t b : sizes)
            for (bool forced : {false, true})
              for (int dch : {0, 3}) {
                const DevCall c = call(Coll(ci), Algo(ai), b, forced, dch);
                const DevChoice k = select_device_kernel(c, l);
                const Want w = expected(c, l);
                ASSERT_TRUE(k.kernel == w.kernel && k.two_shot == w.two_shot)
                    << coll_name(c.coll) << " " << algo_name(c.algo) << " " << b << " bytes, " << n
                    << " ranks, proxy " << proxy << ", forced " << forced << ", direct channels "
                    << dch << ": got " << describe(k) << (k.two_shot ? " (two shots)" : "");
                ++checked;
              }
    }
  }
  EXPECT_GT(checked, 10000);
}

// The ring row's threshold as the setup log reports it: ring_bytes, and
// for the chains where the LL kernel stops; never behind the proxy or off.
TEST(DeviceSelect, RingKernelThresholds) {
  DevLimits l = defaults(4);
  EXPECT_EQ(ring_kernel_from(Coll::AllGather, l), 1u << 20);
  EXPECT_EQ(ring_kernel_from(Coll::Broadcast, l), (256u << 10) + 1);
  EXPECT_EQ(ring_kernel_from(Coll::Reduce, l), (256u << 10) + 1);
  EXPECT_EQ(ring_kernel_from(Coll::AllToAll, l), 0u);
  l.ring_bytes = 128 << 10;
  EXPECT_EQ(ring_kernel_from(Coll::Broadcast, l), 128u << 10);
  l.any_proxy = true;
  EXPECT_EQ(ring_kernel_from(Coll::AllReduce, l), 0u);
  l.any_proxy = false;
  l.ring_bytes = 0;
  EXPECT_EQ(ring_kernel_from(Coll::Reduce, l), 0u);
}

TEST(DeviceSelect, NamesScheduleAndProtocol) {
  const DevLimits l = defaults(4);
  EXPECT_EQ(describe(select_device_kernel(call(Coll::AllReduce, Algo::Ring, 1 << 24), l)),
            "ring kernel (ring schedule, simple protocol)");
  EXPECT_EQ(describe(select_device_kernel(call(Coll::Broadcast, Algo::Ring, 1 << 24), l)),
            "ring kernel (chain schedule, simple protocol)");
  EXPECT_EQ(describe(select_device_kernel(call(Coll::Broadcast, Algo::Tree, 4096), l)),
            "ll_coll kernel (flat tree schedule, ll protocol)");
  EXPECT_EQ(describe(select_device_kernel(call(Coll::AllGather, Algo::Direct, 4096), l)),
            "ll_coll kernel (direct schedule, ll protocol)");
  EXPECT_EQ(describe(select_device_kernel(call(Coll::AllToAll, Algo::Direct, 1 << 20), l)),
            "direct kernel (direct schedule, simple protocol)");
  EXPECT_EQ(describe(select_device_kernel(call(Coll::AllReduce, Algo::Direct, 8), l)),
            "ll_coll kernel (direct schedule, ll protocol)");
  EXPECT_EQ(describe(select_device_kernel(call(Coll::AllReduce, Algo::TwoShot, 1 << 20), l)),
            "ll_coll kernel (rs+ag schedule, ll protocol)");
  EXPECT_EQ(describe(select_device_kernel(call(Coll::AllReduce, Algo::Tree, 1 << 20), l)),
            "plan kernel (tree schedule, per message protocol)");
}

// The point-to-point row, written out again: the LL point-to-point kernel
// takes a batch whose every peer is on cuda_ipc, with at least one slice,
// every slice within the limit (0: off), every message's size within 32
// bits, and keys, slices and slices per key within the kernel's capacity;
// the plan kernel takes every other batch. Collectives never get it, and a
// batch never gets a collective kernel.
TEST(DeviceSelect, PointToPointRow) {
  const uint64_t slice_limits[] = {0, 1, 4096, 65536};
  const uint64_t slice_sizes[] = {0, 1, 4095, 4096, 4097, 65536, 65537};
  const uint64_t msg_sizes[] = {1, 65536, UINT32_MAX, uint64_t(UINT32_MAX) + 1};
  const int counts[] = {0, 1, 63, 64, 65, 127, 128, 129};
  const int per_key[] = {1, 255, 256};
  int served = 0, cases = 0;
  for (uint64_t lim_slice : slice_limits)
    for (bool ll : {false, true})
      for (uint64_t slice : slice_sizes)
        for (uint64_t msg : msg_sizes)
          for (int keys : counts)
            for (int slices : counts)
              for (int pk : per_key) {
                DevLimits l = defaults(3);
                l.p2p_ll_slice_bytes = lim_slice;
                l.p2p_ll_keys = 64;
                l.p2p_ll_slices = 128;
                DevCall c = call(Coll::SendRecv, Algo::Ring, msg);
                c.p2p = P2pShape{ll, slice, msg, keys, slices, pk};
                const bool want = lim_slice != 0 && ll && slices >= 1 && slice <= lim_slice &&
                                  msg < (uint64_t(1) << 32) && keys <= 64 && slices <= 128 &&
                                  pk < 256;
                const DevChoice k = select_device_kernel(c, l);
                ++cases;
                served += want;
                ASSERT_EQ(k.kernel, want ? DevKernel::P2pLl : DevKernel::Plan)
                    << "limit " << lim_slice << " ll " << ll << " slice " << slice << " msg " << msg
                    << " keys " << keys << " slices " << slices << " per key " << pk;
                ASSERT_EQ(p2p_ll_takes(c.p2p, l), want);
                ASSERT_EQ(describe(k), want ? "p2p_ll kernel (per message schedule, ll protocol)"
                                            : "plan kernel (per message schedule, per message "
                                              "protocol)");
              }
  EXPECT_GT(served, 100);
  EXPECT_EQ(cases, 4 * 2 * 7 * 4 * 8 * 8 * 3);
  // A collective whose call carries a shape that would fit is no batch.
  DevLimits l = defaults(4);
  l.p2p_ll_slice_bytes = 65536;
  l.p2p_ll_keys = 64;
  l.p2p_ll_slices = 128;
  for (Coll co : {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::Broadcast,
                  Coll::Reduce, Coll::AllToAll, Coll::Scatter, Coll::Gather}) {
    DevCall c = call(co, Algo::Direct, 64);
    c.p2p = P2pShape{true, 64, 64, 1, 1, 1};
    EXPECT_NE(select_device_kernel(c, l).kernel, DevKernel::P2pLl) << coll_name(co);
  }
}

// MYCOLL_PROTO rewrites the rows' limits at config time.
TEST(DeviceSelect, ProtoTurnsRowsOff) {
  unsetenv("MYCOLL_PROTO");
  const Config d = Config::from_env();
  EXPECT_GT(d.gpu_oneshot_bytes, 0u);
  EXPECT_GT(d.gpu_ll_bytes, 0u);
  EXPECT_GT(d.gpu_ring_bytes, 0u);
  setenv("MYCOLL_PROTO", "auto", 1);
  const Config a = Config::from_env();
  EXPECT_EQ(a.gpu_oneshot_bytes, d.gpu_oneshot_bytes);
  EXPECT_EQ(a.gpu_ring_bytes, d.gpu_ring_bytes);
  setenv("MYCOLL_PROTO", "simple", 1);
  Config s = Config::from_env();
  EXPECT_EQ(s.gpu_oneshot_bytes, 0u);
  EXPECT_EQ(s.gpu_twoshot_bytes, 0u);
  EXPECT_EQ(s.gpu_ll_coll_bytes, 0u);
  EXPECT_EQ(s.gpu_ll_bytes, 0u);
  EXPECT_GT(s.gpu_ring_bytes, 0u);
  setenv("MYCOLL_PROTO", "LL", 1);
  Config l = Config::from_env();
  EXPECT_EQ(l.gpu_ring_bytes, 0u);
  EXPECT_EQ(l.gpu_direct_bytes, 0u);
  EXPECT_GT(l.gpu_oneshot_bytes, 0u);
  setenv("MYCOLL_PROTO", "fast", 1);
  try {
    Config::from_env();
    ADD_FAILURE() << "MYCOLL_PROTO=fast accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), mycollInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("MYCOLL_PROTO"), std::string::npos) << e.what();
  }
  unsetenv("MYCOLL_PROTO");
}

// ---------------------------------------------------------------------------
// The automatic algorithm of GPU communicators (device_auto_algo /
// device_algo): what the table's kernels need chosen for them.

constexpr uint64_t KiB = 1024, MiB = 1024 * KiB;

DevLimits kernels(int n, uint64_t oneshot, uint64_t twoshot, uint64_t ll_coll) {
  DevLimits l;
  l.nranks = n;
  l.oneshot_bytes = oneshot;
  l.twoshot_bytes = twoshot;
  l.ll_coll_bytes = ll_coll;
  l.ring_bytes = 1 << 20;  // the fused ring kernel from 1 MiB, as by default
  return l;
}

Algo chosen(const char* spec, Coll c, uint64_t bytes, const DevLimits& l) {
  return device_algo(AlgoPolicy::parse(spec), c, bytes, l);
}

// All-gather and reduce-scatter that fit the LL-collective kernel (whole
// message <= the limit) are direct (the kernel runs only for direct); larger
// ones keep rhd / ring; without the kernel (limit 0) nothing changes.
// All-to-all is direct whatever the size and whatever is forced (its only
// algorithm). Broadcast and reduce keep the host rule (the table runs the
// kernel when they are not forced).
TEST(DeviceAlgo, LlCollSizesAreDirect) {
  const uint64_t lim = 256 * KiB;
  for (Coll c : {Coll::AllGather, Coll::ReduceScatter})
    for (int n : {2, 3, 4, 8}) {
      const DevLimits l = kernels(n, 0, 0, lim);
      for (uint64_t bytes : {uint64_t(8), uint64_t(4096), lim})
        EXPECT_EQ(chosen("", c, bytes, l), Algo::Direct)
            << coll_name(c) << " " << n << " " << bytes;
      // Above the kernel: rhd (n > 2) up to 4 MiB, but at 3-4 ranks only
      // below the fused ring kernel's 1 MiB; then the ring.
      const Algo small = n > 2 ? Algo::Rhd : Algo::Ring;
      const Algo big = n > 4 ? Algo::Rhd : Algo::Ring;
      EXPECT_EQ(chosen("", c, lim + 8, l), small) << n;
      EXPECT_EQ(chosen("", c, 0, l), small) << n;
      EXPECT_EQ(device_auto_algo(c, 4096, kernels(n, 0, 0, 0)), small);
      EXPECT_EQ(chosen("", c, MiB, l), big) << n;
      EXPECT_EQ(chosen("", c, 4 * MiB, l), big) << n;
      EXPECT_EQ(chosen("", c, 4 * MiB + 8, l), Algo::Ring) << n;
      // Without the fused ring kernel rhd keeps its 4 MiB at every n > 2.
      DevLimits off = l;
      off.ring_bytes = 0;
      EXPECT_EQ(chosen("", c, 4 * MiB, off), small) << n;
    }
  // The default 2 MiB limit: two ranks leave the kernel from 2 MiB (the
  // ring kernel is faster there), whatever the limit; more ranks use all
  // of it.
  for (Coll c : {Coll::AllGather, Coll::ReduceScatter}) {
    EXPECT_EQ(chosen("", c, MiB, kernels(2, 0, 0, 2 * MiB)), Algo::Direct);
    EXPECT_EQ(chosen("", c, 2 * MiB - 8, kernels(2, 0, 0, 2 * MiB)), Algo::Direct);
    EXPECT_EQ(chosen("", c, 2 * MiB, kernels(2, 0, 0, 2 * MiB)), Algo::Ring);
    EXPECT_EQ(chosen("", c, 2 * MiB + 8, kernels(2, 0, 0, 2 * MiB)), Algo::Ring);
    EXPECT_EQ(chosen("", c, 2 * MiB + 8, kernels(2, 0, 0, 8 * MiB)), Algo::Ring);
    EXPECT_EQ(chosen("", c, 4 * MiB, kernels(3, 0, 0, 8 * MiB)), Algo::Direct);
    EXPECT_EQ(chosen("direct", c, 2 * MiB, kernels(2, 0, 0, 2 * MiB)), Algo::Direct);
    DevLimits no_ring = kernels(2, 0, 0, 2 * MiB);
    no_ring.ring_bytes = 0;  // without the ring kernel the LL kernel keeps its limit
    EXPECT_EQ(chosen("", c, 2 * MiB, no_ring), Algo::Direct);
    for (int n : {3, 4, 8})
      EXPECT_EQ(chosen("", c, 2 * MiB, kernels(n, 0, 0, 2 * MiB)), Algo::Direct) << n;
  }
  const DevLimits l4 = kernels(4, 0, 0, lim);
  EXPECT_EQ(chosen("", Coll::Broadcast, 4096, l4),
            AlgoPolicy::auto_choice(Coll::Broadcast, 4, 4096));
  EXPECT_EQ(chosen("", Coll::Reduce, 4096, l4), AlgoPolicy::auto_choice(Coll::Reduce, 4, 4096));
  for (int n : {2, 3, 4, 8})
    for (uint64_t bytes : {uint64_t(8), lim, lim + 8}) {
      EXPECT_EQ(chosen("", Coll::AllToAll, bytes, kernels(n, 0, 0, lim)), Algo::Direct);
      for (const char* spec : {"ring", "tree", "direct", "alltoall:direct"})
        EXPECT_EQ(chosen(spec, Coll::AllToAll, bytes, kernels(n, 0, 0, lim)), Algo::Direct) << spec;
    }
  // Peers behind the GPU proxy: the host rule.
  DevLimits proxied = l4;
  proxied.any_proxy = true;
  EXPECT_EQ(chosen("", Coll::AllGather, 4096, proxied), Algo::Rhd);
  // Forced algorithms win; "<coll>:auto" is the rule.
  EXPECT_EQ(chosen("ring", Coll::AllGather, 1024, l4), Algo::Ring);
  EXPECT_EQ(chosen("ring", Coll::ReduceScatter, 1024, l4), Algo::Ring);
  EXPECT_EQ(chosen("ring,allgather:auto", Coll::AllGather, 1024, l4), Algo::Direct);
}

// All-reduce that fits the one-shot schedule is direct (the LL kernel runs it only
// for direct), even past the 1 MiB-of-copies bound; n > 8 never.
TEST(DeviceAlgo, OneShotSizesAreDirect) {
  for (int n : {2, 3, 4, 8}) {
    const DevLimits l = kernels(n, MiB, 0, 0);
    for (uint64_t bytes : {uint64_t(8), 64 * KiB, MiB})
      EXPECT_EQ(chosen("", Coll::AllReduce, bytes, l), Algo::Direct) << n << " " << bytes;
  }
  EXPECT_NE(chosen("", Coll::AllReduce, MiB + 8, kernels(8, MiB, 0, 0)), Algo::Direct);
  EXPECT_NE(chosen("", Coll::AllReduce, 8192, kernels(16, MiB, 0, 0)), Algo::Direct);
  // Default 64 KiB: the 1 MiB-of-copies bound already gives those sizes direct.
  for (int n : {2, 4, 8})
    EXPECT_EQ(device_auto_algo(Coll::AllReduce, 64 * KiB, kernels(n, 64 * KiB, 0, 0)),
              Algo::Direct);
  EXPECT_EQ(device_auto_algo(Coll::AllReduce, 64 * KiB, kernels(4, 0, 0, 0)), Algo::Direct);
  EXPECT_EQ(chosen("ring", Coll::AllReduce, 1024, kernels(4, 64 * KiB, 0, 0)), Algo::Ring);
}

// All-reduce above the one-shot size that fits the two-shot schedule
// is twoshot (the kernel runs only for twoshot), for any n >= 2; larger sizes
// keep rhd up to 8 MiB beyond 4 ranks (4 MiB at 3-4), then the ring (the
// fused ring kernel).
TEST(DeviceAlgo, TwoShotSizesAreTwoShot) {
  for (int n : {2, 3, 4, 8, 16}) {
    const DevLimits l = kernels(n, 64 * KiB, 4 * MiB, 0);
    for (uint64_t bytes : {64 * KiB + 8, 128 * KiB, MiB, 4 * MiB})
      EXPECT_EQ(chosen("", Coll::AllReduce, bytes, l), Algo::TwoShot) << n << " " << bytes;
    EXPECT_NE(chosen("", Coll::AllReduce, 4 * MiB + 8, l), Algo::TwoShot) << n;
    EXPECT_EQ(chosen("", Coll::AllReduce, 64 * MiB, l), Algo::Ring) << n;
  }
  const DevLimits l4 = kernels(4, 64 * KiB, 4 * MiB, 0);
  for (int n : {2, 4, 8})
    EXPECT_EQ(chosen("", Coll::AllReduce, 1024, kernels(n, 64 * KiB, 4 * MiB, 0)), Algo::Direct);
  // Above the two-shot size: the ring up to 4 ranks, rhd up to 8 MiB beyond.
  EXPECT_EQ(chosen("", Coll::AllReduce, 8 * MiB, l4), Algo::Ring);
  EXPECT_EQ(chosen("", Coll::AllReduce, 8 * MiB, kernels(3, 64 * KiB, 4 * MiB, 0)), Algo::Ring);
  EXPECT_EQ(chosen("", Coll::AllReduce, 8 * MiB, kernels(8, 64 * KiB, 4 * MiB, 0)), Algo::Rhd);
  EXPECT_EQ(chosen("", Coll::AllReduce, 8 * MiB + 4, kernels(8, 64 * KiB, 4 * MiB, 0)), Algo::Ring);
  EXPECT_EQ(chosen("", Coll::AllReduce, 1024, kernels(16, 64 * KiB, 4 * MiB, 0)), Algo::TwoShot);
  EXPECT_EQ(chosen("", Coll::AllGather, MiB, l4), Algo::Ring);
  EXPECT_EQ(chosen("", Coll::AllGather, MiB, kernels(8, 64 * KiB, 4 * MiB, 0)), Algo::Rhd);
  // Two-shot off: direct while (n-1) x bytes <= 1 MiB, then rhd.
  EXPECT_EQ(device_auto_algo(Coll::AllReduce, 128 * KiB, kernels(4, 64 * KiB, 0, 0)), Algo::Direct);
  EXPECT_EQ(device_auto_algo(Coll::AllReduce, MiB, kernels(4, 64 * KiB, 0, 0)), Algo::Rhd);
  EXPECT_EQ(device_auto_algo(Coll::AllReduce, 4 * MiB, kernels(4, 64 * KiB, 0, 0)), Algo::Rhd);
  EXPECT_EQ(device_auto_algo(Coll::AllReduce, 4 * MiB + 4, kernels(4, 64 * KiB, 0, 0)), Algo::Ring);
  DevLimits no_ring = kernels(4, 64 * KiB, 0, 0);
  no_ring.ring_bytes = 0;  // the plan's ring: rhd keeps its 8 MiB
  EXPECT_EQ(device_auto_algo(Coll::AllReduce, 8 * MiB, no_ring), Algo::Rhd);
  // One-shot off: small all-reduce goes to the two-shot schedule.
  EXPECT_EQ(device_auto_algo(Coll::AllReduce, 8, kernels(4, 0, 4 * MiB, 0)), Algo::TwoShot);
  EXPECT_EQ(device_auto_algo(Coll::AllReduce, 16 * MiB, kernels(8, 64 * KiB, 4 * MiB, 0)),
            Algo::Ring);
  EXPECT_EQ(chosen("allreduce:rhd", Coll::AllReduce, MiB, l4), Algo::Rhd);
}

// Every automatic choice is one the table can run: the algorithm serves the
// collective, and the small sizes the rule gives the kernels land on them.
TEST(DeviceAlgo, TheRuleFeedsTheTable) {
  for (int n : {2, 3, 4, 8})
    for (int ci = 0; ci < kNumColls; ++ci)
      for (uint64_t block : {uint64_t(8), 4 * KiB, 64 * KiB, MiB, 16 * MiB}) {
        const DevLimits l = defaults(n);
        const Coll c = Coll(ci);
        if (c == Coll::SendRecv) continue;  // batches, not in the rule
        const uint64_t whole = coll_whole_count(c, block, n);
        const Algo a = device_algo(AlgoPolicy::parse(""), c, whole, l);
        EXPECT_TRUE(algo_supports(a, c)) << coll_name(c) << " " << algo_name(a);
        if (c == Coll::AllReduce && whole <= l.oneshot_bytes)
          EXPECT_EQ(select_device_kernel(call(c, a, block), l).kernel, DevKernel::LlColl);
        if (c == Coll::AllReduce && whole > l.oneshot_bytes && whole <= l.twoshot_bytes) {
          const DevChoice k = select_device_kernel(call(c, a, block), l);
          EXPECT_EQ(k.kernel, DevKernel::LlColl);
          EXPECT_TRUE(k.two_shot);
        }
        // Two ranks leave the LL kernel from 2 MiB for the ring kernel.
        const uint64_t ll_most =
            n == 2 ? std::min<uint64_t>(l.ll_coll_bytes, 2 * MiB - 1) : l.ll_coll_bytes;
        if ((c == Coll::AllGather || c == Coll::ReduceScatter) && whole <= ll_most)
          EXPECT_EQ(select_device_kernel(call(c, a, block), l).kernel, DevKernel::LlColl);
        if ((c == Coll::AllGather || c == Coll::ReduceScatter) && whole > ll_most && n <= 4)
          EXPECT_EQ(select_device_kernel(call(c, a, block), l).kernel, DevKernel::Ring);
        if ((c == Coll::AllReduce || c == Coll::AllGather) && whole >= 16 * MiB)
          EXPECT_EQ(select_device_kernel(call(c, a, block), l).kernel, DevKernel::Ring);
      }
}

}  // namespace
}  // namespace mycoll
