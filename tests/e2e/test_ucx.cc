// UCX transport on real processes: one host (MYCOLL_TRANSPORT=ucx, UCX picks
// shared memory or TCP) and several "hosts" (network namespaces joined by a
// bridge, MYCOLL_NET=ucx over TCP on the veth legs). Every collective x
// algorithm, data checked element by element; a dead or aborting peer is an
// error, not a hang. Skips where UCX is not built or namespaces can't be made.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/coll_check.h"
#include "common/failure_check.h"
#include "common/multiproc.h"
#include "netns_hosts.h"

using namespace mycoll_test;
using Clock = std::chrono::steady_clock;

namespace {

// Skips where UCX is not built or cannot be loaded here; CI fails instead
// (tests/unit/test_build_config.cc). Only dlopen in this parent process: the
// ranks are forked from it, and UCX itself is set up in them.
bool ucx_built(std::string* why) {
#if MYCOLL_HAVE_UCX
  if (dlopen("libucp.so.0", RTLD_NOW | RTLD_LOCAL)) return true;
  const char* e = dlerror();
  *why = std::string("UCX is built but libucp.so.0 does not load here: ") + (e ? e : "?");
  return false;
#else
  *why = "mycoll was built without UCX (no ucp/api/ucp.h at build time)";
  return false;
#endif
}

// Every collective on a few types, odd and even sizes, in and out of place.
int check_all_collectives(mycollComm_t comm, int n, int seed) {
  const CollKind kinds[] = {CollKind::AllReduce, CollKind::Broadcast,     CollKind::Reduce,
                            CollKind::AllGather, CollKind::ReduceScatter, CollKind::AllToAll,
                            CollKind::Scatter,   CollKind::Gather,        CollKind::SendRecvRing};
  MemOps mem = host_mem();
  for (CollKind k : kinds)
    for (mycollDataType_t t : {mycollInt8, mycollFloat32, mycollUint64})
      for (size_t count : {size_t(1), size_t(999), size_t(70001)})
        for (bool inplace : {false, true}) {
          if (k == CollKind::SendRecvRing && inplace) continue;
          mycollRedOp_t op = k == CollKind::Reduce ? mycollMax : mycollSum;
          CheckCase c{k, t, op, count, (seed + static_cast<int>(count)) % n, inplace, seed++};
          std::string err;
          if (!check(run_and_check(comm, c, mem, &err), err)) return 1;
        }
  return 0;
}

void run_algos(LaunchOptions opt, const std::string& what) {
  for (const char* algo : {"ring", "tree", "rhd", "auto"}) {
    opt.env["MYCOLL_ALGO"] = algo;
    auto res = run_ranks(opt, [](mycollComm_t comm, int, int n, const mycollUniqueId&) {
      return check_all_collectives(comm, n, 7);
    });
    EXPECT_EQ(describe_failures(res), "") << what << ", algo " << algo;
  }
}

// ---------------------------------------------------------------- one host

class UcxOneHost : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!ucx_built(&why)) GTEST_SKIP() << why;
  }
  static LaunchOptions options(int nranks) {
    LaunchOptions opt;
    opt.nranks = nranks;
    opt.timeout_s = 240;
    opt.env = {{"MYCOLL_TRANSPORT", "ucx"}, {"MYCOLL_TIMEOUT", "60"}, {"MYCOLL_CHUNK_BYTES", "8K"}};
    return opt;
  }
  // UCX over TCP on loopback with small messages and window.
  static LaunchOptions tcp_options(int nranks, const char* chunk, const char* window) {
    LaunchOptions opt = options(nranks);
    opt.env["UCX_TLS"] = "tcp";
    opt.env["UCX_NET_DEVICES"] = "lo";
    opt.env["MYCOLL_UCX_CHUNK_BYTES"] = chunk;
    opt.env["MYCOLL_UCX_WINDOW"] = window;
    return opt;
  }
};

TEST_F(UcxOneHost, TwoRanksUcxChoosesTransports) { run_algos(options(2), "2 ranks"); }

