// Plans of every algorithm, checked exhaustively by the plan simulator, plus
// build_plan argument checks, AlgoPolicy parsing and the simulator's own
// ability to catch broken plans.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/plan.h"
#include "base/error.h"
#include "tests/unit/plan_simulator.h"

namespace mycoll {
namespace {

struct Pair {
  Algo algo;
  Coll coll;
};

std::vector<Pair> supported_pairs() {
  std::vector<Pair> out;
  for (int a = 0; a < kNumAlgos; ++a)
    for (int c = 0; c < kNumColls; ++c)
      if (algo_supports(static_cast<Algo>(a), static_cast<Coll>(c)))
        out.push_back({static_cast<Algo>(a), static_cast<Coll>(c)});
  return out;
}

bool rooted(Coll c) {
  return c == Coll::Broadcast || c == Coll::Reduce || c == Coll::Scatter || c == Coll::Gather;
}
bool blocked(Coll c) {
  return c == Coll::AllGather || c == Coll::ReduceScatter || c == Coll::AllToAll ||
         c == Coll::Scatter || c == Coll::Gather;
}
bool chunked(Coll c) { return c == Coll::AllReduce || c == Coll::Broadcast || c == Coll::Reduce; }
// The layouts a collective's plans come in besides chunk and in place:
// all-to-all pairwise and in one step (CollArgs::one_step).
std::vector<bool> one_steps(Coll c) {
  return c == Coll::AllToAll ? std::vector<bool>{false, true} : std::vector<bool>{false};
}

constexpr int kMaxRanks = 64;

// One simulated case of an (algorithm, collective).
sim::Case make_case(const Pair& p, int n, int root, size_t count, size_t stride, size_t chunk,
                    bool in_place, const int* host_of = nullptr) {
  sim::Case c;
  c.algo = p.algo;
  c.args.coll = p.coll;
  c.args.nranks = n;
  c.args.root = root;
  c.args.count = count;
  c.args.stride = stride;
  c.args.chunk = chunk;
  c.args.in_place = in_place;
  c.args.host_of = host_of;
  return c;
}

// Every configuration of one (algorithm, collective): nranks 1..64 x counts
// {0, 1, 3, 7, n-1, n+1, 129} x roots (all for n <= 16, else 0, 1, n/2,
// n-1) x in place or not x chunk {0, 3} (pipelined collectives) x stride
// {count (spelled 0 or count), count + 3} (blocked collectives) x pairwise
// or one step (all-to-all).
class PlanSim : public ::testing::TestWithParam<Pair> {};

TEST_P(PlanSim, EveryConfiguration) {
  const Pair p = GetParam();
  int runs = 0, failures = 0;
  for (int n = 1; n <= kMaxRanks; ++n) {
    std::set<size_t> counts{0, 1, 3, 7, size_t(n - 1), size_t(n + 1), 129};
    std::set<int> roots{0};
    if (rooted(p.coll)) {
      if (n <= 16) {
        for (int r = 0; r < n; ++r) roots.insert(r);
      } else {
        roots.insert({1, n / 2, n - 1});
      }
    }
    for (size_t count : counts)
      for (int root : roots)
        for (bool in_place : {false, true})
          for (size_t chunk : chunked(p.coll) ? std::vector<size_t>{0, 3} : std::vector<size_t>{0})
            for (size_t stride : blocked(p.coll) ? std::vector<size_t>{n % 2 ? count : 0, count + 3}
                                                 : std::vector<size_t>{0})
              for (bool one_step : one_steps(p.coll)) {
                sim::Case c = make_case(p, n, root, count, stride, chunk, in_place);
                c.args.one_step = one_step;
                std::string err = sim::run_case(c);
                ++runs;
                if (!err.empty() && ++failures <= 10) ADD_FAILURE() << err;
              }
  }
  EXPECT_EQ(failures, 0) << "of " << runs << " configurations";
}

// A sample beyond 64 ranks: a non-power of two (with stride padding) and a
// power of two.
TEST_P(PlanSim, LargerRankCounts) {
  const Pair p = GetParam();
  for (int n : {100, 128})
    for (bool in_place : {false, true})
      for (bool one_step : one_steps(p.coll)) {
        sim::Case c =
            make_case(p, n, n - 3, n + 1, n == 100 && blocked(p.coll) ? n + 2 : 0, 7, in_place);
        c.args.one_step = one_step;
        std::string err = sim::run_case(c);
        EXPECT_EQ(err, "") << (one_step ? "one step" : "pairwise");
      }
}

std::string pair_name(const ::testing::TestParamInfo<Pair>& info) {
  return std::string(algo_name(info.param.algo)) + "_" + coll_name(info.param.coll);
}

INSTANTIATE_TEST_SUITE_P(Algorithms, PlanSim, ::testing::ValuesIn(supported_pairs()), pair_name);

// ---------------------------------------------------------------------------
// Host layouts (CollArgs::host_of): every algorithm must stay correct with a
// layout (hier and rhd all-reduce use it, the others ignore it).

struct Layout {
  std::string name;
  std::vector<int> host_of;  // host id per rank
};

// Contiguous hosts of the given sizes (host ids deliberately not 0..h-1).
Layout contiguous(const std::vector<int>& sizes) {
  Layout l;
  for (size_t h = 0; h < sizes.size(); ++h) {
    l.name += (h ? "/" : "") + std::to_string(sizes[h]);
    for (int i = 0; i < sizes[h]; ++i) l.host_of.push_back(10 + 7 * static_cast<int>(h));
  }
  return l;
}

// Rank r on host r % hosts.
Layout interleaved(int hosts, int n) {
  Layout l{"interleaved" + std::to_string(hosts) + "x" + std::to_string(n), {}};
  for (int r = 0; r < n; ++r) l.host_of.push_back(r % hosts);
  return l;
}

std::vector<Layout> layouts() {
  std::vector<Layout> out;
  for (int k = 1; k <= 4; ++k) out.push_back(contiguous({k, k}));  // 2 hosts x 1..4
  for (auto sizes : std::vector<std::vector<int>>{{1, 2, 3},
                                                  {3, 1, 2},
                                                  {2, 3, 1},
                                                  {3, 3, 3},
                                                  {2, 2, 2, 2},
                                                  {1, 1, 1, 1, 1},
                                                  {4, 1},
                                                  {2, 5, 1, 3},
                                                  {4, 4, 4, 4},
                                                  {3, 3, 3, 3, 3}})
    out.push_back(contiguous(sizes));
  for (int n : {4, 5, 6, 7}) out.push_back(interleaved(2, n));
  for (int n : {6, 7, 8}) out.push_back(interleaved(3, n));
  return out;
}

TEST_P(PlanSim, HostLayouts) {
  const Pair p = GetParam();
  int runs = 0, failures = 0;
  for (const Layout& l : layouts()) {
    const int n = static_cast<int>(l.host_of.size());
    std::set<int> roots{0};
    if (rooted(p.coll))
      for (int r = 0; r < n; ++r) roots.insert(r);
    for (size_t count : {size_t(1), size_t(3), size_t(n + 1), size_t(129)})
      for (int root : roots)
        for (bool in_place : {false, true})
          for (size_t chunk : chunked(p.coll) ? std::vector<size_t>{0, 3} : std::vector<size_t>{0})
            for (size_t stride :
                 blocked(p.coll) ? std::vector<size_t>{0, count + 3} : std::vector<size_t>{0}) {
              sim::Case c = make_case(p, n, root, count, stride, chunk, in_place, l.host_of.data());
              std::string err = sim::run_case(c);
              ++runs;
              if (!err.empty() && ++failures <= 10) ADD_FAILURE() << l.name << ": " << err;
            }
  }
  EXPECT_EQ(failures, 0) << "of " << runs << " configurations";
}

// Elements each rank sends to ranks of another host.
std::vector<size_t> cross_host_sent(Algo algo, CollArgs a, const std::vector<int>& host_of,
                                    const std::vector<int>& layout_for_plan) {
  std::vector<size_t> out(a.nranks, 0);
  a.host_of = layout_for_plan.empty() ? nullptr : layout_for_plan.data();
  for (int r = 0; r < a.nranks; ++r) {
    a.rank = r;
    for (const Step& s : build_plan(algo, a).steps)
      for (const Op& op : s.ops)
        if (op.kind == OpKind::Send && host_of[op.peer] != host_of[r]) out[r] += op.src.count;
  }
  return out;
}

// The hier plans are two-level: per host only the chain head talks to other
// hosts, and the host tree's H-1 edges carry the message once each way
// (all-reduce) or once (broadcast, reduce); no head exchanges with more than
// three other hosts. Other ranks send only inside their host.
// The collective traits next to Coll agree with the buffers the plans address:
// at the root, the blocked buffer holds the whole message.
TEST(CollTraits, AgreeWithBufferCounts) {
  const int n = 5;
  const size_t count = 7;
  for (int i = 0; i < kNumColls; ++i) {
    const auto c = static_cast<Coll>(i);
    CollArgs a;
    a.coll = c;
    a.nranks = n;
    a.rank = a.root = 2;
    a.count = count;
    const BufferCounts b = buffer_counts(a);
    EXPECT_EQ(b.input, coll_input_blocked(c) ? count * n : count) << coll_name(c);
    EXPECT_EQ(b.output, coll_output_blocked(c) ? count * n : count) << coll_name(c);
    EXPECT_EQ(std::max(b.input, b.output), coll_whole_count(c, count, n)) << coll_name(c);
    EXPECT_EQ(coll_is_blocked(c), coll_input_blocked(c) || coll_output_blocked(c));
    if (coll_is_rooted(c)) {
      a.rank = 0;  // not the root: one of its buffers is unused
      const BufferCounts nb = buffer_counts(a);
      EXPECT_TRUE(nb.input == 0 || nb.output == 0) << coll_name(c);
    }
  }
  EXPECT_TRUE(coll_reduces(Coll::AllReduce) && coll_reduces(Coll::Reduce) &&
              coll_reduces(Coll::ReduceScatter));
  EXPECT_FALSE(coll_reduces(Coll::AllGather) || coll_reduces(Coll::Broadcast) ||
               coll_reduces(Coll::SendRecv));
  EXPECT_FALSE(coll_is_rooted(Coll::AllReduce) || coll_is_rooted(Coll::SendRecv));
  EXPECT_FALSE(coll_is_blocked(Coll::SendRecv) || coll_is_blocked(Coll::Broadcast));
}

TEST(HierPlans, OnlyChainHeadsCrossHostsOncePerTreeEdge) {
  for (const Layout& l : layouts()) {
    const int n = static_cast<int>(l.host_of.size());
    const int hosts = static_cast<int>(std::set<int>(l.host_of.begin(), l.host_of.end()).size());
    for (Coll coll : {Coll::AllReduce, Coll::Broadcast, Coll::Reduce})
      for (int root = 0; root < n; ++root) {
        if (coll == Coll::AllReduce && root > 0) break;
        CollArgs a;
        a.coll = coll;
        a.nranks = n;
        a.root = root;
        a.count = 1000;
        a.chunk = 64;
        a.host_of = l.host_of.data();
        std::vector<size_t> cross = cross_host_sent(Algo::Hier, a, l.host_of, l.host_of);
        std::set<int> talkers_per_host;
        size_t total = 0;
        for (int r = 0; r < n; ++r) {
          std::set<int> peer_hosts;
          a.rank = r;
          for (const Step& s : build_plan(Algo::Hier, a).steps)
            for (const Op& op : s.ops)
              if (op.peer >= 0 && l.host_of[op.peer] != l.host_of[r])
                peer_hosts.insert(l.host_of[op.peer]);
          EXPECT_LE(peer_hosts.size(), 3u) << l.name << " rank " << r;
          if (!peer_hosts.empty()) {
            EXPECT_TRUE(talkers_per_host.insert(l.host_of[r]).second)
                << l.name << " " << coll_name(coll) << ": two ranks of host " << l.host_of[r]
                << " talk across hosts";
          }
          size_t most = coll == Coll::AllReduce ? 3 : coll == Coll::Broadcast ? 2 : 1;
          EXPECT_LE(cross[r], most * a.count) << l.name << " rank " << r;
          total += cross[r];
        }
        size_t per_edge = coll == Coll::AllReduce ? 2 : 1;
        EXPECT_EQ(total, per_edge * (hosts - 1) * a.count)
            << l.name << " " << coll_name(coll) << " root " << root;
      }
  }
}

// Broadcast and reduce start/end the root's chain at the root itself.
TEST(HierPlans, RootIsItsHostsChainHead) {
  CollArgs a;
  a.coll = Coll::Broadcast;
  a.nranks = 6;
  a.count = 10;
  std::vector<int> hosts{0, 0, 0, 1, 1, 1};
  a.host_of = hosts.data();
  a.root = 4;
  a.rank = 4;
  std::set<int> peers;
  for (const Step& s : build_plan(Algo::Hier, a).steps)
    for (const Op& op : s.ops)
      if (op.kind == OpKind::Send) peers.insert(op.peer);
  EXPECT_EQ(peers, (std::set<int>{5, 0}));  // its chain successor and host 0's head
  a.rank = 3;                               // last in the root's chain 4, 5, 3: receives only
  for (const Step& s : build_plan(Algo::Hier, a).steps)
    for (const Op& op : s.ops) {
      EXPECT_EQ(op.kind, OpKind::Recv);
      EXPECT_EQ(op.peer, 5);
    }
}

// rhd all-reduce with a layout exchanges inside hosts first: with h hosts of
// k ranks (powers of two) a rank sends at most 2m/k across hosts, where the
// flat order sends 2m(1 - 1/h); and for any layout the total crossing
// traffic is never above the flat order's.
TEST(RhdPlans, AllReduceKeepsTheLargeExchangesInsideHosts) {
  for (auto [h, k] : std::vector<std::pair<int, int>>{{2, 2}, {2, 4}, {4, 2}, {4, 4}, {2, 8}}) {
    Layout l = contiguous(std::vector<int>(h, k));
    CollArgs a;
    a.coll = Coll::AllReduce;
    a.nranks = h * k;
    a.count = 64 * h * k;
    std::vector<size_t> aware = cross_host_sent(Algo::Rhd, a, l.host_of, l.host_of);
    std::vector<size_t> flat = cross_host_sent(Algo::Rhd, a, l.host_of, {});
    for (int r = 0; r < a.nranks; ++r) {
      EXPECT_EQ(aware[r], 2 * (a.count / k) * (h - 1) / h) << l.name << " rank " << r;
      EXPECT_EQ(flat[r], 2 * a.count * (h - 1) / h) << l.name << " rank " << r;
    }
  }
  for (const Layout& l : layouts()) {
    CollArgs a;
    a.coll = Coll::AllReduce;
    a.nranks = static_cast<int>(l.host_of.size());
    a.count = 64 * 64;
    size_t aware = 0, flat = 0;
    for (size_t v : cross_host_sent(Algo::Rhd, a, l.host_of, l.host_of)) aware += v;
    for (size_t v : cross_host_sent(Algo::Rhd, a, l.host_of, {})) flat += v;
    EXPECT_LE(aware, flat) << l.name;
  }
}

// One host (or no layout): rhd plans are exactly the flat ones.
TEST(RhdPlans, OneHostLayoutChangesNothing) {
  for (int n : {2, 5, 8, 12}) {
    std::vector<int> one(n, 42);
    for (int r = 0; r < n; ++r) {
      CollArgs a;
      a.coll = Coll::AllReduce;
      a.nranks = n;
      a.rank = r;
      a.count = 100;
      Plan flat = build_plan(Algo::Rhd, a);
      a.host_of = one.data();
      Plan same = build_plan(Algo::Rhd, a);
      ASSERT_EQ(flat.steps.size(), same.steps.size());
      for (size_t i = 0; i < flat.steps.size(); ++i) {
        ASSERT_EQ(flat.steps[i].ops.size(), same.steps[i].ops.size());
        for (size_t j = 0; j < flat.steps[i].ops.size(); ++j) {
          const Op &x = flat.steps[i].ops[j], &y = same.steps[i].ops[j];
          EXPECT_TRUE(x.kind == y.kind && x.peer == y.peer && x.src.buf == y.src.buf &&
                      x.src.offset == y.src.offset && x.src.count == y.src.count &&
                      x.dst.buf == y.dst.buf && x.dst.offset == y.dst.offset &&
                      x.dst.count == y.dst.count);
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Capabilities and names

TEST(PlanBuild, FamiliesServeTheDocumentedCollectives) {
  std::set<std::string> got;
  for (const Pair& p : supported_pairs())
    got.insert(std::string(algo_name(p.algo)) + ":" + coll_name(p.coll));
  std::set<std::string> want{
      "ring:allreduce",    "ring:reducescatter", "ring:allgather",       "ring:broadcast",
      "ring:reduce",       "tree:allreduce",     "tree:broadcast",       "tree:reduce",
      "tree:scatter",      "tree:gather",        "rhd:allreduce",        "rhd:reducescatter",
      "rhd:allgather",     "direct:allreduce",   "direct:reducescatter", "direct:allgather",
      "direct:alltoall",   "direct:scatter",     "direct:gather",        "direct:broadcast",
      "direct:reduce",     "hier:allreduce",     "hier:broadcast",       "hier:reduce",
      "twoshot:allreduce", "doubling:allreduce"};
  EXPECT_EQ(got, want);
}

TEST(PlanBuild, RejectsUnsupportedPairsNamingBoth) {
  for (int a = 0; a < kNumAlgos; ++a)
    for (int c = 0; c < kNumColls; ++c) {
      Algo algo = static_cast<Algo>(a);
      Coll coll = static_cast<Coll>(c);
      if (algo_supports(algo, coll)) continue;
      CollArgs args;
      args.coll = coll;
      args.nranks = 4;
      args.count = 8;
      try {
        build_plan(algo, args);
        ADD_FAILURE() << algo_name(algo) << "/" << coll_name(coll) << " did not throw";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), mycollInvalidUsage);
        std::string what = e.what();
        EXPECT_NE(what.find(algo_name(algo)), std::string::npos) << what;
        EXPECT_NE(what.find(coll_name(coll)), std::string::npos) << what;
      }
    }
}

TEST(PlanBuild, RejectsBadArguments) {
  auto code_of = [](Algo algo, CollArgs a) {
    try {
      build_plan(algo, a);
    } catch (const Error& e) {
      return e.code();
    }
    return mycollSuccess;
  };
  CollArgs a;
  a.coll = Coll::Broadcast;
  a.nranks = 4;
  a.count = 5;
  a.root = 4;
  EXPECT_EQ(code_of(Algo::Tree, a), mycollInvalidArgument);  // root out of range
  a.root = -1;
  EXPECT_EQ(code_of(Algo::Ring, a), mycollInvalidArgument);
  a.root = 0;
  a.rank = 4;
  EXPECT_EQ(code_of(Algo::Ring, a), mycollInvalidArgument);  // rank out of range
  a.rank = 0;
  a.nranks = 0;
  EXPECT_EQ(code_of(Algo::Ring, a), mycollInvalidArgument);
  a.nranks = 4;
  EXPECT_EQ(code_of(Algo::Ring, a), mycollSuccess);
  CollArgs g;
  g.coll = Coll::AllGather;
  g.nranks = 3;
  g.count = 5;
  g.stride = 4;  // stride < count
  EXPECT_EQ(code_of(Algo::Ring, g), mycollInvalidArgument);
  g.stride = 5;
  EXPECT_EQ(code_of(Algo::Rhd, g), mycollSuccess);
}

TEST(PlanBuild, BufferCounts) {
  CollArgs a;
  a.nranks = 4;
  a.count = 10;
  a.root = 2;
  a.rank = 1;
  a.coll = Coll::AllGather;
  EXPECT_EQ(buffer_counts(a).input, 10u);
  EXPECT_EQ(buffer_counts(a).output, 40u);
  a.stride = 16;
  EXPECT_EQ(buffer_counts(a).output, 3 * 16 + 10u);  // last block ends at count
  a.coll = Coll::Reduce;
  EXPECT_EQ(buffer_counts(a).output, 0u);
  a.rank = 2;
  EXPECT_EQ(buffer_counts(a).output, 10u);
  a.coll = Coll::Scatter;
  EXPECT_EQ(buffer_counts(a).input, 3 * 16 + 10u);
  a.rank = 0;
  EXPECT_EQ(buffer_counts(a).input, 0u);
  a.count = 0;
  EXPECT_EQ(buffer_counts(a).output, 0u);
}

TEST(PlanBuild, Names) {
  EXPECT_STREQ(coll_name(Coll::ReduceScatter), "reducescatter");
  EXPECT_STREQ(coll_name(Coll::SendRecv), "sendrecv");
  EXPECT_STREQ(algo_name(Algo::Rhd), "rhd");
  EXPECT_STREQ(algo_name(Algo::Direct), "direct");
  EXPECT_STREQ(algo_name(Algo::Hier), "hier");
  EXPECT_STREQ(algo_name(Algo::TwoShot), "twoshot");
  EXPECT_STREQ(algo_name(Algo::Doubling), "doubling");
}

// Step counts the docs promise (docs/algorithms.md), for a sample.
TEST(PlanBuild, StepCountsMatchDocs) {
  auto steps = [](Algo algo, Coll coll, int n, int rank, size_t count, size_t chunk = 0,
                  bool in_place = false, bool one_step = false) {
    CollArgs a;
    a.coll = coll;
    a.nranks = n;
    a.rank = rank;
    a.count = count;
    a.chunk = chunk;
    a.in_place = in_place;
    a.one_step = one_step;
    return build_plan(algo, a).steps.size();
  };
  EXPECT_EQ(steps(Algo::Ring, Coll::AllReduce, 8, 3, 64), 14u);                 // 2(n-1)
  EXPECT_EQ(steps(Algo::Rhd, Coll::AllReduce, 8, 3, 64), 6u);                   // 2 log2 n
  EXPECT_EQ(steps(Algo::Rhd, Coll::AllReduce, 6, 3, 64), 6u);                   // 2 log2 p + 2
  EXPECT_EQ(steps(Algo::Rhd, Coll::AllReduce, 6, 0, 64), 2u);                   // folded-away rank
  EXPECT_EQ(steps(Algo::Ring, Coll::AllGather, 5, 0, 7), 4u);                   // n-1
  EXPECT_EQ(steps(Algo::Direct, Coll::AllToAll, 5, 1, 7), 4u);                  // n-1
  EXPECT_EQ(steps(Algo::Direct, Coll::AllToAll, 5, 1, 7, 0, true), 5u);         // n-1 + copy step
  EXPECT_EQ(steps(Algo::Direct, Coll::AllToAll, 5, 1, 7, 0, false, true), 1u);  // one step
  EXPECT_EQ(steps(Algo::Direct, Coll::AllToAll, 5, 1, 7, 0, true, true), 2u);   // + copy step
  EXPECT_EQ(steps(Algo::Ring, Coll::Broadcast, 4, 3, 12, 4), 3u);    // last in chain: 3 chunks
  EXPECT_EQ(steps(Algo::Tree, Coll::Broadcast, 8, 0, 12), 1u);       // root: one send step
  EXPECT_EQ(steps(Algo::TwoShot, Coll::AllReduce, 8, 5, 64), 2u);    // reduce-scatter + all-gather
  EXPECT_EQ(steps(Algo::Direct, Coll::AllGather, 5, 2, 7), 1u);      // one exchange
  EXPECT_EQ(steps(Algo::Direct, Coll::ReduceScatter, 5, 2, 7), 2u);  // exchange + local reduce
  EXPECT_EQ(steps(Algo::Doubling, Coll::AllReduce, 8, 3, 64), 3u);   // log2 n
  EXPECT_EQ(steps(Algo::Doubling, Coll::AllReduce, 8, 3, 64, 0, true), 4u);  // + copy, in place
  EXPECT_EQ(steps(Algo::Doubling, Coll::AllReduce, 4, 0, 64, 0, true), 2u);  // even: no copy
  // The upper side of the last exchange reduces in a step of its own.
  EXPECT_EQ(steps(Algo::Doubling, Coll::AllReduce, 4, 3, 64, 0, true), 3u);
  EXPECT_EQ(steps(Algo::Doubling, Coll::AllReduce, 6, 1, 64, 0, true), 5u);  // + fold, copy, unfold
  EXPECT_EQ(steps(Algo::Doubling, Coll::AllReduce, 6, 0, 64), 2u);           // folded-away rank
}

// ---------------------------------------------------------------------------
// AlgoPolicy

TEST(AlgoPolicy, AutoByDefault) {
  for (const char* spec : {"", "auto", "  AUTO ", "\t"}) {
    AlgoPolicy p = AlgoPolicy::parse(spec);
    for (int c = 0; c < kNumColls; ++c)
      for (size_t bytes : {size_t(8), size_t(1) << 30})
        EXPECT_EQ(p.choose(static_cast<Coll>(c), 24, bytes),
                  AlgoPolicy::auto_choice(static_cast<Coll>(c), 24, bytes))
            << "spec '" << spec << "'";
  }
}

TEST(AlgoPolicy, GlobalFamilyAppliesWhereItServes) {
  AlgoPolicy p = AlgoPolicy::parse(" Tree ");
  EXPECT_EQ(p.choose(Coll::AllReduce, 8, 1 << 30), Algo::Tree);
  EXPECT_EQ(p.choose(Coll::Scatter, 8, 1 << 30), Algo::Tree);
  EXPECT_EQ(p.choose(Coll::AllGather, 8, 1 << 30),
            AlgoPolicy::auto_choice(Coll::AllGather, 8, 1 << 30));
  EXPECT_EQ(p.choose(Coll::AllToAll, 8, 16), Algo::Direct);
  AlgoPolicy q = AlgoPolicy::parse("rhd");
  EXPECT_EQ(q.choose(Coll::ReduceScatter, 8, 1 << 30), Algo::Rhd);
  EXPECT_EQ(q.choose(Coll::Broadcast, 8, 1 << 30),
            AlgoPolicy::auto_choice(Coll::Broadcast, 8, 1 << 30));
}

TEST(AlgoPolicy, PerCollectiveEntries) {
  AlgoPolicy p = AlgoPolicy::parse(" allreduce : RHD , Broadcast:tree,reduce_scatter:ring");
  EXPECT_EQ(p.choose(Coll::AllReduce, 64, size_t(1) << 30), Algo::Rhd);
  EXPECT_EQ(p.choose(Coll::Broadcast, 2, size_t(1) << 30), Algo::Tree);
  EXPECT_EQ(p.choose(Coll::ReduceScatter, 64, 8), Algo::Ring);
  EXPECT_EQ(p.choose(Coll::AllGather, 64, 8), AlgoPolicy::auto_choice(Coll::AllGather, 64, 8));
  // A global family plus per-collective overrides.
  AlgoPolicy q = AlgoPolicy::parse("ring,allreduce:tree,allgather:auto");
  EXPECT_EQ(q.choose(Coll::AllReduce, 8, 8), Algo::Tree);
  EXPECT_EQ(q.choose(Coll::Reduce, 8, 8), Algo::Ring);
  EXPECT_EQ(q.choose(Coll::AllGather, 8, 8), AlgoPolicy::auto_choice(Coll::AllGather, 8, 8));
  EXPECT_EQ(q.choose(Coll::Gather, 8, 8), AlgoPolicy::auto_choice(Coll::Gather, 8, 8));
}

TEST(AlgoPolicy, BadSpecsNameTheBadToken) {
  struct Bad {
    const char* spec;
    const char* token;
  };
  for (Bad b :
       {Bad{"rings", "rings"}, Bad{"allreduce:bogus", "bogus"}, Bad{"allreduc:ring", "allreduc"},
        Bad{"alltoall:ring", "alltoall"}, Bad{"allreduce:ring,,broadcast:tree", "empty"},
        Bad{"ring,", "empty"}, Bad{"allreduce:ring,allreduce:tree", "allreduce"},
        Bad{"ring,tree", "tree"}, Bad{"gather:rhd", "rhd"}, Bad{"sendrecv:direct", "sendrecv"},
        Bad{"allreduce:", "allreduce:"}, Bad{":ring", ":ring"}}) {
    try {
      AlgoPolicy::parse(b.spec);
      ADD_FAILURE() << "'" << b.spec << "' parsed";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), mycollInvalidArgument) << b.spec;
      EXPECT_NE(std::string(e.what()).find(b.token), std::string::npos)
          << b.spec << " -> " << e.what();
    }
  }
}

TEST(AlgoPolicy, AutoChoiceAlwaysServesTheCollective) {
  for (int c = 0; c < kNumColls; ++c) {
    Coll coll = static_cast<Coll>(c);
    if (coll == Coll::SendRecv) continue;  // built by the engine, not by a family
    for (int n : {1, 2, 3, 8, 17, 64, 1024})
      for (size_t bytes = 0; bytes <= (size_t(1) << 34); bytes = bytes ? bytes * 4 : 1) {
        Algo a = AlgoPolicy::auto_choice(coll, n, bytes);
        EXPECT_TRUE(algo_supports(a, coll))
            << coll_name(coll) << " n=" << n << " bytes=" << bytes << " -> " << algo_name(a);
      }
  }
  // The documented shape of the rule.
  // Host memory, 3 ranks: all-gather direct up to 256 KiB, reduce-scatter
  // up to 16 KiB, then the ring; never rhd's three-step fold. 4-8 ranks:
  // both direct up to 8 KiB, then the rule. A GPU communicator, or ranks
  // with a peer over a network transport (HostLinks::Network), keep the
  // rule.
  AlgoPolicy host;
  host.set_host_links(AlgoPolicy::HostLinks::Shm);
  for (size_t bytes : {size_t(0), size_t(12), size_t(16) << 10}) {
    EXPECT_EQ(host.choose(Coll::AllGather, 3, bytes), Algo::Direct) << bytes;
    EXPECT_EQ(host.choose(Coll::ReduceScatter, 3, bytes), Algo::Direct) << bytes;
    EXPECT_EQ(AlgoPolicy().choose(Coll::AllGather, 3, bytes), Algo::Rhd) << bytes;
  }
  EXPECT_EQ(host.choose(Coll::AllGather, 3, 256 << 10), Algo::Direct);
  EXPECT_EQ(host.choose(Coll::AllGather, 3, (256 << 10) + 12), Algo::Ring);
  EXPECT_EQ(host.choose(Coll::ReduceScatter, 3, (16 << 10) + 12), Algo::Ring);
  EXPECT_EQ(host.choose(Coll::ReduceScatter, 3, 256 << 10), Algo::Ring);
  EXPECT_EQ(host.choose(Coll::AllReduce, 3, 256 << 10),
            AlgoPolicy().choose(Coll::AllReduce, 3, 256 << 10));
  for (int n : {4, 5, 6, 7, 8}) {
    for (Coll c : {Coll::AllGather, Coll::ReduceScatter}) {
      EXPECT_EQ(host.choose(c, n, 0), Algo::Direct) << n;
      EXPECT_EQ(host.choose(c, n, size_t(n)), Algo::Direct) << n;
      EXPECT_EQ(host.choose(c, n, 8 << 10), Algo::Direct) << n;
      EXPECT_EQ(host.choose(c, n, (8 << 10) + size_t(n)), Algo::Rhd) << n;
      EXPECT_EQ(host.choose(c, n, 256 << 10), Algo::Rhd) << n;
      EXPECT_EQ(host.choose(c, n, 1 << 20), Algo::Ring) << n;
      EXPECT_EQ(AlgoPolicy().choose(c, n, size_t(n)), Algo::Rhd) << n;
    }
  }
  for (int n : {2, 9, 16}) {  // outside 3-8 ranks: the rule
    EXPECT_EQ(host.choose(Coll::AllGather, n, 64), AlgoPolicy::auto_choice(Coll::AllGather, n, 64))
        << n;
    EXPECT_EQ(host.choose(Coll::ReduceScatter, n, 64),
              AlgoPolicy::auto_choice(Coll::ReduceScatter, n, 64))
        << n;
  }
  AlgoPolicy network;  // a peer over socket, ib or ucx: the rule at every size
  network.set_host_links(AlgoPolicy::HostLinks::Network);
  for (int n : {3, 4, 8})
    for (Coll c : {Coll::AllGather, Coll::ReduceScatter})
      for (size_t bytes : {size_t(64), size_t(8) << 10, size_t(256) << 10})
        EXPECT_EQ(network.choose(c, n, bytes), AlgoPolicy::auto_choice(c, n, bytes))
            << coll_name(c) << " n=" << n << " bytes=" << bytes;
  // All-reduce across a network: recursive doubling up to 32 KiB from 3
  // ranks on (two ranks: the rule's one shot, the same exchange); shm-only
  // and GPU communicators keep their rule.
  for (int n : {3, 4, 5, 8, 16, 64}) {
    for (size_t bytes : {size_t(0), size_t(8), size_t(4) << 10, size_t(32) << 10})
      EXPECT_EQ(network.choose(Coll::AllReduce, n, bytes), Algo::Doubling) << n << " " << bytes;
    EXPECT_EQ(network.choose(Coll::AllReduce, n, (32 << 10) + 4),
              AlgoPolicy::auto_choice(Coll::AllReduce, n, (32 << 10) + 4))
        << n;
    EXPECT_NE(AlgoPolicy().choose(Coll::AllReduce, n, 8), Algo::Doubling) << n;
  }
  EXPECT_EQ(network.choose(Coll::AllReduce, 2, 8), Algo::Direct);
  // Host memory over shm with a core per rank: doubling up to 2 KiB at 4
  // and 8 ranks, up to 512 B above 8; 2, 3 and 5-7 ranks keep the rule.
  for (int n : {4, 8}) {
    EXPECT_EQ(host.choose(Coll::AllReduce, n, 8), Algo::Doubling) << n;
    EXPECT_EQ(host.choose(Coll::AllReduce, n, 2048), Algo::Doubling) << n;
    EXPECT_EQ(host.choose(Coll::AllReduce, n, 2052),
              AlgoPolicy::auto_choice(Coll::AllReduce, n, 2052))
        << n;
  }
  for (int n : {9, 16, 33}) {
    EXPECT_EQ(host.choose(Coll::AllReduce, n, 512), Algo::Doubling) << n;
    EXPECT_EQ(host.choose(Coll::AllReduce, n, 516),
              AlgoPolicy::auto_choice(Coll::AllReduce, n, 516))
        << n;
  }
  for (int n : {2, 3, 5, 6, 7})
    EXPECT_EQ(host.choose(Coll::AllReduce, n, 8), AlgoPolicy::auto_choice(Coll::AllReduce, n, 8))
        << n;
  AlgoPolicy net_forced = AlgoPolicy::parse("allreduce:rhd");
  net_forced.set_host_links(AlgoPolicy::HostLinks::Network);
  EXPECT_EQ(net_forced.choose(Coll::AllReduce, 4, 8), Algo::Rhd);
  AlgoPolicy forced = AlgoPolicy::parse("all_gather:rhd");
  forced.set_host_links(AlgoPolicy::HostLinks::Shm);
  EXPECT_EQ(forced.choose(Coll::AllGather, 3, 64), Algo::Rhd);
  EXPECT_EQ(forced.choose(Coll::AllGather, 6, 64), Algo::Rhd);
  EXPECT_EQ(forced.choose(Coll::ReduceScatter, 6, 64), Algo::Direct);
  // The one shot up to its measured limit per rank count, then rhd.
  for (auto [n, limit] : std::vector<std::pair<int, size_t>>{
           {2, 256 * 1024}, {3, 32 * 1024}, {4, 2048}, {6, 2048}, {7, 512}, {8, 512}}) {
    EXPECT_EQ(AlgoPolicy::auto_choice(Coll::AllReduce, n, 8), Algo::Direct) << n;
    EXPECT_EQ(AlgoPolicy::auto_choice(Coll::AllReduce, n, limit), Algo::Direct) << n;
    EXPECT_EQ(AlgoPolicy::auto_choice(Coll::AllReduce, n, limit + 4),
              n == 2 ? Algo::Ring : Algo::Rhd)
        << n;
  }
  EXPECT_EQ(AlgoPolicy::auto_choice(Coll::AllReduce, 16, 8), Algo::Rhd);
  EXPECT_EQ(AlgoPolicy::auto_choice(Coll::AllReduce, 32, 1024), Algo::Rhd);
  EXPECT_EQ(AlgoPolicy::auto_choice(Coll::AllReduce, 8, 128 * 1024), Algo::Rhd);
  EXPECT_EQ(AlgoPolicy::auto_choice(Coll::AllReduce, 8, size_t(1) << 30), Algo::Ring);
  EXPECT_EQ(AlgoPolicy::auto_choice(Coll::AllReduce, 64, size_t(2) << 20), Algo::Tree);
  EXPECT_EQ(AlgoPolicy::auto_choice(Coll::AllToAll, 64, 8), Algo::Direct);
  EXPECT_EQ(AlgoPolicy::auto_choice(Coll::Gather, 64, 64 * 1024), Algo::Tree);
  EXPECT_EQ(AlgoPolicy::auto_choice(Coll::Gather, 4, 64), Algo::Direct);
}

// Several hosts: tree choices become hier; one host (or one rank per host)
// is exactly the single-host rule.
// The host all-to-all's one step (docs/algorithms.md, the host rule):
// one host, 3-8 ranks, blocks of at most 16 KiB.
TEST(AlgoPolicy, AllToAllOneStepRule) {
  AlgoPolicy p = AlgoPolicy::parse("");
  for (int n : {3, 4, 5, 8}) {
    EXPECT_TRUE(p.alltoall_one_step(n, 0)) << n;
    EXPECT_TRUE(p.alltoall_one_step(n, 16 * 1024)) << n;
    EXPECT_FALSE(p.alltoall_one_step(n, 16 * 1024 + 1)) << n;
  }
  for (int n : {1, 2, 9, 64}) EXPECT_FALSE(p.alltoall_one_step(n, 8)) << n;
  p.set_hosts(2);
  EXPECT_FALSE(p.alltoall_one_step(4, 8));
}

TEST(AlgoPolicy, MultiHostRule) {
  for (int c = 0; c < kNumColls; ++c) {
    Coll coll = static_cast<Coll>(c);
    for (int n : {1, 2, 3, 8, 17, 64})
      for (size_t bytes = 0; bytes <= (size_t(1) << 34); bytes = bytes ? bytes * 4 : 1) {
        Algo flat = AlgoPolicy::auto_choice(coll, n, bytes);
        EXPECT_EQ(AlgoPolicy::auto_choice_hosts(coll, n, 1, bytes), flat);
        EXPECT_EQ(AlgoPolicy::auto_choice_hosts(coll, n, n, bytes), flat);
        for (int hosts : {2, 4}) {
          if (hosts >= n) continue;
          Algo a = AlgoPolicy::auto_choice_hosts(coll, n, hosts, bytes);
          if (coll != Coll::SendRecv) EXPECT_TRUE(algo_supports(a, coll));
          EXPECT_EQ(a, flat == Algo::Tree && algo_supports(Algo::Hier, coll) ? Algo::Hier : flat)
              << coll_name(coll) << " n=" << n << " hosts=" << hosts << " bytes=" << bytes;
        }
      }
  }
  EXPECT_EQ(AlgoPolicy::auto_choice_hosts(Coll::AllReduce, 64, 4, size_t(2) << 20), Algo::Hier);
  EXPECT_EQ(AlgoPolicy::auto_choice_hosts(Coll::Broadcast, 8, 2, 1024), Algo::Hier);
  EXPECT_EQ(AlgoPolicy::auto_choice_hosts(Coll::Gather, 64, 4, 1024), Algo::Tree);
  EXPECT_EQ(AlgoPolicy::auto_choice_hosts(Coll::AllReduce, 8, 2, size_t(1) << 30), Algo::Ring);
  // Through a policy: set_hosts, and forced families win.
  AlgoPolicy p = AlgoPolicy::parse("");
  p.set_hosts(2);
  EXPECT_EQ(p.choose(Coll::Reduce, 8, 1024), Algo::Hier);
  AlgoPolicy q = AlgoPolicy::parse("tree");
  q.set_hosts(2);
  EXPECT_EQ(q.choose(Coll::Reduce, 8, 1024), Algo::Tree);
  AlgoPolicy h = AlgoPolicy::parse("hier");
  EXPECT_EQ(h.choose(Coll::AllReduce, 8, size_t(1) << 30), Algo::Hier);
  EXPECT_EQ(h.choose(Coll::AllGather, 8, 8), AlgoPolicy::auto_choice(Coll::AllGather, 8, 8));
  EXPECT_EQ(AlgoPolicy::parse("broadcast:HIER").choose(Coll::Broadcast, 3, 8), Algo::Hier);
  EXPECT_THROW(AlgoPolicy::parse("allgather:hier"), Error);
}

// ---------------------------------------------------------------------------
// The simulator catches broken plans (so the sweep above can fail).

Op send_op(int peer, Slice src) {
  Op o;
  o.kind = OpKind::Send;
  o.peer = peer;
  o.src = src;
  return o;
}
Op recv_op(int peer, Slice dst, OpKind k = OpKind::Recv, Slice src = {}) {
  Op o;
  o.kind = k;
  o.peer = peer;
  o.dst = dst;
  o.src = src;
  return o;
}
Plan plan_of(std::vector<std::vector<Op>> steps, size_t scratch = 0) {
  Plan p;
  for (auto& ops : steps) p.steps.push_back(Step{ops});
  p.scratch_count = scratch;
  return p;
}
std::vector<sim::RankMemory> memories(int n, size_t count) {
  std::vector<sim::RankMemory> m(n);
  for (auto& r : m) {
    r.arena.assign(2 * count, 0);
    r.output_base = count;
    r.counts = {count, count};
  }
  return m;
}

TEST(PlanSimulator, DetectsDeadlockUnderRendezvous) {
  // Both ranks send first and receive in a later step: fine with buffering,
  // a deadlock without.
  Slice in{Buf::Input, 0, 4}, out{Buf::Output, 0, 4};
  std::vector<Plan> plans{plan_of({{send_op(1, in)}, {recv_op(1, out)}}),
                          plan_of({{send_op(0, in)}, {recv_op(0, out)}})};
  auto mem = memories(2, 4);
  std::string err = sim::execute(plans, mem);
  EXPECT_NE(err.find("deadlock"), std::string::npos) << err;
  // The same exchange in one step completes.
  plans = {plan_of({{send_op(1, in), recv_op(1, out)}}),
           plan_of({{send_op(0, in), recv_op(0, out)}})};
  EXPECT_EQ(sim::execute(plans, mem), "");
}

TEST(PlanSimulator, DetectsMismatchesHazardsAndBounds) {
  Slice in{Buf::Input, 0, 4}, out{Buf::Output, 0, 4};
  auto run = [](std::vector<Plan> plans) {
    auto mem = memories(static_cast<int>(plans.size()), 4);
    return sim::execute(plans, mem);
  };
  // count mismatch
  EXPECT_NE(run({plan_of({{send_op(1, in)}}), plan_of({{recv_op(0, Slice{Buf::Output, 0, 3})}})})
                .find("count mismatch"),
            std::string::npos);
  // unmatched send
  EXPECT_NE(run({plan_of({{send_op(1, in)}}), plan_of({})}).find("unmatched send"),
            std::string::npos);
  // out of bounds
  EXPECT_NE(run({plan_of({{send_op(1, Slice{Buf::Input, 2, 4})}}), plan_of({{recv_op(0, out)}})})
                .find("out of bounds"),
            std::string::npos);
  EXPECT_NE(
      run({plan_of({{send_op(1, Slice{Buf::Scratch, 0, 4})}}, 3), plan_of({{recv_op(0, out)}})})
          .find("out of bounds"),
      std::string::npos);
  // count 0 op
  EXPECT_NE(run({plan_of({{send_op(1, Slice{Buf::Input, 0, 0})}}),
                 plan_of({{recv_op(0, Slice{Buf::Output, 0, 0})}})})
                .find("count 0"),
            std::string::npos);
  // intra-step hazard: a receive into what a send of the same step reads
  EXPECT_NE(run({plan_of({{send_op(1, out), recv_op(1, out)}}),
                 plan_of({{send_op(0, in), recv_op(0, out)}})})
                .find("hazard"),
            std::string::npos);
  // bad peer
  EXPECT_NE(run({plan_of({{send_op(0, in)}}), plan_of({})}).find("bad peer"), std::string::npos);
}

TEST(PlanSimulator, RunCaseCatchesWrongResults) {
  // A correct plan passes, and the reference is not trivially satisfied: a
  // ring allgather that skips its self copy fails out of place only.
  sim::Case c;
  c.algo = Algo::Ring;
  c.args.coll = Coll::AllGather;
  c.args.nranks = 3;
  c.args.count = 5;
  EXPECT_EQ(sim::run_case(c), "");
  std::vector<Plan> plans;
  std::vector<sim::RankMemory> mem(3);
  for (int r = 0; r < 3; ++r) {
    CollArgs a = c.args;
    a.rank = r;
    Plan p = build_plan(c.algo, a);
    int copies = 0;
    for (Step& st : p.steps)
      for (auto it = st.ops.begin(); it != st.ops.end();)
        it = it->kind == OpKind::Copy ? (++copies, st.ops.erase(it)) : it + 1;
    ASSERT_EQ(copies, 1);
    plans.push_back(p);
    mem[r].counts = buffer_counts(a);
    mem[r].arena.assign(5 + 15, 0);
    mem[r].output_base = 5;
    for (int i = 0; i < 5; ++i) mem[r].arena[i] = 100 * (r + 1) + i;
  }
  ASSERT_EQ(sim::execute(plans, mem), "");
  // Rank 0 never got its own block into Output.
  EXPECT_NE(mem[0].arena[5], 100u);
}

}  // namespace
}  // namespace mycoll
