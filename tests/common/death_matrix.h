// The rank-death matrix's cells, shared by the host transports' suite
// (tests/e2e/test_death_matrix.cc: shm, socket, ucx) and the verbs suite
// (tests/rdma/test_rdma.cc: ib, run inside the Soft-RoCE VM).
//
// A loop cell: three ranks run one collective in a loop, the victim dies
// (fault) after the first call. No survivor hangs; each gets RemoteError or
// Timeout within MYCOLL_TIMEOUT + 5 s, its message names the dead rank (also
// when it only ever talked to a live neighbour: the root cause travels),
// mycollGetLastError(comm) holds it, and mycollCommAbort from a second
// thread then returns within 5 s.
// An init cell: a rank that never arrives is named as missing by every other
// rank.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "common/multiproc.h"

namespace mycoll_test {
namespace death {

constexpr int kRanks = 3;

enum class Fault { Kill, Stop, Exit0, Exit1, Abort };
inline const char* fault_name(Fault f) {
  switch (f) {
    case Fault::Kill: return "SIGKILL";
    case Fault::Stop: return "SIGSTOP";
    case Fault::Exit0: return "exit0";
    case Fault::Exit1: return "exit1";
    case Fault::Abort: return "abort";
  }
  return "?";
}

// Never returns. A stopped rank arranges its own SIGKILL `stop_s` seconds
// later, so the launcher is not left waiting on it.
[[noreturn]] inline void die(Fault f, double stop_s) {
  std::fflush(nullptr);
  switch (f) {
    case Fault::Kill: raise(SIGKILL); break;
    case Fault::Stop:
      if (fork() == 0) {
        std::this_thread::sleep_for(std::chrono::duration<double>(stop_s));
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
inline const char* op_name(Op o) {
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
inline mycollResult_t run_op(Op op, mycollComm_t comm, int rank, std::vector<float>& a,
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
inline int victim_of(Op op) {
  switch (op) {
    case Op::AllReduce: return 0;
    case Op::Broadcast: return 1;
    case Op::AllToAll: return 2;
    case Op::SendRecv: return 2;
  }
  return 1;
}

using Cell = std::tuple<Fault, std::string, Op>;

// "kill_shm_allreduce": a test name.
inline std::string cell_name(const ::testing::TestParamInfo<Cell>& i) {
  std::string f = fault_name(std::get<0>(i.param));
  if (f == "SIGKILL") f = "kill";
  if (f == "SIGSTOP") f = "stop";
  return f + "_" + std::get<1>(i.param) + "_" + op_name(std::get<2>(i.param));
}

// One loop cell over MYCOLL_TRANSPORT=transport with MYCOLL_TIMEOUT=timeout
// (and `env` besides). Every survivor's error must come within
// MYCOLL_TIMEOUT, plus the time a rank waits for the root cause to settle
// after a timeout (lib/engine/host_wire.cc: min(3, 0.5 + timeout / 4) s; a
// stopped rank never settles), plus slack_s for the machine (the emulated
// Soft-RoCE VM under TSan runs many times slower than the host).
inline void run_loop_cell(const Cell& cell, double timeout,
                          const std::map<std::string, std::string>& env = {},
                          double slack_s = 3.5) {
  const double settle_s = std::min(3.0, 0.5 + timeout / 4);
  const double bound_s = timeout + settle_s + slack_s;
  const Fault fault = std::get<0>(cell);
  const std::string transport = std::get<1>(cell);
  const Op op = std::get<2>(cell);
  const int victim = victim_of(op);
  LaunchOptions opt;
  opt.nranks = kRanks;
  opt.env = env;
  opt.env["MYCOLL_TRANSPORT"] = transport;
  opt.env["MYCOLL_TIMEOUT"] = std::to_string(timeout);
  opt.timeout_s = timeout * 4 + 20;
  auto res = run_ranks(opt, [&](mycollComm_t comm, int rank, int, const mycollUniqueId&) {
    std::vector<float> a(kRanks * 4096, 1.0f), b(kRanks * 4096, 0.0f);
    check(run_op(op, comm, rank, a, b) == mycollSuccess, "first call");
    if (rank == victim) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      die(fault, timeout + 6);
    }
    auto t0 = std::chrono::steady_clock::now();
    mycollResult_t r = mycollSuccess;
    for (int i = 0; i < 100000 && r == mycollSuccess; ++i) r = run_op(op, comm, rank, a, b);
    const double dt = seconds_since(t0);
    const std::string why = mycollGetLastError(comm);
    check(r == mycollRemoteError || r == mycollTimeout,
          std::string("RemoteError or Timeout, got ") + mycollGetErrorString(r) + ": " + why);
    check(dt < bound_s, "error within MYCOLL_TIMEOUT + the settle wait + " +
                            std::to_string(slack_s) + " s (" + std::to_string(dt) + " s, bound " +
                            std::to_string(bound_s) + " s)");
    check(why.find("rank " + std::to_string(victim)) != std::string::npos,
          "message names rank " + std::to_string(victim) + ": " + why);
    std::fprintf(stderr, "[rank %d] %s %s %s: %.2f s: %s\n", rank, fault_name(fault),
                 transport.c_str(), op_name(op), dt, why.c_str());
    // Abort from a second thread returns promptly on the broken communicator.
    double abort_s = 0;
    std::thread([&] {
      auto a0 = std::chrono::steady_clock::now();
      check(mycollCommAbort(comm) == mycollSuccess, "abort succeeds");
      abort_s = seconds_since(a0);
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

// One init cell: rank 2 is killed before init; ranks 0 and 1 fail init
// within MYCOLL_TIMEOUT + 5 s naming it as missing.
inline void run_init_cell(const std::string& transport, double timeout,
                          const std::map<std::string, std::string>& env = {}) {
  LaunchOptions opt;
  opt.nranks = kRanks;
  opt.init_comm = false;
  opt.env = env;
  opt.env["MYCOLL_TRANSPORT"] = transport;
  opt.env["MYCOLL_TIMEOUT"] = std::to_string(timeout);
  opt.timeout_s = timeout * 4 + 28;
  auto res = run_ranks(opt, [&](mycollComm_t, int rank, int n, const mycollUniqueId& id) {
    if (rank == 2) die(Fault::Kill, 0);
    auto t0 = std::chrono::steady_clock::now();
    mycollComm_t comm = nullptr;
    mycollResult_t r = mycollCommInitRank(&comm, n, id, rank);
    const double dt = seconds_since(t0);
    const std::string why = mycollGetLastError(nullptr);
    check(r == mycollTimeout || r == mycollRemoteError,
          std::string("init fails, got ") + mycollGetErrorString(r));
    check(dt < timeout + 5, "within MYCOLL_TIMEOUT + 5 s (" + std::to_string(dt) + " s)");
    check(why.find("missing ranks: 2") != std::string::npos, "names rank 2: " + why);
    return 0;
  });
  ASSERT_EQ(res.size(), static_cast<size_t>(kRanks));
  EXPECT_EQ(res[0].exit_code, 0);
  EXPECT_EQ(res[1].exit_code, 0);
  EXPECT_FALSE(res[0].timed_out || res[1].timed_out);
}

}  // namespace death
}  // namespace mycoll_test