TEST_F(UcxOneHost, ThreeRanksSmallChunksOverTcp) {
  // Small UCX messages and window: many fragments per collective, full
  // windows, sends that wait for slots; TCP over loopback.
  run_algos(tcp_options(3, "1000", "2"), "3 ranks, tcp, 1000-byte chunks");
}

TEST_F(UcxOneHost, FourRanks) { run_algos(options(4), "4 ranks"); }

TEST_F(UcxOneHost, SharedMemoryWithErrorModeNone) {
  // UCX 1.13's shared-memory transports have no peer failure handler: they
  // are usable only with MYCOLL_UCX_ERROR_MODE=none.
  LaunchOptions opt = options(3);
  opt.env["UCX_TLS"] = "sm,self";
  opt.env["MYCOLL_UCX_ERROR_MODE"] = "none";
  const std::string dump = "/tmp/mycoll_ucx_sm_" + std::to_string(getpid()) + "_%r.json";
  opt.env["MYCOLL_TOPO_DUMP_FILE"] = dump;
  auto res = run_ranks(opt, [&](mycollComm_t comm, int rank, int n, const mycollUniqueId&) {
    if (check_all_collectives(comm, n, 3) != 0) return 1;
    std::string path = dump.substr(0, dump.size() - 7) + std::to_string(rank) + ".json";
    std::string doc;
    if (FILE* f = std::fopen(path.c_str(), "r")) {
      char buf[4096];
      size_t k;
      while ((k = std::fread(buf, 1, sizeof(buf), f)) > 0) doc.append(buf, k);
      std::fclose(f);
    }
    std::remove(path.c_str());
    check(doc.find("\"transport\": \"ucx\"") != std::string::npos, "dump names ucx:\n" + doc);
    check(doc.find("\"connection\": \"ucx ") != std::string::npos, "dump has ucx lanes:\n" + doc);
    check(doc.find("tcp/") == std::string::npos, "shared memory, not tcp:\n" + doc);
    return 0;
  });
  EXPECT_EQ(describe_failures(res), "");
}

TEST_F(UcxOneHost, DescribesConnectionsAndMovesLargeMessages) {
  LaunchOptions opt = options(2);
  auto res = run_ranks(opt, [](mycollComm_t comm, int rank, int n, const mycollUniqueId&) {
    // 24 MiB + 3 floats: many chunks, window wrap-around, odd tail.
    const size_t count = (6u << 20) + 3;
    std::vector<float> a(count), b(count, -1.0f);
    for (size_t i = 0; i < count; ++i) a[i] = static_cast<float>((i * 7 + rank) % 1000);
    if (!check(mycollAllReduce(a.data(), b.data(), count, mycollFloat32, mycollSum, comm,
                               nullptr) == mycollSuccess,
               mycollGetLastError(comm)))
      return 1;
    for (size_t i = 0; i < count; ++i) {
      float want = 0;
      for (int r = 0; r < n; ++r) want += static_cast<float>((i * 7 + r) % 1000);
      if (!check(b[i] == want, "element " + std::to_string(i))) return 1;
    }
    return 0;
  });
  EXPECT_EQ(describe_failures(res), "");
}

