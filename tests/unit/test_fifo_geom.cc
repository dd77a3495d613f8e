// FifoGeom (kernels/device_plan.h): the regions of a GPU inbox do not
// overlap; the mailbox of the one-shot, two-shot and LL-collective kernels
// (one slot per sender and parity, sized by the largest of os_bytes,
// ts_bytes and lc_bytes; none when all are 0) and its epoch control line sit
// after the FIFOs, then the call-check lines and the point-to-point size
// lines.
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>
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

FifoGeom geom3(int nranks, int32_t os_bytes, int32_t ts_bytes, int32_t lc_bytes) {
  FifoGeom g = geom(nranks, os_bytes, ts_bytes);
  g.lc_bytes = lc_bytes;
  return g;
}

// One mailbox for the one-shot, two-shot and LL-collective kernels: for
// every (sender, parity) one slot holding whichever kernel's lines is the
// largest (one-shot: os bytes as 16-byte lines of 8 data bytes; two-shot: an
// A and a B part of ceil(lines / n) lines each; LL collectives: lc bytes as
// lines), slots back to back, then the one epoch control line; after the
// state lines, before the call lines, overlapping nothing. Every two-shot
// message up to ts bytes fits its two parts in a slot.
TEST(FifoGeom, OneMailboxSlotPerSenderAndParityAsLargeAsTheLargestKernel) {
  for (int n : {1, 2, 3, 8})
    for (int32_t os : {0, 8, 1001, 65536})
      for (int32_t ts : {0, 8, 1001, 4 << 20})
        for (int32_t lc : {0, 8, 1001, 262144}) {
          const FifoGeom g = geom3(n, os, ts, lc);
          const uint64_t os_line = os > 0 ? (uint64_t(os) + 7) / 8 * 16 : 0;
          const uint64_t lines = (uint64_t(ts) + 7) / 8;
          const uint64_t part = ts > 0 ? (lines + n - 1) / n * 16 : 0;
          const uint64_t lc_line = lc > 0 ? (uint64_t(lc) + 7) / 8 * 16 : 0;
          const uint64_t slot = std::max({os_line, 2 * part, lc_line});
          SCOPED_TRACE(::testing::Message()
                       << "n " << n << " os " << os << " ts " << ts << " lc " << lc);
          EXPECT_EQ(g.os_line_bytes(), os_line);
          EXPECT_EQ(g.ts_part_bytes(), part);
          EXPECT_EQ(g.lc_line_bytes(), lc_line);
          EXPECT_EQ(g.mb_slot_bytes(), slot);
          EXPECT_EQ(g.mb_slot_bytes() % 16, 0u);  // whole 16-byte LL lines
          const uint64_t state_end = g.state_base() + g.pairs() * 32;
          EXPECT_GE(g.mb_base(), state_end);
          EXPECT_LT(g.mb_base(), state_end + 256);
          EXPECT_EQ(g.mb_base() % 256, 0u);
          std::vector<std::pair<uint64_t, uint64_t>> r = pair_regions(g);  // [begin, end)
          if (slot == 0) {
            EXPECT_EQ(g.mb_region_bytes(), 0u);
            EXPECT_EQ(g.call_base(), g.mb_base());
            continue;
          }
          for (int s = 0; s < n; ++s)
            for (int b = 0; b < 2; ++b) {
              const uint64_t o = g.mb_off(s, b);
              r.push_back({o, o + slot});
              EXPECT_EQ(o, g.mb_base() + (uint64_t(s) * 2 + b) * slot);
            }
          for (uint64_t bytes :
               {uint64_t(1), uint64_t(7), uint64_t(8) * n - 1, uint64_t(ts) / 2 + 3, uint64_t(ts)})
            if (bytes > 0 && bytes <= uint64_t(ts))
              EXPECT_LE(2 * 16 * FifoGeom::ts_part_lines_of(bytes, n), slot) << bytes;
          EXPECT_EQ(g.ctl_off() % 16, 0u);
          r.push_back({g.ctl_off(), g.ctl_off() + 128});
          std::sort(r.begin(), r.end());
          for (size_t i = 1; i < r.size(); ++i) EXPECT_LE(r[i - 1].second, r[i].first) << i;
          EXPECT_EQ(g.mb_region_bytes(), uint64_t(n) * 2 * slot + 128);
          EXPECT_EQ(r.back().second, g.mb_base() + g.mb_region_bytes());
          EXPECT_EQ(g.call_base(), (g.mb_base() + g.mb_region_bytes() + 255) / 256 * 256);
        }
}

