// The ring schedule as the fused GPU kernel runs it (kernels/colls/ring.cu),
// checked on the host: sched::ring_walk() lays lib/algorithms/schedule.h's
// primitives over the kernel's channels and chunks exactly as the kernel
// calls it; this test runs every rank's primitives through FIFOs of the
// kernel's shape (per ring link and channel, `ns` slots of `sb` bytes, a
// primitive moving one slot when it has data from prev and room at next)
// and checks every byte of every output against a reference computed
// directly from the inputs, the FIFOs empty after every collective (their
// counts persist across kernels), and no deadlock. The host ring plans are
// built from the same ring_prim() and checked by the plan simulator
// (test_plans.cc), so a schedule bug shows on both.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "algorithms/schedule.h"

namespace mycoll {
namespace {

using sched::kD;
using sched::kL;
using sched::kR;
using sched::kS;

struct Prim {
  int mode;
  uint64_t lo, dso, len;
};

struct Geometry {
  int n, nch;
  uint64_t sb, ns;  // slot bytes, slots per FIFO
};

// Where one rank's input and output live in its arena (in place aliases
// them as NCCL does), and how large they are.
struct Layout {
  uint64_t in_off, in_len, out_off, out_len, arena;
};

Layout layout(Coll c, int n, int r, int root, uint64_t B, bool in_place) {
  const uint64_t nb = uint64_t(n) * B;
  const uint64_t guard = 32;
  Layout l{};
  switch (c) {
    case Coll::AllGather:
      l.in_len = B;
      l.out_len = nb;
      l.out_off = guard;
      l.in_off = in_place ? l.out_off + uint64_t(r) * B : l.out_off + nb + guard;
      break;
    case Coll::ReduceScatter:
      l.in_len = nb;
      l.out_len = B;
      l.in_off = guard;
      l.out_off = in_place ? l.in_off + uint64_t(r) * B : l.in_off + nb + guard;
      break;
    default:
      l.in_len = B;
      l.out_len = B;
      l.in_off = guard;
      l.out_off = in_place && (c != Coll::Reduce || r == root) ? l.in_off : l.in_off + B + guard;
      break;
  }
  l.arena = std::max(l.in_off + l.in_len, l.out_off + l.out_len) + guard;
  return l;
}

// Runs one collective over persistent FIFOs fifo[r][ch] (r -> r+1). Returns
// "" or what went wrong.
std::string run(Coll c, const Geometry& g, int root, uint64_t B, bool in_place,
                std::vector<std::vector<std::deque<std::vector<uint8_t>>>>& fifo,
                std::mt19937& rng) {
  const int n = g.n;
  const uint64_t most = std::max<uint64_t>(g.ns / 2, 1) * g.sb;  // the kernel's half FIFO
  std::vector<Layout> lay(n);
  std::vector<std::vector<uint8_t>> mem(n);
  std::vector<std::vector<uint8_t>> input(n);
  for (int r = 0; r < n; ++r) {
    lay[r] = layout(c, n, r, root, B, in_place);
    mem[r].resize(lay[r].arena);
    for (auto& b : mem[r]) b = uint8_t(rng());
    input[r].assign(mem[r].begin() + lay[r].in_off, mem[r].begin() + lay[r].in_off + lay[r].in_len);
  }
  // The expected arena: unchanged except the output.
  std::vector<std::vector<uint8_t>> want = mem;
  for (int r = 0; r < n; ++r) {
    uint8_t* out = want[r].data() + lay[r].out_off;
    for (uint64_t i = 0; i < B; ++i) {
      uint8_t sum = 0;
      switch (c) {
        case Coll::AllReduce:
          for (int q = 0; q < n; ++q) sum = uint8_t(sum + input[q][i]);
          out[i] = sum;
          break;
        case Coll::ReduceScatter:
          for (int q = 0; q < n; ++q) sum = uint8_t(sum + input[q][uint64_t(r) * B + i]);
          out[i] = sum;
          break;
        case Coll::Reduce:
          for (int q = 0; q < n; ++q) sum = uint8_t(sum + input[q][i]);
          if (r == root) out[i] = sum;
          break;
        case Coll::Broadcast: out[i] = input[root][i]; break;
        case Coll::AllGather:
          for (int q = 0; q < n; ++q) out[uint64_t(q) * B + i] = input[q][i];
          break;
        default: return "not a ring collective";
      }
    }
  }
  // Every (rank, channel)'s primitives, from the walk the kernel runs.
  std::vector<std::vector<std::vector<Prim>>> prims(n, std::vector<std::vector<Prim>>(g.nch));
  for (int r = 0; r < n; ++r)
    for (int ch = 0; ch < g.nch; ++ch) {
      const bool ip = c == Coll::AllGather ? lay[r].out_off + uint64_t(r) * B == lay[r].in_off
                                           : lay[r].in_off == lay[r].out_off;
      const bool ok = sched::ring_walk(c, n, r, root, ip, B, ch, g.nch, most,
                                       [&](int mode, uint64_t lo, uint64_t dso, uint64_t len) {
                                         prims[r][ch].push_back(Prim{mode, lo, dso, len});
                                         return true;
                                       });
      if (!ok) return "ring_walk stopped without being told to";
    }
  // Run them, one slot at a time, in a random order of (rank, channel).
  struct Pos {
    size_t prim = 0;
    uint64_t slot = 0;
  };
  std::vector<std::vector<Pos>> at(n, std::vector<Pos>(g.nch));
  std::vector<std::pair<int, int>> order;
  for (int r = 0; r < n; ++r)
    for (int ch = 0; ch < g.nch; ++ch) order.emplace_back(r, ch);
  for (bool moved = true; moved;) {
    moved = false;
    std::shuffle(order.begin(), order.end(), rng);
    for (auto [r, ch] : order) {
      Pos& p = at[r][ch];
      if (p.prim == prims[r][ch].size()) continue;
      const Prim& pr = prims[r][ch][p.prim];
      auto& in_q = fifo[(r + n - 1) % n][ch];
      auto& out_q = fifo[r][ch];
      if ((pr.mode & kR) && in_q.empty()) continue;
      if ((pr.mode & kS) && out_q.size() >= g.ns) continue;
      const uint64_t off = p.slot * g.sb;
      const uint64_t len = std::min(g.sb, pr.len - off);
      std::vector<uint8_t> v(len);
      if (pr.mode & kR) {
        if (in_q.front().size() != len)
          return "rank " + std::to_string(r) + " channel " + std::to_string(ch) + " received a " +
                 std::to_string(in_q.front().size()) + "-byte slot, expected " +
                 std::to_string(len);
        v = in_q.front();
        in_q.pop_front();
      }
      if (pr.mode & kL) {
        if (pr.lo + off + len > lay[r].in_len) return "local operand outside the input";
        const uint8_t* loc = mem[r].data() + lay[r].in_off + pr.lo + off;
        for (uint64_t i = 0; i < len; ++i) v[i] = (pr.mode & kR) ? uint8_t(v[i] + loc[i]) : loc[i];
      }
      if (pr.mode & kD) {
        if (pr.dso + off + len > lay[r].out_len) return "destination outside the output";
        std::copy(v.begin(), v.end(), mem[r].begin() + lay[r].out_off + pr.dso + off);
      }
      if (pr.mode & kS) out_q.push_back(std::move(v));
      if (off + len >= pr.len) {
        ++p.prim;
        p.slot = 0;
      } else {
        ++p.slot;
      }
      moved = true;
    }
  }
  for (int r = 0; r < n; ++r)
    for (int ch = 0; ch < g.nch; ++ch)
      if (at[r][ch].prim != prims[r][ch].size())
        return "deadlock: rank " + std::to_string(r) + " channel " + std::to_string(ch) +
               " stuck at primitive " + std::to_string(at[r][ch].prim) + " of " +
               std::to_string(prims[r][ch].size());
  for (int r = 0; r < n; ++r)
    for (int ch = 0; ch < g.nch; ++ch)
      if (!fifo[r][ch].empty())
        return std::to_string(fifo[r][ch].size()) + " slots left in the FIFO " + std::to_string(r) +
               " -> " + std::to_string((r + 1) % n) + " channel " + std::to_string(ch);
  for (int r = 0; r < n; ++r)
    for (uint64_t i = 0; i < lay[r].arena; ++i)
      if (mem[r][i] != want[r][i])
        return "rank " + std::to_string(r) + " arena byte " + std::to_string(i) + " is " +
               std::to_string(mem[r][i]) + ", expected " + std::to_string(want[r][i]) +
               " (output at " + std::to_string(lay[r].out_off) + ", input at " +
               std::to_string(lay[r].in_off) + ")";
  return "";
}

TEST(RingSchedule, TheKernelsWalkComputesEveryCollective) {
  const Coll colls[] = {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::Broadcast,
                        Coll::Reduce};
  const Geometry geoms[] = {{2, 1, 16, 2}, {2, 3, 64, 8}, {3, 1, 16, 8}, {3, 2, 32, 4},
                            {4, 2, 16, 4}, {5, 3, 48, 8}, {7, 1, 64, 2}, {8, 4, 16, 8}};
  const uint64_t sizes[] = {1, 7, 16, 33, 255, 1000, 4097};
  std::mt19937 rng(12345);
  int cases = 0;
  for (const Geometry& g : geoms) {
    // One set of FIFOs per communicator: every collective of the sweep goes
    // through them in turn, as kernels of one communicator do.
    std::vector<std::vector<std::deque<std::vector<uint8_t>>>> fifo(
        g.n, std::vector<std::deque<std::vector<uint8_t>>>(g.nch));
    for (Coll c : colls)
      for (uint64_t B : sizes)
        for (bool in_place : {false, true})
          for (int root : {0, g.n - 1}) {
            if (root != 0 && c != Coll::Broadcast && c != Coll::Reduce) continue;
            const std::string err = run(c, g, root, B, in_place, fifo, rng);
            ASSERT_EQ(err, "") << coll_name(c) << " n=" << g.n << " channels=" << g.nch
                               << " slot=" << g.sb << "x" << g.ns << " bytes=" << B
                               << (in_place ? " in place" : "") << " root=" << root;
            ++cases;
          }
  }
  EXPECT_GT(cases, 500);
}

// The walk itself: every byte of a channel's range moved once per block,
// ranges of the channels tiling the message, chunks at most half a FIFO in
// the rings.
TEST(RingSchedule, ChannelsTileTheMessage) {
  for (Coll c : {Coll::AllReduce, Coll::AllGather, Coll::Broadcast})
    for (int nch : {1, 2, 5, 16})
      for (uint64_t B : {uint64_t(1), uint64_t(17), uint64_t(4096), uint64_t(100003)}) {
        const int n = 4;
        const uint64_t most = 256;
        std::vector<int> seen(c == Coll::AllGather ? n * B : B, 0);
        for (int ch = 0; ch < nch; ++ch)
          sched::ring_walk(c, n, 1, 0, false, B, ch, nch, most,
                           [&](int mode, uint64_t lo, uint64_t dso, uint64_t len) {
                             if (c != Coll::Broadcast) EXPECT_LE(len, most);
                             if (mode & kD)
                               for (uint64_t i = 0; i < len; ++i) ++seen[dso + i];
                             (void)lo;
                             return true;
                           });
        for (size_t i = 0; i < seen.size(); ++i)
          ASSERT_EQ(seen[i], 1) << coll_name(c) << " channels=" << nch << " bytes=" << B
                                << " output byte " << i;
      }
}

TEST(RingSchedule, StopsWhenThePrimitiveGivesUp) {
  int calls = 0;
  EXPECT_FALSE(sched::ring_walk(Coll::AllReduce, 4, 0, 0, false, 4096, 0, 1, 64,
                                [&](int, uint64_t, uint64_t, uint64_t) { return ++calls < 3; }));
  EXPECT_EQ(calls, 3);
}

// The direct schedule's two sides agree, as the LL kernel's mailbox
// protocol needs (kernels/colls/ll_coll.cu): in every launch a rank waits
// for a line from every peer, data or an ack, and it derives both from
// sched::direct_rank (an ack to every peer outside its send run, a wait for
// the ack of every peer it gets no data from). So for every ordered pair
// (r, p): r sends p data in the first exchange exactly when p takes data
// from r there (p's receive run, or p's fold, which takes every peer's);
// r fans its fold's result to p exactly when p receives r's block in the
// second exchange; and every rank waits for every peer one way or the other.
TEST(DirectSchedule, SendersAndReceiversAgreeForEveryPair) {
  struct Kind {
    Coll c;
    bool two_shot;
  };
  const Kind kinds[] = {
      {Coll::AllReduce, false},     {Coll::AllReduce, true}, {Coll::AllGather, false},
      {Coll::ReduceScatter, false}, {Coll::AllToAll, false}, {Coll::Broadcast, false},
      {Coll::Reduce, false},        {Coll::Scatter, false},  {Coll::Gather, false}};
  int pairs = 0;
  for (const Kind& k : kinds)
    for (int n = 2; n <= 9; ++n)
      for (int root = 0; root < n; ++root) {
        std::vector<sched::DirectRank> d;
        for (int r = 0; r < n; ++r) d.push_back(sched::direct_rank(k.c, k.two_shot, n, r, root));
        for (int r = 0; r < n; ++r) {
          const std::string at = std::string(coll_name(k.c)) + (k.two_shot ? " two-shot" : "") +
                                 " n=" + std::to_string(n) + " root=" + std::to_string(root) +
                                 " rank " + std::to_string(r);
          EXPECT_TRUE(d[r].nsend == 0 || d[r].nsend == 1 || d[r].nsend == n - 1) << at;
          EXPECT_TRUE(d[r].nrecv == 0 || d[r].nrecv == 1 || d[r].nrecv == n - 1) << at;
          EXPECT_FALSE(d[r].fan && !d[r].fold) << at;
          for (int p = 0; p < n; ++p) {
            if (p == r) continue;
            const bool sends = sched::direct_in_run(d[r].send_first, d[r].nsend, p, n);
            const bool second = k.two_shot;  // the receive run is the second exchange's
            const bool takes =
                d[p].fold || (!second && sched::direct_in_run(d[p].recv_first, d[p].nrecv, r, n));
            EXPECT_EQ(sends, takes) << at << " -> " << p;
            if (second)
              EXPECT_EQ(d[r].fan, sched::direct_in_run(d[p].recv_first, d[p].nrecv, r, n))
                  << at << " fan -> " << p;
            ++pairs;
          }
        }
      }
  EXPECT_GT(pairs, 1000);
}

}  // namespace
}  // namespace mycoll