TEST_F(UcxOneHost, SenderStaysWithinAWindowOfASlowReader) {
  // Credits: rank 0 may run at most MYCOLL_UCX_WINDOW messages ahead of what
  // rank 1 consumed. Rank 1 starts reading only after 2 s, so rank 0's 64
  // one-chunk sends (each a separate call that returns once the transport
  // took its bytes) cannot all finish before then; without credits they
  // returned at once, UCX queueing the messages unexpected at the reader
  // (and a broadcast root went on "sending" to a dead leaf). Every element of
  // every message is checked after the wait.
  auto res = run_ranks(tcp_options(2, "4K", "4"), [](mycollComm_t comm, int rank, int,
                                                     const mycollUniqueId&) {
    constexpr int kMessages = 64;
    constexpr size_t kCount = 1001;  // 4004 bytes: one chunk each
    std::vector<int32_t> buf(kCount);
    if (rank == 0) {
      auto t0 = Clock::now();
      for (int m = 0; m < kMessages; ++m) {
        for (size_t i = 0; i < kCount; ++i) buf[i] = static_cast<int32_t>(m * 100003 + i);
        if (!check(mycollSend(buf.data(), kCount, mycollInt32, 1, comm, nullptr) == mycollSuccess,
                   mycollGetLastError(comm)))
          return 1;
      }
      const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
      check(dt > 1.0, "the sends waited for the reader (" + std::to_string(dt) + " s)");
      return 0;
    }
    std::this_thread::sleep_for(std::chrono::seconds(2));
    for (int m = 0; m < kMessages; ++m) {
      std::fill(buf.begin(), buf.end(), -1);
      if (!check(mycollRecv(buf.data(), kCount, mycollInt32, 0, comm, nullptr) == mycollSuccess,
                 mycollGetLastError(comm)))
        return 1;
      for (size_t i = 0; i < kCount; ++i)
        if (!check(buf[i] == static_cast<int32_t>(m * 100003 + i),
                   "message " + std::to_string(m) + " element " + std::to_string(i)))
          return 1;
    }
    return 0;
  });
  EXPECT_EQ(describe_failures(res), "");
}

TEST_F(UcxOneHost, KilledRankGivesErrorsNotHangs) {
  LaunchOptions opt = options(3);
  opt.env["MYCOLL_TIMEOUT"] = "10";
  opt.timeout_s = 60;
  expect_killed_rank_detected(opt, 1, 15);
}

TEST_F(UcxOneHost, AbortEndsThePeersWait) {
  LaunchOptions opt = options(2);
  opt.env["MYCOLL_TIMEOUT"] = "30";
  opt.timeout_s = 60;
  auto res = run_ranks(opt, [](mycollComm_t comm, int rank, int, const mycollUniqueId&) {
    std::vector<float> a(1000, 1.0f), b(1000);
    if (rank == 1) {
      // Waits in a collective rank 0 never joins; rank 0's abort ends it.
      auto t0 = Clock::now();
      mycollResult_t r =
          mycollAllReduce(a.data(), b.data(), 1000, mycollFloat32, mycollSum, comm, nullptr);
      double dt = std::chrono::duration<double>(Clock::now() - t0).count();
      check(r == mycollRemoteError, std::string("remote error, got ") + mycollGetErrorString(r));
      check(dt < 10, "ended long before MYCOLL_TIMEOUT (" + std::to_string(dt) + " s)");
      check(std::strstr(mycollGetLastError(comm), "rank 0") != nullptr,
            std::string("names rank 0: ") + mycollGetLastError(comm));
      return 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    check(mycollCommAbort(comm) == mycollSuccess, "abort succeeds");
    _exit(failures() ? 1 : 0);  // comm is gone: skip the harness' destroy
  });
  EXPECT_EQ(describe_failures(res), "");
}

TEST_F(UcxOneHost, ChunkSizeMismatchIsAnErrorAtInit) {
  LaunchOptions opt = options(2);
  opt.init_comm = false;
  opt.timeout_s = 60;
  opt.env["MYCOLL_TIMEOUT"] = "10";
  auto res = run_ranks(opt, [](mycollComm_t, int rank, int n, const mycollUniqueId& id) {
    setenv("MYCOLL_UCX_CHUNK_BYTES", rank == 0 ? "64K" : "128K", 1);
    mycollComm_t comm = nullptr;
    mycollResult_t r = mycollCommInitRank(&comm, n, id, rank);
    check(r == mycollInvalidUsage, std::string("init fails, got ") + mycollGetErrorString(r));
    check(std::strstr(mycollGetLastError(nullptr), "MYCOLL_UCX_CHUNK_BYTES") != nullptr,
          std::string("names the variable: ") + mycollGetLastError(nullptr));
    if (comm) mycollCommDestroy(comm);
    return 0;
  });
  EXPECT_EQ(describe_failures(res), "");
}

// ----------------------------------------------------------- several hosts

const int kHosts = 3;
NetnsHosts g_hosts;

class UcxMultiHost : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!ucx_built(&skip_reason_)) return;
    skip_reason_ = g_hosts.up("mu", kHosts, "10.232.0");
  }
  static void TearDownTestSuite() { g_hosts.down(); }
  void SetUp() override {
    if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_;
  }
  static std::string skip_reason_;
};
std::string UcxMultiHost::skip_reason_;

