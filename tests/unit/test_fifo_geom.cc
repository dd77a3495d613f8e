// FifoGeom (kernels/device_plan.h): the regions of a GPU inbox do not
// overlap; the one-shot all-reduce region follows the FIFOs, sized by
// os_bytes (none when 0), and the LL-collective region sits at the end,
// sized by lc_bytes (none when 0).
#include <gtest/gtest.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "kernels/device_plan.h"

using namespace mycoll;

namespace {

FifoGeom geom(int nranks, int32_t os_bytes) {
  FifoGeom g{};
  g.nranks = nranks;
  g.max_channels = 3;
  g.nslots = 4;
  g.ll_slots = 8;
  g.slot_bytes = 1024;
  g.ll_slot_bytes = 16384;
  g.os_bytes = os_bytes;
  g.lc_bytes = 0;
  return g;
}

FifoGeom geom_lc(int nranks, int32_t os_bytes, int32_t lc_bytes) {
  FifoGeom g = geom(nranks, os_bytes);
  g.lc_bytes = lc_bytes;
  return g;
}

TEST(FifoGeom, RegionsDoNotOverlapAndOneShotIsLast) {
  for (int n : {1, 2, 3, 8})
    for (int32_t os : {8, 1001, 65536}) {
      const FifoGeom g = geom(n, os);
      std::vector<std::pair<uint64_t, uint64_t>> r;  // [begin, end)
      for (int p = 0; p < n; ++p)
        for (int c = 0; c < g.max_channels; ++c) {
          r.push_back({g.data_off(p, c), g.data_off(p, c) + g.ring_bytes()});
          r.push_back({g.ll_off(p, c), g.ll_off(p, c) + g.ll_ring_bytes()});
          r.push_back({g.head_off(p, c), g.head_off(p, c) + 384});
          r.push_back({g.state_off(p, c), g.state_off(p, c) + 32});
        }
      const uint64_t state_end = g.state_base() + g.pairs() * 32;
      for (int s = 0; s < n; ++s)
        for (int b = 0; b < 2; ++b) {
          EXPECT_GE(g.os_off(s, b), state_end);
          EXPECT_EQ(g.os_off(s, b) % 16, 0u);  // 16-byte LL lines
          r.push_back({g.os_off(s, b), g.os_off(s, b) + g.os_line_bytes()});
        }
      EXPECT_EQ(g.os_ctl_off() % 8, 0u);
      r.push_back({g.os_ctl_off(), g.os_ctl_off() + 128});
      std::sort(r.begin(), r.end());
      for (size_t i = 1; i < r.size(); ++i)
        EXPECT_LE(r[i - 1].second, r[i].first) << "n " << n << " os " << os << " region " << i;
      EXPECT_EQ(r.back().second, g.total_bytes());
      // Two parities of 16-byte lines per sender, each holding os bytes of data.
      EXPECT_GE(g.os_line_bytes() / 16 * 8, uint64_t(os));
      EXPECT_LT(g.os_line_bytes() / 16 * 8, uint64_t(os) + 8);
      EXPECT_EQ(g.os_region_bytes(), uint64_t(n) * 2 * g.os_line_bytes() + 128);
      EXPECT_EQ(g.total_bytes(), geom(n, 0).total_bytes() + g.os_region_bytes());
    }
}

TEST(FifoGeom, LlCollRegionIsLastAndDoesNotOverlap) {
  for (int n : {1, 2, 3, 8})
    for (int32_t os : {0, 1001, 65536})
      for (int32_t lc : {8, 1001, 262144, 16 << 20}) {
        const FifoGeom g = geom_lc(n, os, lc);
        std::vector<std::pair<uint64_t, uint64_t>> r;  // [begin, end)
        for (int p = 0; p < n; ++p)
          for (int c = 0; c < g.max_channels; ++c) {
            r.push_back({g.data_off(p, c), g.data_off(p, c) + g.ring_bytes()});
            r.push_back({g.ll_off(p, c), g.ll_off(p, c) + g.ll_ring_bytes()});
            r.push_back({g.head_off(p, c), g.head_off(p, c) + 384});
            r.push_back({g.state_off(p, c), g.state_off(p, c) + 32});
          }
        if (os > 0) {
          for (int s = 0; s < n; ++s)
            for (int b = 0; b < 2; ++b) r.push_back({g.os_off(s, b), g.os_off(s, b) + g.os_line_bytes()});
          r.push_back({g.os_ctl_off(), g.os_ctl_off() + 128});
        }
        const uint64_t before = r.empty() ? 0 : std::max_element(r.begin(), r.end())->second;
        // The one-shot region does not move when the LL region is added.
        EXPECT_EQ(g.os_base(), geom(n, os).os_base());
        EXPECT_EQ(g.lc_base(), geom(n, os).total_bytes());
        for (int s = 0; s < n; ++s)
          for (int b = 0; b < 2; ++b) {
            EXPECT_GE(g.lc_off(s, b), g.lc_base());
            EXPECT_EQ(g.lc_off(s, b) % 16, 0u);  // 16-byte LL lines
            r.push_back({g.lc_off(s, b), g.lc_off(s, b) + g.lc_line_bytes()});
          }
        EXPECT_EQ(g.lc_ctl_off() % 16, 0u);
        r.push_back({g.lc_ctl_off(), g.lc_ctl_off() + 128});
        std::sort(r.begin(), r.end());
        for (size_t i = 1; i < r.size(); ++i)
          EXPECT_LE(r[i - 1].second, r[i].first)
              << "n " << n << " os " << os << " lc " << lc << " region " << i;
        EXPECT_GE(g.lc_base(), before);
        EXPECT_EQ(r.back().second, g.total_bytes());
        // Per sender and parity: lc bytes of data (a broadcast root's whole
        // buffer) as 16-byte lines of 8 data bytes.
        EXPECT_GE(g.lc_line_bytes() / 16 * 8, uint64_t(lc));
        EXPECT_LT(g.lc_line_bytes() / 16 * 8, uint64_t(lc) + 8);
        EXPECT_EQ(g.lc_region_bytes(), uint64_t(n) * 2 * g.lc_line_bytes() + 128);
        EXPECT_EQ(g.total_bytes(), geom(n, os).total_bytes() + g.lc_region_bytes());
      }
}

TEST(FifoGeom, NoLlCollRegionWhenOff) {
  const FifoGeom g = geom_lc(4, 4096, 0);
  EXPECT_EQ(g.lc_region_bytes(), 0u);
  EXPECT_EQ(g.total_bytes(), g.os_base() + g.os_region_bytes());
}

TEST(FifoGeom, NoOneShotRegionWhenOff) {
  const FifoGeom g = geom(4, 0);
  EXPECT_EQ(g.os_region_bytes(), 0u);
  EXPECT_GE(g.total_bytes(), g.state_base() + g.pairs() * 32);
  EXPECT_LT(g.total_bytes(), g.state_base() + g.pairs() * 32 + 256);
}

}  // namespace
