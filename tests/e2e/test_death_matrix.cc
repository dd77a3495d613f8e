// Rank-death matrix: fault x transport x collective, three ranks. In every
// cell no rank hangs, every survivor gets RemoteError or Timeout within its
// bound, its message names the dead rank (also when it only ever talked to
// a live neighbour: the root cause travels), mycollGetLastError(comm) holds
// it, and mycollCommAbort from a second thread then returns promptly.
// Init cells: a rank that never arrives is named by every other rank, also
// when the process that hosts the root ends as soon as its own init fails.
#include <dirent.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "common/multiproc.h"

using namespace mycoll_test;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kRanks = 3;
constexpr double kTimeout = 4;  // MYCOLL_TIMEOUT of every cell

enum class Fault { Kill, Stop, Exit0, Exit1, Abort };
const char* fault_name(Fault f) {
  switch (f) {
    case Fault::Kill: return "SIGKILL";
    case Fault::Stop: return "SIGSTOP";
    case Fault::Exit0: return "exit0";
    case Fault::Exit1: return "exit1";
    case Fault::Abort: return "abort";
  }
  return "?";
}

// Never returns. A stopped rank arranges its own SIGKILL for later, so the
// launcher is not left waiting on it.
[[noreturn]] void die(Fault f) {
  std::fflush(nullptr);
  switch (f) {
    case Fault::Kill: raise(SIGKILL); break;
    case Fault::Stop:
      if (fork() == 0) {
        std::this_thread::sleep_for(std::chrono::duration<double>(kTimeout + 6));
        kill(getppid(), SIGKILL);
        _exit(0);
      }
      raise(SIGSTOP);
      break;
    case Fault::Exit0: std::exit(0);
    case Fault::Exit1: std::exit(1);
    case Fault::Abort: signal(SIGABRT, SIG_DFL); std::abort();
  }
  _exit(99);
}

enum class Op { AllReduce, Broadcast, AllToAll, SendRecv };
const char* op_name(Op o) {
  switch (o) {
    case Op::AllReduce: return "allreduce";
    case Op::Broadcast: return "broadcast";
    case Op::AllToAll: return "alltoall";
    case Op::SendRecv: return "sendrecv";
  }
  return "?";
}

// Grouped send/recv along a chain 0-1-2 (no wrap): with rank 2 dead, rank 0
// only ever waits on rank 1, which is alive.
mycollResult_t run_op(Op op, mycollComm_t comm, int rank, std::vector<float>& a,
                      std::vector<float>& b) {
  const size_t n = a.size() / kRanks;
  switch (op) {
    case Op::AllReduce:
      return mycollAllReduce(a.data(), b.data(), n, mycollFloat32, mycollSum, comm, nullptr);
    case Op::Broadcast:
      return mycollBroadcast(a.data(), b.data(), n, mycollFloat32, 0, comm, nullptr);
    case Op::AllToAll: return mycollAllToAll(a.data(), b.data(), n, mycollFloat32, comm, nullptr);
    case Op::SendRecv: {
      mycollGroupStart();
      for (int p : {rank - 1, rank + 1}) {
        if (p < 0 || p >= kRanks) continue;
        mycollSend(a.data() + p * n, n, mycollFloat32, p, comm, nullptr);
        mycollRecv(b.data() + p * n, n, mycollFloat32, p, comm, nullptr);
      }
      return mycollGroupEnd();
    }
  }
  return mycollInternalError;
}

// Victim per collective: every position gets covered (root, middle, end).
int victim_of(Op op) {
  switch (op) {
    case Op::AllReduce: return 0;
    case Op::Broadcast: return 1;
    case Op::AllToAll: return 2;
    case Op::SendRecv: return 2;
  }
  return 1;
}

// UCX cells skip where UCX is not built or does not load (CI fails then:
// tests/unit/test_build_config.cc). Only dlopen here in the parent; the
// ranks are forked from it and set UCX up themselves.
bool transport_here(const std::string& t, std::string* why) {
  if (t != "ucx") return true;
#if MYCOLL_HAVE_UCX
  if (dlopen("libucp.so.0", RTLD_NOW | RTLD_LOCAL)) return true;
  const char* e = dlerror();
  *why = std::string("UCX is built but libucp.so.0 does not load here: ") + (e ? e : "?");
#else
  *why = "mycoll was built without UCX";
#endif
  return false;
}