void enter_host(int host) {
  g_hosts.enter(host);
  // UCX lists network devices from /sys/class/net, which shows the network
  // namespace of whoever mounted /sys: remount it from inside this namespace
  // in a private mount namespace (as `ip netns exec` does).
  if (unshare(CLONE_NEWNS) != 0 || mount("", "/", nullptr, MS_SLAVE | MS_REC, nullptr) != 0 ||
      umount2("/sys", MNT_DETACH) != 0 || mount("sysfs", "/sys", "sysfs", 0, nullptr) != 0) {
    std::perror("remounting /sys in the namespace");
    _exit(7);
  }
  // UCX must use this "host"'s veth, the only route to the others.
  setenv("UCX_NET_DEVICES", g_hosts.ifname(host).c_str(), 1);
}

LaunchOptions layout(int ranks_per_host, int hosts) {
  LaunchOptions opt;
  opt.nranks = ranks_per_host * hosts;
  opt.timeout_s = 240;
  opt.env = {{"MYCOLL_TIMEOUT", "60"},
             {"MYCOLL_NET", "ucx"},
             {"UCX_TLS", "tcp"},
             {"MYCOLL_CHUNK_BYTES", "8K"}};
  opt.pre_init = [ranks_per_host](int rank) { enter_host(rank / ranks_per_host); };
  return opt;
}

TEST_F(UcxMultiHost, TwoHostsOneRankEach) { run_algos(layout(1, 2), "2 hosts x 1"); }

TEST_F(UcxMultiHost, ThreeHostsTwoRanksEach) {
  // Same-host pairs over shm, the others over UCX.
  run_algos(layout(2, 3), "3 hosts x 2");
}

TEST_F(UcxMultiHost, TwoHostsThreeRanksEachAllUcx) {
  // MYCOLL_TRANSPORT=ucx: every pair over UCX, same-host pairs too.
  LaunchOptions opt = layout(3, 2);
  opt.env.erase("MYCOLL_NET");
  opt.env["MYCOLL_TRANSPORT"] = "ucx";
  run_algos(opt, "2 hosts x 3, all ucx");
}

TEST_F(UcxMultiHost, DeadRankOnAnotherHostIsAnError) {
  LaunchOptions opt = layout(2, 2);
  opt.env["MYCOLL_TIMEOUT"] = "15";
  opt.timeout_s = 90;
  auto res = run_ranks(opt, [](mycollComm_t comm, int rank, int n, const mycollUniqueId&) {
    // A peer that dies on another host is an error on the others (the TCP
    // connection under UCX breaks), not a hang.
    std::vector<float> a(1 << 18, 1.0f), b(1 << 18);
    check(mycollAllReduce(a.data(), b.data(), a.size(), mycollFloat32, mycollSum, comm, nullptr) ==
              mycollSuccess,
          "first allreduce");
    for (float v : b)
      if (!check(v == static_cast<float>(n), "allreduce value")) return 1;
    if (rank == 3) raise(SIGKILL);
    mycollResult_t r = mycollSuccess;
    for (int i = 0; i < 100 && r == mycollSuccess; ++i)
      r = mycollAllReduce(a.data(), b.data(), a.size(), mycollFloat32, mycollSum, comm, nullptr);
    check(r == mycollRemoteError || r == mycollTimeout,
          std::string("error after peer death, got ") + mycollGetErrorString(r));
    return 0;
  });
  ASSERT_EQ(res.size(), 4u);
  EXPECT_EQ(res[3].signal, SIGKILL);
  for (int r : {0, 1, 2}) EXPECT_EQ(res[r].exit_code, 0) << "rank " << r;
}

}  // namespace
