// RDMA verbs transport tests.
//
// Anywhere: availability reporting, MYCOLL_NET=ib without a device, the
// MYCOLL_IB_HCA matcher. With an RDMA device (normally inside the Soft-RoCE VM
// of scripts/softroce/softroce.sh, see the rdma_softroce ctest): every
// collective x algorithm over MYCOLL_TRANSPORT=ib with 2 and 3 ranks, every
// element checked; a SIGKILLed peer and a QP forced into error end in errors
// within MYCOLL_TIMEOUT; the registration cache; the rank-death matrix's ib
// cells (tests/common/death_matrix.h: every fault x collective, and a rank
// missing at init). Without a device those skip.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "comm/comm.h"
#include "comm/registry.h"
#include "common/coll_check.h"
#include "common/death_matrix.h"
#include "common/failure_check.h"
#include "common/multiproc.h"
#include "transports/ibverbs/ib_device.h"
#include "transports/ibverbs/ib_transport.h"
#include "transports/transport.h"

using namespace mycoll_test;
using Clock = std::chrono::steady_clock;

namespace {

const char* kSkip =
    "no RDMA device; run via scripts/softroce/softroce.sh (ctest -R rdma_softroce) for Soft-RoCE";

// Probed in a child so the test process itself never opens a device before
// forking ranks.
bool device_present(std::string* why) {
  LaunchOptions opt;
  opt.nranks = 1;
  opt.init_comm = false;
  opt.timeout_s = 60;
  auto res = run_ranks(opt, [](mycollComm_t, int, int, const mycollUniqueId&) {
    return mycoll::ib_available(mycoll::Config::from_env().ib.hca, nullptr) ? 0 : 1;
  });
  bool ok = res.size() == 1 && res[0].exit_code == 0;
  if (!ok && why) *why = kSkip;
  return ok;
}

bool have_device() {
  static const bool present = device_present(nullptr);
  return present;
}

#define REQUIRE_RDMA() \
  if (!have_device()) GTEST_SKIP() << kSkip

bool contains(const char* s, const char* what) { return s && std::strstr(s, what) != nullptr; }

// ---------------------------------------------------------------- anywhere --

TEST(RdmaAvailability, ReportsAReason) {
  LaunchOptions opt;
  opt.nranks = 1;
  opt.init_comm = false;
  auto res = run_ranks(opt, [](mycollComm_t, int, int, const mycollUniqueId&) {
    std::string why;
    bool ok = mycoll::ib_available("", &why);
    if (ok) return check(why.empty(), "no reason when available: " + why) ? 0 : 1;
    // Without libibverbs, without devices, or with ports down: a specific reason.
    bool specific = why.find("libibverbs.so.1 not found") != std::string::npos ||
                    why.find("no RDMA device") != std::string::npos ||
                    why.find("no active RDMA port") != std::string::npos;
    return check(specific, "reason names what is missing: '" + why + "'") ? 0 : 1;
  });
  EXPECT_EQ(describe_failures(res), "");
}

TEST(RdmaAvailability, ExcludedDevicesAreNotAvailable) {
  LaunchOptions opt;
  opt.nranks = 1;
  opt.init_comm = false;
  opt.env = {{"MYCOLL_IB_HCA", "=no_such_hca"}};
  auto res = run_ranks(opt, [](mycollComm_t, int, int, const mycollUniqueId&) {
    std::string why;
    bool ok = mycoll::ib_available(mycoll::Config::from_env().ib.hca, &why);
    return check(!ok && !why.empty(), "MYCOLL_IB_HCA=no_such_hca leaves nothing: '" + why + "'")
               ? 0
               : 1;
  });
  EXPECT_EQ(describe_failures(res), "");
}

TEST(RdmaAvailability, NetIbWithoutDeviceIsInvalidUsageAtInit) {
  if (have_device()) GTEST_SKIP() << "this host has an RDMA device";
  for (const char* var : {"MYCOLL_NET", "MYCOLL_TRANSPORT"}) {
    LaunchOptions opt;
    opt.nranks = 2;
    opt.init_comm = false;
    opt.env = {{var, "ib"}, {"MYCOLL_TIMEOUT", "20"}};
    opt.timeout_s = 60;
    auto res = run_ranks(opt, [&](mycollComm_t, int rank, int n, const mycollUniqueId& id) {
      mycollComm_t comm = nullptr;
      mycollResult_t r = mycollCommInitRank(&comm, n, id, rank);
      const char* msg = mycollGetLastError(nullptr);
      check(r == mycollInvalidUsage,
            std::string(var) + "=ib: expected mycollInvalidUsage, got " + mycollGetErrorString(r));
      check(contains(msg, (std::string(var) + "=ib").c_str()),
            std::string("message names ") + var + ": " + (msg ? msg : ""));
      check(comm == nullptr, "no communicator");
      return 0;
    });
    EXPECT_EQ(describe_failures(res), "") << var;
  }
}

TEST(RdmaHcaSpec, MatchesLikeNcclIbHca) {
  using mycoll::ib_hca_matches;
  EXPECT_TRUE(ib_hca_matches("", "mlx5_0", 1));
  EXPECT_TRUE(ib_hca_matches("mlx5", "mlx5_3", 1));
  EXPECT_FALSE(ib_hca_matches("mlx5", "rxe0", 1));
  EXPECT_TRUE(ib_hca_matches("mlx5_0:1,rxe", "rxe0", 2));
  EXPECT_TRUE(ib_hca_matches("mlx5_0:1", "mlx5_0", 1));
  EXPECT_FALSE(ib_hca_matches("mlx5_0:1", "mlx5_0", 2));
  EXPECT_FALSE(ib_hca_matches("=mlx5_1", "mlx5_10", 1));
  EXPECT_TRUE(ib_hca_matches("=mlx5_1", "mlx5_1", 1));
  EXPECT_FALSE(ib_hca_matches("^mlx4", "mlx4_0", 1));
  EXPECT_TRUE(ib_hca_matches("^mlx4", "rxe0", 1));
  EXPECT_FALSE(ib_hca_matches("^=rxe0:1", "rxe0", 1));
  EXPECT_TRUE(ib_hca_matches("^=rxe0:1", "rxe0", 2));
}

// ------------------------------------------------------- with a device (VM) --

using Param = std::tuple<int /*nranks*/, std::string /*algo*/>;
class RdmaCollectives : public ::testing::TestWithParam<Param> {};

TEST_P(RdmaCollectives, EveryElementMatchesReference) {
  REQUIRE_RDMA();
  // Not a structured binding: clang (the sanitizer builds) cannot capture one.
  const int nranks = std::get<0>(GetParam());
  const auto algo = std::get<1>(GetParam());
  LaunchOptions opt;
  opt.nranks = nranks;
  opt.env = {{"MYCOLL_TRANSPORT", "ib"},
             {"MYCOLL_ALGO", algo},
             {"MYCOLL_TIMEOUT", "60"},
             {"MYCOLL_CHUNK_BYTES", "16K"},
             // A small ring: many wrap-arounds and credit returns per message.
             {"MYCOLL_IB_BUFFER_BYTES", nranks == 3 ? "64K" : "256K"}};
  opt.timeout_s = 400;
  auto res = run_ranks(opt, [&](mycollComm_t comm, int rank, int n, const mycollUniqueId&) {
    const CollKind kinds[] = {CollKind::AllReduce, CollKind::Broadcast,     CollKind::Reduce,
                              CollKind::AllGather, CollKind::ReduceScatter, CollKind::AllToAll,
                              CollKind::Scatter,   CollKind::Gather,        CollKind::SendRecvRing};
    if (!check(
            mycoll::registry_peek(comm)->conns[(rank + 1) % n] &&
                mycoll::registry_peek(comm)->conns[(rank + 1) % n]->describe().rfind("ib ", 0) == 0,
            "peer connection is ib: " +
                mycoll::registry_peek(comm)->conns[(rank + 1) % n]->describe()))
      return 1;
    MemOps mem = host_mem();
    int seed = 0;
    for (CollKind kind : kinds) {
      if (!algo_serves(algo, kind)) continue;
      struct Case {
        mycollDataType_t t;
        mycollRedOp_t op;
        size_t count;
        bool in_place;
      };
      const Case cases[] = {{mycollFloat32, mycollSum, 1, false},
                            {mycollInt32, mycollMax, 1001, true},
                            {mycollFloat64, mycollProd, 37, false},
                            {mycollFloat32, mycollSum, 100003, false}};
      for (const Case& k : cases) {
        if (kind == CollKind::SendRecvRing && k.in_place) continue;
        CheckCase c{kind,
                    k.t,
                    kind_reduces(kind) ? k.op : mycollSum,
                    k.count,
                    kind_rooted(kind) ? n - 1 : 0,
                    k.in_place,
                    ++seed % 17};
        std::string err;
        if (!check(run_and_check(comm, c, mem, &err), err)) return 1;
      }
    }
    return 0;
  });
  EXPECT_EQ(describe_failures(res), "");
}

INSTANTIATE_TEST_SUITE_P(Ib, RdmaCollectives,
                         ::testing::Combine(::testing::Values(2, 3),
                                            ::testing::Values("auto", "ring", "tree", "rhd")),
                         [](const ::testing::TestParamInfo<Param>& i) {
                           return std::to_string(std::get<0>(i.param)) + "ranks_" +
                                  std::get<1>(i.param);
                         });

TEST(RdmaLarge, AllReduceManyRingWraps) {
  REQUIRE_RDMA();
  LaunchOptions opt;
  opt.nranks = 2;
  opt.env = {
      {"MYCOLL_TRANSPORT", "ib"}, {"MYCOLL_TIMEOUT", "60"}, {"MYCOLL_IB_BUFFER_BYTES", "32K"}};
  opt.timeout_s = 300;
  auto res = run_ranks(opt, [](mycollComm_t comm, int rank, int n, const mycollUniqueId&) {
    const size_t count = (1 << 20) + 3;
    std::vector<int32_t> a(count), b(count);
    for (size_t i = 0; i < count; ++i) a[i] = static_cast<int32_t>(i * 7 + rank);
    for (int iter = 0; iter < 2; ++iter) {
      if (!check(mycollAllReduce(a.data(), b.data(), count, mycollInt32, mycollSum, comm,
                                 nullptr) == mycollSuccess,
                 std::string("allreduce: ") + mycollGetLastError(comm)))
        return 1;
      for (size_t i = 0; i < count; ++i) {
        int32_t want = static_cast<int32_t>(n * (i * 7) + n * (n - 1) / 2);
        if (!check(b[i] == want, "element " + std::to_string(i) + ": got " + std::to_string(b[i]) +
                                     " want " + std::to_string(want)))
          return 1;
      }
    }
    return 0;
  });
  EXPECT_EQ(describe_failures(res), "");
}

TEST(RdmaFailures, KilledPeerGivesErrorWithinTimeout) {
  REQUIRE_RDMA();
  LaunchOptions opt;
  opt.nranks = 3;
  opt.env = {{"MYCOLL_TRANSPORT", "ib"}, {"MYCOLL_TIMEOUT", "15"}, {"MYCOLL_IB_TIMEOUT", "12"}};
  opt.timeout_s = 120;
  expect_killed_rank_detected(opt, 2, 15 + 10);
}

TEST(RdmaFailures, QpForcedIntoErrorIsAnError) {
  REQUIRE_RDMA();
  LaunchOptions opt;
  opt.nranks = 2;
  const double timeout = 15;
  opt.env = {{"MYCOLL_TRANSPORT", "ib"}, {"MYCOLL_TIMEOUT", "15"}, {"MYCOLL_IB_TIMEOUT", "12"}};
  opt.timeout_s = 120;
  auto res = run_ranks(opt, [&](mycollComm_t comm, int rank, int, const mycollUniqueId&) {
    std::vector<float> a(50000, 2.0f), b(50000);
    check(mycollAllReduce(a.data(), b.data(), a.size(), mycollFloat32, mycollSum, comm, nullptr) ==
                  mycollSuccess &&
              b[49999] == 4.0f,
          "allreduce before the fault");
    if (rank == 1)
      check(mycoll::ib_force_qp_error(mycoll::registry_peek(comm)->conns[0].get()),
            "forced the QP to ERR");
    auto t0 = Clock::now();
    mycollResult_t r =
        mycollAllReduce(a.data(), b.data(), a.size(), mycollFloat32, mycollSum, comm, nullptr);
    double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    check(r == mycollRemoteError || r == mycollTimeout,
          std::string("error after the QP fault, got ") + mycollGetErrorString(r));
    check(dt < timeout + 10, "returned within the timeout (" + std::to_string(dt) + " s)");
    const char* msg = mycollGetLastError(comm);
    check(contains(msg, "rank"), std::string("message names the peer: ") + msg);
    std::fprintf(stderr, "[rank %d] after QP fault: %s (%.2f s): %s\n", rank,
                 mycollGetErrorString(r), dt, msg);
    return 0;
  });
  EXPECT_EQ(describe_failures(res), "");
}

// The death matrix over ib: the host transports' cells (no hang, the code,
// the dead rank named by every survivor, abort from a second thread within
// 5 s), with a longer MYCOLL_TIMEOUT and more slack for the emulated VM
// (under TSan there a stopped-rank cell's survivor took 13.04 s: 8 s, the
// 2.5 s settle wait, 2.5 s of emulation; session 32's CI).
constexpr double kIbDeathTimeout = 8;
constexpr double kIbDeathSlack = 6;

class RdmaDeathMatrix : public ::testing::TestWithParam<death::Cell> {};

TEST_P(RdmaDeathMatrix, SurvivorsGetErrorsNamingTheDeadRank) {
  REQUIRE_RDMA();
  death::run_loop_cell(GetParam(), kIbDeathTimeout, {}, kIbDeathSlack);
}

INSTANTIATE_TEST_SUITE_P(
    Ib, RdmaDeathMatrix,
    ::testing::Combine(::testing::Values(death::Fault::Kill, death::Fault::Stop,
                                         death::Fault::Exit0, death::Fault::Exit1,
                                         death::Fault::Abort),
                       ::testing::Values("ib"),
                       ::testing::Values(death::Op::AllReduce, death::Op::Broadcast,
                                         death::Op::AllToAll, death::Op::SendRecv)),
    death::cell_name);

TEST(RdmaDeathAtInit, MissingRankIsNamed) {
  REQUIRE_RDMA();
  death::run_init_cell("ib", kIbDeathTimeout);
}

TEST(RdmaRegCache, ReusesCoveringRegistrationsAndInvalidates) {
  REQUIRE_RDMA();
  LaunchOptions opt;
  opt.nranks = 1;
  opt.init_comm = false;
  auto res = run_ranks(opt, [](mycollComm_t, int, int, const mycollUniqueId&) {
    auto dev = mycoll::IbDevice::open(mycoll::Config::from_env().ib);
    mycoll::RegCache cache(dev->api, dev->pd, 3);
    const size_t len = 1 << 20;
    char* p = static_cast<char*>(
        mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    const int acc = IBV_ACCESS_LOCAL_WRITE;
    ibv_mr* whole = cache.get(p, len, acc);
    check(cache.misses() == 1 && cache.hits() == 0, "first get registers");
    ibv_mr* inner = cache.get(p + 4096 + 17, 1000, acc);
    check(inner == whole && cache.hits() == 1, "a sub-range hits the covering entry");
    check(reinterpret_cast<char*>(whole->addr) <= p &&
              reinterpret_cast<char*>(whole->addr) + whole->length >= p + len,
          "MR covers the range");
    ibv_mr* remote = cache.get(p, 4096, acc | IBV_ACCESS_REMOTE_WRITE);
    check(remote != whole && cache.misses() == 2, "stronger access needs a new registration");
    cache.put(inner);
    cache.put(whole);
    cache.put(remote);
    cache.invalidate(p, len);
    check(cache.entries() == 0, "invalidate drops unreferenced entries");
    // LRU bound: more distinct ranges than entries allowed.
    for (int i = 0; i < 8; ++i) cache.put(cache.get(p + i * 65536, 4096, acc));
    check(cache.entries() <= 3, "at most max_entries cached: " + std::to_string(cache.entries()));
    cache.invalidate(p, len);
    munmap(p, len);
    return failures() == 0 ? 0 : 1;
  });
  EXPECT_EQ(describe_failures(res), "");
}

}  // namespace
