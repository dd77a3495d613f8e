// Ranks on several "hosts": network namespaces joined by a bridge, each with
// its own IP and host identity (netns_hosts.h). Same-host peers use shm,
// others sockets.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/coll_check.h"
#include "common/multiproc.h"
#include "netns_hosts.h"

using namespace mycoll_test;

namespace {

const int kHosts = 3;
NetnsHosts g_hosts;

class MultiHost : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { skip_reason_ = g_hosts.up("mh", kHosts, "10.231.0"); }
  static void TearDownTestSuite() { g_hosts.down(); }
  void SetUp() override {
    if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_;
  }
  static std::string skip_reason_;
};
std::string MultiHost::skip_reason_;

void enter_host(int host) { g_hosts.enter(host); }

// host_of[r]: the host rank r lives on. Every collective x dtype x count x
// in/out of place under each MYCOLL_ALGO of algos (others stay automatic).
void run_hosts(const std::vector<int>& host_of, std::vector<const char*> algos) {
  for (const char* algo : algos) {
    LaunchOptions opt;
    opt.nranks = static_cast<int>(host_of.size());
    opt.env = {{"MYCOLL_TIMEOUT", "60"}, {"MYCOLL_ALGO", algo}, {"MYCOLL_CHUNK_BYTES", "8K"}};
    opt.pre_init = [host_of](int rank) { enter_host(host_of[rank]); };
    auto res = run_ranks(opt, [](mycollComm_t comm, int rank, int n, const mycollUniqueId&) {
      const CollKind kinds[] = {
          CollKind::AllReduce, CollKind::Broadcast,     CollKind::Reduce,
          CollKind::AllGather, CollKind::ReduceScatter, CollKind::AllToAll,
          CollKind::Scatter,   CollKind::Gather,        CollKind::SendRecvRing};
      MemOps mem = host_mem();
      int seed = 1;
      for (CollKind k : kinds)
        for (mycollDataType_t t : {mycollInt8, mycollFloat16, mycollFloat32, mycollUint64})
          for (size_t count : {size_t(1), size_t(999), size_t(70001)})
            for (bool inplace : {false, true}) {
              if (k == CollKind::SendRecvRing && inplace) continue;
              const mycollRedOp_t op = k == CollKind::Reduce ? mycollMax : mycollSum;
              CheckCase c{k, t, op, count, n - 1, inplace, seed++};
              std::string err;
              if (!check(run_and_check(comm, c, mem, &err), err)) return 1;
            }
      return 0;
    });
    std::string layout;
    for (int h : host_of) layout += std::to_string(h);
    EXPECT_EQ(describe_failures(res), "") << algo << ", host of each rank " << layout;
  }
}

// interleave: rank r lives on host r % hosts (rank order crosses hosts at
// every step; the library must reorder its rings), else host r / ranks_per_host.
void run_layout(int ranks_per_host, int hosts, bool interleave = false) {
  std::vector<int> host_of;
  for (int r = 0; r < ranks_per_host * hosts; ++r)
    host_of.push_back(interleave ? r % hosts : r / ranks_per_host);
  run_hosts(host_of, {"ring", "tree", "rhd", "hier", "auto"});
}

TEST_F(MultiHost, ThreeHostsTwoRanksEach) { run_layout(2, 3); }
TEST_F(MultiHost, TwoHostsOneRankEach) { run_layout(1, 2); }
TEST_F(MultiHost, ThreeHostsThreeRanksEach) { run_layout(3, 3); }
TEST_F(MultiHost, ThreeHostsTwoRanksEachInterleaved) { run_layout(2, 3, true); }
// Uneven hosts (1, 2 and 3 ranks), interleaved: the two-level algorithms'
// chains and host tree follow the layout, whatever the rank numbering.
TEST_F(MultiHost, ThreeHostsUnevenInterleaved) {
  run_hosts({2, 1, 2, 0, 1, 2}, {"hier", "rhd", "auto"});
}
// hier with the root on each host (count 1, 999, 70001; chunks of 8K stream
// through the chains): broadcast and reduce from every rank.
TEST_F(MultiHost, HierEveryRoot) {
  LaunchOptions opt;
  const std::vector<int> host_of{0, 0, 1, 1, 1};
  opt.nranks = static_cast<int>(host_of.size());
  opt.env = {{"MYCOLL_TIMEOUT", "60"}, {"MYCOLL_ALGO", "hier"}, {"MYCOLL_CHUNK_BYTES", "8K"}};
  opt.pre_init = [host_of](int rank) { enter_host(host_of[rank]); };
  auto res = run_ranks(opt, [](mycollComm_t comm, int, int n, const mycollUniqueId&) {
    int seed = 7;
    MemOps mem = host_mem();
    for (int root = 0; root < n; ++root)
      for (CollKind k : {CollKind::Broadcast, CollKind::Reduce})
        for (size_t count : {size_t(1), size_t(999), size_t(70001)})
          for (bool inplace : {false, true}) {
            CheckCase c{k, mycollFloat32, mycollSum, count, root, inplace, seed++};
            std::string err;
            if (!check(run_and_check(comm, c, mem, &err), err)) return 1;
          }
    return 0;
  });
  EXPECT_EQ(describe_failures(res), "");
}

}  // namespace

namespace {

// A forced transport that cannot reach a peer is an error at init naming it,
// on every rank, not a hang or a silent fallback.
TEST_F(MultiHost, ForcedShmAcrossHostsIsAnErrorAtInit) {
  LaunchOptions opt;
  opt.nranks = 2;
  opt.init_comm = false;
  opt.env = {{"MYCOLL_TIMEOUT", "20"}, {"MYCOLL_TRANSPORT", "shm"}};
  opt.pre_init = [](int rank) { enter_host(rank); };
  auto res = run_ranks(opt, [](mycollComm_t, int rank, int n, const mycollUniqueId& id) {
    mycollComm_t comm = nullptr;
    mycollResult_t r = mycollCommInitRank(&comm, n, id, rank);
    check(r == mycollInvalidUsage,
          std::string("forced shm across hosts: ") + mycollGetErrorString(r));
    std::string why = mycollGetLastError(nullptr);
    check(why.find("MYCOLL_TRANSPORT=shm") != std::string::npos &&
              why.find("rank " + std::to_string(1 - rank)) != std::string::npos,
          "message names the variable and the peer: " + why);
    check(comm == nullptr, "no communicator on failure");
    return 0;
  });
  EXPECT_EQ(describe_failures(res), "");
}

}  // namespace