// The defaults (one-shot 64 KiB, two-shot 4 MiB, LL 2 MiB): the mailbox is
// the largest kernel's, not the sum. Two-shot: 512K lines, ceil(512K / n)
// per part, an A and a B part per slot; LL: 2 MiB of data = 4 MiB of lines.
// 8 ranks: two-shot 2 MiB slots, LL 4 MiB: 64 MiB (the three regions side
// by side took 98 MiB); 2 ranks: two-shot 8 MiB slots: 32 MiB (was 48.5).
TEST(FifoGeom, DefaultsTakeTheLargestKernelsSlot) {
  const FifoGeom g8 = geom3(8, 65536, 4 << 20, 2 << 20);
  EXPECT_EQ(g8.ts_part_lines(), 65536u);
  EXPECT_EQ(g8.ts_part_bytes(), 1u << 20);
  EXPECT_EQ(g8.lc_line_bytes(), 4u << 20);
  EXPECT_EQ(g8.mb_slot_bytes(), 4u << 20);
  EXPECT_EQ(g8.mb_region_bytes(), (64u << 20) + 128);
  const FifoGeom g2 = geom3(2, 65536, 4 << 20, 2 << 20);
  EXPECT_EQ(g2.ts_part_bytes(), 4u << 20);
  EXPECT_EQ(g2.mb_slot_bytes(), 8u << 20);
  EXPECT_EQ(g2.mb_region_bytes(), (32u << 20) + 128);
}

TEST(FifoGeom, NoMailboxWhenEveryMailboxKernelIsOff) {
  const FifoGeom g = geom3(4, 0, 0, 0);
  EXPECT_EQ(g.mb_slot_bytes(), 0u);
  EXPECT_EQ(g.mb_region_bytes(), 0u);
  EXPECT_GE(g.call_base(), g.state_base() + g.pairs() * 32);
  EXPECT_LT(g.call_base(), g.state_base() + g.pairs() * 32 + 256);
}

// The call check's lines (kernels/prims/call_check.cuh) come after every
// other region but the size lines, whatever is enabled: kCallLines 16-byte
// lines per sender, then this rank's 128-byte control line.
TEST(FifoGeom, CallLinesFollowEveryRegionAndDoNotOverlap) {
  for (int n : {1, 2, 3, 8, 72})
    for (int32_t os : {0, 1001})
      for (int32_t ts : {0, 4 << 20})
        for (int32_t lc : {0, 1001, 262144}) {
          FifoGeom g = geom(n, os, ts);
          g.lc_bytes = lc;
          const uint64_t end = g.mb_base() + g.mb_region_bytes();
          EXPECT_GE(g.call_base(), end);
          EXPECT_LT(g.call_base(), end + 256);
          EXPECT_EQ(g.call_base() % 256, 0u);
          std::vector<std::pair<uint64_t, uint64_t>> r;
          for (int s = 0; s < n; ++s)
            for (int b = 0; b < kCallLines; ++b) {
              EXPECT_EQ(g.call_hdr_off(s, b) % 16, 0u);  // one 16-byte LL line
              r.push_back({g.call_hdr_off(s, b), g.call_hdr_off(s, b) + 16});
            }
          EXPECT_EQ(g.call_ctl_off() % 128, 0u);
          r.push_back({g.call_ctl_off(), g.call_ctl_off() + 128});
          std::sort(r.begin(), r.end());
          EXPECT_EQ(r.front().first, g.call_base());
          for (size_t i = 1; i < r.size(); ++i) EXPECT_LE(r[i - 1].second, r[i].first);
          EXPECT_EQ(r.back().second, g.call_base() + g.call_region_bytes());
          EXPECT_LE(g.call_region_bytes(), uint64_t(n) * kCallLines * 16 + 128 + 127);
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

// The offsets the kernels read from DevComm (computed once on the host, so
// no kernel divides by nranks at launch) are the geometry's, for odd rank
// counts and every mix of mailbox users.
TEST(FifoGeom, DevCommOffsetsAreTheGeometrys) {
  static char inbox[1];
  for (int n : {2, 3, 5, 8})
    for (auto [os, ts, lc] : {std::tuple{65536, 0, 0}, std::tuple{0, 4194304, 0},
                              std::tuple{0, 0, 262151}, std::tuple{65536, 4194304, 262151}}) {
      DevComm dc{};
      dc.geom = geom(n, os, ts);
      dc.geom.lc_bytes = lc;
      dc.local = inbox;
      dc.set_offsets();
      const FifoGeom& g = dc.geom;
      SCOPED_TRACE(testing::Message() << n << " ranks, os " << os << " ts " << ts << " lc " << lc);
      EXPECT_EQ(dc.mb_base, g.mb_off(0, 0));
      EXPECT_EQ(dc.mb_base + 3 * dc.mb_slot, g.mb_off(1, 1));
      EXPECT_EQ(dc.mb_base + (2 * uint64_t(n) - 1) * dc.mb_slot, g.mb_off(n - 1, 1));
      EXPECT_EQ(dc.mb_ctl - inbox, int64_t(g.ctl_off()));
      EXPECT_EQ(dc.call_ctl - inbox, int64_t(g.call_ctl_off()));
      EXPECT_GT(dc.mb_slot, 0u);
      // The epoch line right after the last slot, the call lines after it.
      EXPECT_EQ(uint64_t(dc.mb_ctl - inbox), g.mb_off(n - 1, 1) + dc.mb_slot);
      EXPECT_GE(uint64_t(dc.call_ctl - inbox), uint64_t(dc.mb_ctl - inbox) + 128);
    }
}
