// FifoGeom (kernels/device_plan.h): the regions of a GPU inbox do not
// overlap; the one-shot region, the shared epoch control line, the
// two-shot region and the LL-collective region sit after the FIFOs, sized by
// os_bytes, ts_bytes and lc_bytes (none when 0), then the call-check lines
// and the point-to-point size lines.
#include <gtest/gtest.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "kernels/device_plan.h"

using namespace mycoll;

namespace {

FifoGeom geom(int nranks, int32_t os_bytes, int32_t ts_bytes = 0) {
  FifoGeom g{};
  g.nranks = nranks;
  g.max_channels = 3;
  g.nslots = 4;
  g.ll_slots = 8;
  g.slot_bytes = 1024;
  g.ll_slot_bytes = 16384;
  g.os_bytes = os_bytes;
  g.ts_bytes = ts_bytes;
  g.lc_bytes = 0;
  return g;
}

// Every (peer, channel) pair's data ring, ll ring, head/tail lines and
// state line, as [begin, end) byte ranges of the inbox.
std::vector<std::pair<uint64_t, uint64_t>> pair_regions(const FifoGeom& g) {
  std::vector<std::pair<uint64_t, uint64_t>> r;
  for (int p = 0; p < g.nranks; ++p)
    for (int c = 0; c < g.max_channels; ++c) {
      r.push_back({g.data_off(p, c), g.data_off(p, c) + g.ring_bytes()});
      r.push_back({g.ll_off(p, c), g.ll_off(p, c) + g.ll_ring_bytes()});
      r.push_back({g.head_off(p, c), g.head_off(p, c) + 384});
      r.push_back({g.state_off(p, c), g.state_off(p, c) + 32});
    }
  return r;
}

FifoGeom geom_lc(int nranks, int32_t os_bytes, int32_t lc_bytes) {
  FifoGeom g = geom(nranks, os_bytes);
  g.lc_bytes = lc_bytes;
  return g;
}

TEST(FifoGeom, RegionsDoNotOverlapAndOneShotTwoShotAreLast) {
  for (int n : {1, 2, 3, 8})
    for (int32_t os : {0, 8, 1001, 65536})
      for (int32_t ts : {0, 8, 1001, 4 << 20}) {
        const FifoGeom g = geom(n, os, ts);
        std::vector<std::pair<uint64_t, uint64_t>> r = pair_regions(g);  // [begin, end)
        const uint64_t state_end = g.state_base() + g.pairs() * 32;
        for (int s = 0; s < n; ++s)
          for (int b = 0; b < 2; ++b) {
            if (os > 0) {
              EXPECT_GE(g.os_off(s, b), state_end);
              EXPECT_EQ(g.os_off(s, b) % 16, 0u);  // 16-byte LL lines
              r.push_back({g.os_off(s, b), g.os_off(s, b) + g.os_line_bytes()});
            }
            if (ts > 0) {
              EXPECT_GE(g.ts_a_off(s, b), state_end);
              EXPECT_EQ(g.ts_a_off(s, b) % 16, 0u);
              EXPECT_EQ(g.ts_b_off(s, b) % 16, 0u);
              r.push_back({g.ts_a_off(s, b), g.ts_a_off(s, b) + g.ts_part_bytes()});
              r.push_back({g.ts_b_off(s, b), g.ts_b_off(s, b) + g.ts_part_bytes()});
            }
          }
        EXPECT_EQ(g.ctl_bytes(), os > 0 || ts > 0 ? 128u : 0u);
        if (g.ctl_bytes() > 0) {
          EXPECT_GE(g.ctl_off(), state_end);
          EXPECT_EQ(g.ctl_off() % 8, 0u);
          r.push_back({g.ctl_off(), g.ctl_off() + 128});
        }
        std::sort(r.begin(), r.end());
        for (size_t i = 1; i < r.size(); ++i)
          EXPECT_LE(r[i - 1].second, r[i].first)
              << "n " << n << " os " << os << " ts " << ts << " region " << i;
        EXPECT_LE(r.back().second, g.call_base());
        EXPECT_LT(g.call_base(), r.back().second + 256);
        // Two parities of 16-byte lines per sender, each holding os bytes of data.
        if (os > 0) {
          EXPECT_GE(g.os_line_bytes() / 16 * 8, uint64_t(os));
          EXPECT_LT(g.os_line_bytes() / 16 * 8, uint64_t(os) + 8);
        }
        EXPECT_EQ(g.os_region_bytes(), uint64_t(n) * 2 * g.os_line_bytes());
        // Two-shot: n parts of whole lines of a ts-byte message, the largest
        // ceil(lines / n) lines (at least one line per part).
        const uint64_t lines = (uint64_t(ts) + 7) / 8;
        EXPECT_EQ(g.ts_part_lines(), ts > 0 ? (lines + n - 1) / n : 0u);
        EXPECT_GE(g.ts_part_lines() * n, lines);
        EXPECT_EQ(g.ts_part_bytes(), g.ts_part_lines() * 16);
        EXPECT_EQ(g.ts_region_bytes(), uint64_t(n) * 2 * 2 * g.ts_part_bytes());
        EXPECT_EQ(g.ts_base() % 256, 0u);
        EXPECT_GE(g.call_base(), geom(n, 0).call_base() + g.os_region_bytes() + g.ctl_bytes() +
                                     g.ts_region_bytes());
        EXPECT_LT(g.call_base(), geom(n, 0).call_base() + g.os_region_bytes() + g.ctl_bytes() +
                                     g.ts_region_bytes() + 512);
      }
}

// The default two-shot size at 8 ranks: 4 MiB of data = 512K lines, 64K per
// part, 1 MiB per A or B buffer, 32 MiB for 8 senders x 2 parities x 2.
TEST(FifoGeom, TwoShotDefaultAtEightRanks) {
  const FifoGeom g = geom(8, 65536, 4 << 20);
  EXPECT_EQ(g.ts_part_lines(), 65536u);
  EXPECT_EQ(g.ts_part_bytes(), 1u << 20);
  EXPECT_EQ(g.ts_region_bytes(), 32u << 20);
}

TEST(FifoGeom, LlCollRegionIsLastAndDoesNotOverlap) {
  for (int n : {1, 2, 3, 8})
    for (int32_t os : {0, 1001, 65536})
      for (int32_t lc : {8, 1001, 262144, 16 << 20}) {
        const FifoGeom g = geom_lc(n, os, lc);
        std::vector<std::pair<uint64_t, uint64_t>> r = pair_regions(g);  // [begin, end)
        if (os > 0) {
          for (int s = 0; s < n; ++s)
            for (int b = 0; b < 2; ++b)
              r.push_back({g.os_off(s, b), g.os_off(s, b) + g.os_line_bytes()});
          r.push_back({g.ctl_off(), g.ctl_off() + 128});
        }
        const uint64_t before = r.empty() ? 0 : std::max_element(r.begin(), r.end())->second;
        // The one-shot region does not move when the LL region is added.
        EXPECT_EQ(g.os_base(), geom(n, os).os_base());
        EXPECT_EQ(g.lc_base(), geom(n, os).call_base());
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
        EXPECT_EQ(g.call_base(), (r.back().second + 255) / 256 * 256);
        // Per sender and parity: lc bytes of data (a broadcast root's whole
        // buffer) as 16-byte lines of 8 data bytes.
        EXPECT_GE(g.lc_line_bytes() / 16 * 8, uint64_t(lc));
        EXPECT_LT(g.lc_line_bytes() / 16 * 8, uint64_t(lc) + 8);
        EXPECT_EQ(g.lc_region_bytes(), uint64_t(n) * 2 * g.lc_line_bytes() + 128);
        EXPECT_EQ(g.call_base(), (geom(n, os).call_base() + g.lc_region_bytes() + 255) / 256 * 256);
      }
}

TEST(FifoGeom, NoLlCollRegionWhenOff) {
  const FifoGeom g = geom_lc(4, 4096, 0);
  EXPECT_EQ(g.lc_region_bytes(), 0u);
  EXPECT_EQ(g.call_base(), g.lc_base());
}

TEST(FifoGeom, NoOneShotRegionWhenOff) {
  const FifoGeom g = geom(4, 0);
  EXPECT_EQ(g.os_region_bytes(), 0u);
  EXPECT_EQ(g.ts_region_bytes(), 0u);
  EXPECT_EQ(g.ctl_bytes(), 0u);
  EXPECT_GE(g.call_base(), g.state_base() + g.pairs() * 32);
  EXPECT_LT(g.call_base(), g.state_base() + g.pairs() * 32 + 256);
}

// The call check's lines (kernels/prims/call_check.cuh) come after every
// other region but the size lines, whatever is enabled: two 16-byte lines
// per sender, then this rank's 128-byte control line.
TEST(FifoGeom, CallLinesFollowEveryRegionAndDoNotOverlap) {
  for (int n : {1, 2, 3, 8, 72})
    for (int32_t os : {0, 1001})
      for (int32_t ts : {0, 4 << 20})
        for (int32_t lc : {0, 1001, 262144}) {
          FifoGeom g = geom(n, os, ts);
          g.lc_bytes = lc;
          const uint64_t end = lc > 0 ? g.lc_base() + g.lc_region_bytes() : g.lc_base();
          EXPECT_GE(g.call_base(), end);
          EXPECT_LT(g.call_base(), end + 256);
          EXPECT_EQ(g.call_base() % 256, 0u);
          std::vector<std::pair<uint64_t, uint64_t>> r;
          for (int s = 0; s < n; ++s)
            for (int b = 0; b < 2; ++b) {
              EXPECT_EQ(g.call_hdr_off(s, b) % 16, 0u);  // one 16-byte LL line
              r.push_back({g.call_hdr_off(s, b), g.call_hdr_off(s, b) + 16});
            }
          EXPECT_EQ(g.call_ctl_off() % 128, 0u);
          r.push_back({g.call_ctl_off(), g.call_ctl_off() + 128});
          std::sort(r.begin(), r.end());
          EXPECT_EQ(r.front().first, g.call_base());
          for (size_t i = 1; i < r.size(); ++i) EXPECT_LE(r[i - 1].second, r[i].first);
          EXPECT_EQ(r.back().second, g.call_base() + g.call_region_bytes());
          EXPECT_LE(g.call_region_bytes(), uint64_t(n) * 32 + 128 + 127);
        }
}

// The point-to-point size lines (kernels/prims/p2p_size.cuh) end the inbox:
// for every (sender, channel) one 16-byte line per data-ring slot, then one
// per ll-ring slot, none shared, 256-byte aligned after the call region.
TEST(FifoGeom, SizeLinesAreLastOneLinePerSlot) {
  for (int n : {1, 2, 3, 8})
    for (int32_t lc : {0, 1001}) {
      FifoGeom g = geom(n, 1001, 4 << 20);
      g.lc_bytes = lc;
      const uint64_t call_end = g.call_base() + g.call_region_bytes();
      EXPECT_GE(g.size_base(), call_end);
      EXPECT_LT(g.size_base(), call_end + 256);
      EXPECT_EQ(g.size_base() % 256, 0u);
      std::vector<std::pair<uint64_t, uint64_t>> r;
      for (int s = 0; s < n; ++s)
        for (int c = 0; c < g.max_channels; ++c) {
          r.push_back({g.size_off(s, c), g.size_off(s, c) + uint64_t(g.nslots) * 16});
          r.push_back({g.ll_size_off(s, c), g.ll_size_off(s, c) + uint64_t(g.ll_slots) * 16});
        }
      std::sort(r.begin(), r.end());
      EXPECT_EQ(r.front().first, g.size_base());
      for (size_t i = 1; i < r.size(); ++i) EXPECT_EQ(r[i - 1].second, r[i].first);
      EXPECT_EQ(r.back().second, g.total_bytes());
      EXPECT_EQ(g.size_region_bytes(), g.total_bytes() - g.size_base());
    }
}

}  // namespace