using Cell = std::tuple<Fault, std::string, Op>;

class DeathMatrix : public ::testing::TestWithParam<Cell> {};

TEST_P(DeathMatrix, SurvivorsGetErrorsNamingTheDeadRank) {
  const Fault fault = std::get<0>(GetParam());
  const std::string transport = std::get<1>(GetParam());
  const Op op = std::get<2>(GetParam());
  const int victim = victim_of(op);
  std::string why_not;
  if (!transport_here(transport, &why_not)) GTEST_SKIP() << why_not;
  LaunchOptions opt;
  opt.nranks = kRanks;
  opt.env = {{"MYCOLL_TRANSPORT", transport}, {"MYCOLL_TIMEOUT", std::to_string(kTimeout)}};
  opt.timeout_s = kTimeout * 4 + 20;
  auto res = run_ranks(opt, [&](mycollComm_t comm, int rank, int, const mycollUniqueId&) {
    std::vector<float> a(kRanks * 4096, 1.0f), b(kRanks * 4096, 0.0f);
    check(run_op(op, comm, rank, a, b) == mycollSuccess, "first call");
    if (rank == victim) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      die(fault);
    }
    auto t0 = Clock::now();
    mycollResult_t r = mycollSuccess;
    for (int i = 0; i < 100000 && r == mycollSuccess; ++i) r = run_op(op, comm, rank, a, b);
    double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    const std::string why = mycollGetLastError(comm);
    check(r == mycollRemoteError || r == mycollTimeout,
          std::string("RemoteError or Timeout, got ") + mycollGetErrorString(r) + ": " + why);
    check(dt < kTimeout + 5, "error within MYCOLL_TIMEOUT + 5 s (" + std::to_string(dt) + " s)");
    check(why.find("rank " + std::to_string(victim)) != std::string::npos,
          "message names rank " + std::to_string(victim) + ": " + why);
    std::fprintf(stderr, "[rank %d] %s %s %s: %.2f s: %s\n", rank, fault_name(fault),
                 transport.c_str(), op_name(op), dt, why.c_str());
    // Abort from a second thread returns promptly on the broken communicator.
    double abort_s = 0;
    std::thread([&] {
      auto a0 = Clock::now();
      check(mycollCommAbort(comm) == mycollSuccess, "abort succeeds");
      abort_s = std::chrono::duration<double>(Clock::now() - a0).count();
    }).join();
    check(abort_s < 5, "abort within 5 s (" + std::to_string(abort_s) + " s)");
    std::fflush(nullptr);
    _exit(failures() ? 1 : 0);  // comm is gone: skip the harness' destroy
    return 0;
  });
  ASSERT_EQ(res.size(), static_cast<size_t>(kRanks));
  for (int r = 0; r < kRanks; ++r) {
    if (r == victim) continue;
    EXPECT_FALSE(res[r].timed_out) << "rank " << r << " hung";
    EXPECT_EQ(res[r].exit_code, 0) << "rank " << r;
  }
}

std::string cell_name(const ::testing::TestParamInfo<Cell>& i) {
  std::string f = fault_name(std::get<0>(i.param));
  if (f == "SIGKILL") f = "kill";
  if (f == "SIGSTOP") f = "stop";
  return f + "_" + std::get<1>(i.param) + "_" + op_name(std::get<2>(i.param));
}

INSTANTIATE_TEST_SUITE_P(
    Host, DeathMatrix,
    ::testing::Combine(::testing::Values(Fault::Kill, Fault::Stop, Fault::Exit0, Fault::Exit1,
                                         Fault::Abort),
                       ::testing::Values("shm", "socket", "ucx"),
                       ::testing::Values(Op::AllReduce, Op::Broadcast, Op::AllToAll,
                                         Op::SendRecv)),
    cell_name);

// Init: a rank that never arrives is named as missing by every other rank.
class DeathAtInit : public ::testing::TestWithParam<std::string> {};

