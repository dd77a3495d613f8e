// The device engine's selection table (lib/engine/device_select.h): which
// kernel serves a call, checked row by row against the conditions written
// out independently here, over every collective x algorithm x size around
// every limit x rank count.
#include <gtest/gtest.h>

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
DevKernel expected(const DevCall& c, const DevLimits& l) {
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
  if (l.ll_coll_bytes && whole <= l.ll_coll_bytes) {
    if ((c.coll == Coll::AllGather || c.coll == Coll::ReduceScatter || c.coll == Coll::AllToAll) &&
        c.algo == Algo::Direct)
      return DevKernel::LlColl;
    if (c.coll == Coll::Broadcast && whole <= l.ll_bcast_bytes && !c.algo_forced)
      return DevKernel::LlColl;
    if (c.coll == Coll::Reduce && whole <= l.ll_reduce_bytes && !c.algo_forced)
      return DevKernel::LlColl;
  }
  if (!l.any_proxy && c.algo == Algo::Direct && l.direct_bytes &&
      (c.coll == Coll::AllToAll || c.coll == Coll::Scatter || c.coll == Coll::Gather) &&
      whole >= l.direct_bytes && c.direct_channels > 0)
    return DevKernel::Direct;
  if (c.coll == Coll::AllReduce && c.algo == Algo::Direct && c.block_bytes <= l.oneshot_bytes)
    return DevKernel::OneShot;
  if (c.coll == Coll::AllReduce && c.algo == Algo::TwoShot && c.block_bytes <= l.twoshot_bytes)
    return DevKernel::TwoShot;
  return DevKernel::Plan;
}

TEST(DeviceSelect, EveryCallMatchesTheTable) {
  const std::vector<uint64_t> sizes = {0,       1,         8,         7777,      (64 << 10) - 1,
                                       64 << 10, (64 << 10) + 1, 256 << 10, (256 << 10) + 1,
                                       (1 << 20) - 1, 1 << 20, (2 << 20) + 3, 4 << 20,
                                       (4 << 20) + 1, 1ull << 30};
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
                ASSERT_EQ(k.kernel, expected(c, l))
                    << coll_name(c.coll) << " " << algo_name(c.algo) << " " << b << " bytes, "
                    << n << " ranks, proxy " << proxy << ", forced " << forced
                    << ", direct channels " << dch << ": got " << describe(k);
                ++checked;
              }
    }
  }
  EXPECT_GT(checked, 10000);
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
            "oneshot kernel (direct schedule, ll protocol)");
  EXPECT_EQ(describe(select_device_kernel(call(Coll::AllReduce, Algo::TwoShot, 1 << 20), l)),
            "twoshot kernel (rs+ag schedule, ll protocol)");
  EXPECT_EQ(describe(select_device_kernel(call(Coll::AllReduce, Algo::Tree, 1 << 20), l)),
            "plan kernel (tree schedule, per message protocol)");
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

}  // namespace
}  // namespace mycoll