TEST_P(DeathAtInit, MissingRankIsNamed) {
  std::string why_not;
  if (!transport_here(GetParam(), &why_not)) GTEST_SKIP() << why_not;
  LaunchOptions opt;
  opt.nranks = kRanks;
  opt.init_comm = false;
  opt.env = {{"MYCOLL_TRANSPORT", GetParam()}, {"MYCOLL_TIMEOUT", "3"}};
  opt.timeout_s = 40;
  auto res = run_ranks(opt, [&](mycollComm_t, int rank, int n, const mycollUniqueId& id) {
    if (rank == 2) die(Fault::Kill);
    auto t0 = Clock::now();
    mycollComm_t comm = nullptr;
    mycollResult_t r = mycollCommInitRank(&comm, n, id, rank);
    double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    const std::string why = mycollGetLastError(nullptr);
    check(r == mycollTimeout || r == mycollRemoteError,
          std::string("init fails, got ") + mycollGetErrorString(r));
    check(dt < 3 + 5, "within MYCOLL_TIMEOUT + 5 s (" + std::to_string(dt) + " s)");
    check(why.find("missing ranks: 2") != std::string::npos, "names rank 2: " + why);
    return 0;
  });
  EXPECT_EQ(res[0].exit_code, 0);
  EXPECT_EQ(res[1].exit_code, 0);
  EXPECT_FALSE(res[0].timed_out || res[1].timed_out);
}

INSTANTIATE_TEST_SUITE_P(Host, DeathAtInit, ::testing::Values("shm", "socket", "ucx"));

}  // namespace

namespace {

// Puts every thread of this process but the calling one (here: the root
// thread mycollGetUniqueId started) under SCHED_IDLE and all of them on one
// CPU, so that a thread the root wakes runs at once and the root only when
// nothing else can: if init returned on the root's report without waiting
// for the root, this process would end before the root told anyone else.
void root_thread_yields() {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(std::max(0, sched_getcpu()), &one);
  const pid_t self = static_cast<pid_t>(syscall(SYS_gettid));
  DIR* d = opendir("/proc/self/task");
  ASSERT_NE(d, nullptr);
  while (dirent* e = readdir(d)) {
    const pid_t tid = static_cast<pid_t>(std::atoi(e->d_name));
    if (tid <= 0) continue;
    sched_setaffinity(tid, sizeof(one), &one);
    sched_param none{};
    if (tid != self) sched_setscheduler(tid, SCHED_IDLE, &none);
  }
  closedir(d);
}

// The root runs in rank 0's process and ends with its timeout report; rank
// 0 gets the report first (ranks are told in order) and its process ends at
// once, as a launcher's does on a failed init. The others must still have
// the report naming the missing rank, not a lost root: init on the root's
// process returns only once the root has told every rank.
TEST(DeathAtInitRootHost, ExitsAtOnceAndTheOthersStillNameTheMissingRank) {
  constexpr int kMany = 6, kMissing = kMany - 1;
  LaunchOptions opt;
  opt.nranks = kMany;
  opt.init_comm = false;
  opt.env = {{"MYCOLL_TRANSPORT", "socket"}, {"MYCOLL_TIMEOUT", "2"}};
  opt.timeout_s = 40;
  auto res = run_ranks(opt, [&](mycollComm_t, int rank, int n, const mycollUniqueId& id) {
    if (rank == kMissing) die(Fault::Kill);
    if (rank == 0) root_thread_yields();
    mycollComm_t comm = nullptr;
    mycollResult_t r = mycollCommInitRank(&comm, n, id, rank);
    if (rank == 0) _exit(r == mycollSuccess ? 3 : 0);  // at once: no at-exit hooks
    const std::string why = mycollGetLastError(nullptr);
    check(r == mycollTimeout, std::string("init times out, got ") + mycollGetErrorString(r));
    check(why.find("missing ranks: " + std::to_string(kMissing)) != std::string::npos,
          "names rank " + std::to_string(kMissing) + ": " + why);
    return 0;
  });
  for (int r = 0; r < kMissing; ++r) {
    EXPECT_EQ(res[r].exit_code, 0) << "rank " << r;
    EXPECT_FALSE(res[r].timed_out) << "rank " << r;
  }
}

}  // namespace
