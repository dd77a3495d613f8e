// Logs as a user reads them, from real ranks: MYCOLL_DEBUG=INFO is a short
// init summary per communicator with its id in every line and one
// "Init COMPLETE" line (a split names its parent), per-call lines only with
// MYCOLL_DEBUG_SUBSYS=COLL, TRACE shows every step, API errors under the
// call's subsystem, MYCOLL_* typos warned once, and a rank whose rendezvous
// root does not answer says so while it waits; oversubscription judged from
// the ranks' affinity masks, said at INFO; the small-block direct rule only
// where every peer is on shm.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/multiproc.h"

using namespace mycoll_test;

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string l; std::getline(ss, l);) out.push_back(l);
  return out;
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

int all_reduces(mycollComm_t comm, int n) {
  std::vector<float> buf(16, 1.0f);
  for (int i = 0; i < n; ++i)
    if (mycollAllReduce(buf.data(), buf.data(), buf.size(), mycollFloat32, mycollSum, comm,
                        nullptr) != mycollSuccess)
      return 1;
  return 0;
}

// The comm id of the "Init COMPLETE" line(s) of one rank's log.
std::vector<std::string> init_complete_ids(const std::string& text) {
  static const std::regex re("Init COMPLETE comm ([0-9a-f]{8}) rank ([0-9]+) nranks ([0-9]+)");
  std::vector<std::string> ids;
  for (const auto& l : lines_of(text)) {
    std::smatch m;
    if (std::regex_search(l, m, re)) ids.push_back(m[1]);
  }
  return ids;
}

// n ranks over `transport`, each writing its COLL INFO lines to dir/log.<rank>.
LaunchOptions coll_log_launch(int n, const char* transport, const std::string& dir) {
  LaunchOptions opt;
  opt.nranks = n;
  opt.env = {{"MYCOLL_DEBUG", "INFO"},
             {"MYCOLL_DEBUG_SUBSYS", "COLL"},
             {"MYCOLL_TRANSPORT", transport},
             {"MYCOLL_TIMEOUT", "60"},
             {"MYCOLL_DEBUG_FILE", dir + "/log.%r"}};
  return opt;
}

}  // namespace

TEST(Logging, InfoIsAShortInitSummaryWithCommIdsAndNoPerCallLines) {
  const std::string dir = scratch_dir("logtest", "info");
  LaunchOptions opt;
  opt.nranks = 3;
  opt.env = {
      {"MYCOLL_DEBUG", "INFO"}, {"MYCOLL_TIMEOUT", "60"}, {"MYCOLL_DEBUG_FILE", dir + "/log.%r"}};
  auto res = run_ranks(opt, [](mycollComm_t comm, int, int, const mycollUniqueId&) {
    return all_reduces(comm, 200);
  });
  ASSERT_EQ(describe_failures(res), "");
  std::set<std::string> ids;
  for (int r = 0; r < 3; ++r) {
    const std::string text = read_text_file(dir + "/log." + std::to_string(r));
    ASSERT_FALSE(text.empty()) << "no log.%r file for rank " << r;
    auto complete = init_complete_ids(text);
    ASSERT_EQ(complete.size(), 1u) << text;
    ids.insert(complete[0]);
    EXPECT_NE(text.find("rank " + std::to_string(r) + " nranks 3 device none"), std::string::npos)
        << text;
    EXPECT_NE(text.find("transports shm:2"), std::string::npos) << text;
    EXPECT_NE(text.find("algorithms auto (all_reduce 8B:"), std::string::npos) << text;
    EXPECT_EQ(text.find("[COLL]"), std::string::npos) << "per-call lines at INFO:\n" << text;
    EXPECT_LT(lines_of(text).size(), 30u) << "INFO is not short:\n" << text;
    // Every line of the communicator after its rendezvous carries its id.
    for (const auto& l : lines_of(text))
      if (l.find("[TRANSPORT]") != std::string::npos || l.find("[INIT]") != std::string::npos)
        EXPECT_NE(l.find("comm " + complete[0] + " rank " + std::to_string(r) + "/3: "),
                  std::string::npos)
            << l;
  }
  EXPECT_EQ(ids.size(), 1u) << "ranks disagree on the communicator id";
  remove_dir(dir);
}

TEST(Logging, PerCallLinesBehindCollAndSplitNamesItsParent) {
  const std::string dir = scratch_dir("logtest", "coll");
  LaunchOptions opt;
  opt.nranks = 2;
  opt.env = {{"MYCOLL_DEBUG", "INFO"},
             {"MYCOLL_DEBUG_SUBSYS", "INIT,COLL"},
             {"MYCOLL_TIMEOUT", "60"},
             {"MYCOLL_DEBUG_FILE", dir + "/log.%r"}};
  auto res = run_ranks(opt, [](mycollComm_t comm, int rank, int, const mycollUniqueId&) {
    mycollComm_t sub = nullptr;
    if (mycollCommSplit(comm, 0, rank, &sub) != mycollSuccess) return 1;
    int rc = all_reduces(comm, 20) + all_reduces(sub, 5);
    mycollCommDestroy(sub);
    return rc;
  });
  ASSERT_EQ(describe_failures(res), "");
  for (int r = 0; r < 2; ++r) {
    const std::string text = read_text_file(dir + "/log." + std::to_string(r));
    auto ids = init_complete_ids(text);
    ASSERT_EQ(ids.size(), 2u) << text;
    const std::string parent = ids[0], child = ids[1];
    EXPECT_NE(parent, child);
    EXPECT_NE(text.find("Init COMPLETE comm " + child + " rank " + std::to_string(r) +
                        " nranks 2 parent " + parent),
              std::string::npos)
        << text;
    EXPECT_NE(
        text.find("comm " + child + " rank " + std::to_string(r) + "/2: split from comm " + parent),
        std::string::npos)
        << text;
    EXPECT_EQ(count_of(text, "comm " + parent + " rank " + std::to_string(r) + "/2: op "), 20u)
        << text;
    EXPECT_EQ(count_of(text, "comm " + child + " rank " + std::to_string(r) + "/2: op "), 5u)
        << text;
    EXPECT_EQ(text.find("[TRANSPORT]"), std::string::npos) << "TRANSPORT not asked for:\n" << text;
  }
  remove_dir(dir);
}

// The host rule for small all-gather and reduce-scatter blocks (direct) was
// measured on shared memory; ranks with a peer over a network transport
// keep the general rule (rhd), which there took 0.5-0.85x direct's time
// (docs/performance.md, "Session 58"). Small all-to-all blocks go in one
// step on one host whatever the transport (level or ahead over sockets).
// The COLL line names the algorithm and step count; every output is checked.
TEST(Logging, SmallBlockDirectRuleOnlyWhereEveryPeerIsOnShm) {
  for (const char* transport : {"shm", "socket"}) {
    SCOPED_TRACE(transport);
    const std::string dir = scratch_dir("logtest", transport);
    const LaunchOptions opt = coll_log_launch(4, transport, dir);
    auto res = run_ranks(opt, [](mycollComm_t comm, int rank, int n, const mycollUniqueId&) {
      constexpr int k = 3;  // elements per rank block
      std::vector<int32_t> send(k * n), recv(k * n, -1), mine(k, -1);
      for (int i = 0; i < k; ++i) send[i] = rank * 100 + i;
      if (mycollAllGather(send.data(), recv.data(), k, mycollInt32, comm, nullptr) != mycollSuccess)
        return 1;
      for (int r = 0; r < n; ++r)
        for (int i = 0; i < k; ++i)
          if (recv[r * k + i] != r * 100 + i) return 2;
      for (int j = 0; j < k * n; ++j) send[j] = rank * 1000 + j;
      if (mycollReduceScatter(send.data(), mine.data(), k, mycollInt32, mycollSum, comm, nullptr) !=
          mycollSuccess)
        return 3;
      for (int i = 0; i < k; ++i)
        if (mine[i] != 1000 * n * (n - 1) / 2 + n * (rank * k + i)) return 4;
      for (int p = 0; p < n; ++p)
        for (int i = 0; i < k; ++i) send[p * k + i] = rank * 100 + p * 10 + i;
      if (mycollAllToAll(send.data(), recv.data(), k, mycollInt32, comm, nullptr) != mycollSuccess)
        return 5;
      for (int p = 0; p < n; ++p)
        for (int i = 0; i < k; ++i)
          if (recv[p * k + i] != p * 100 + rank * 10 + i) return 6;
      return 0;
    });
    ASSERT_EQ(describe_failures(res), "");
    const bool shm = std::string(transport) == "shm";
    for (int r = 0; r < 4; ++r) {
      const std::string text = read_text_file(dir + "/log." + std::to_string(r));
      const std::string blocks = shm ? "algo direct, 1 step" : "algo rhd, 2 steps";
      EXPECT_EQ(
          count_of(text, "allgather sum count 3 int32 out-of-place root 0 bytes 48 " + blocks), 1u)
          << text;
      // Direct reduce-scatter: the exchange, then the local reduction.
      EXPECT_EQ(count_of(text, std::string("reducescatter sum count 3 int32 out-of-place root 0 "
                                           "bytes 48 algo ") +
                                   (shm ? "direct, 2 steps" : "rhd, 2 steps")),
                1u)
          << text;
      EXPECT_EQ(count_of(text,
                         "alltoall sum count 3 int32 out-of-place root 0 bytes 48 algo "
                         "direct, 1 step"),
                1u)
          << text;
    }
    remove_dir(dir);
  }
}

// All-reduce of host memory with a peer across a network: recursive
// doubling up to 32 KiB from 3 ranks (the one shot's n-1 messages and rhd's
// 2 log2 p steps each pay a network stack per message; docs/performance.md,
// "Session 59"); on shm the rule is unchanged. At 3 ranks the doubling
// folds rank 0 into rank 1: rank 0 sends and receives (2 steps), rank 1
// folds (receiving, then reducing with the exchange), exchanges with rank 2
// and sends the result back (3), rank 2 exchanges once as the upper side
// and reduces in a step of its own (2; in place the result is built in
// Scratch and copied out: 3). Above 32 KiB rhd on both. Every output
// element is checked, in and out of place.
TEST(Logging, SmallAllReduceDoublesWhereAPeerIsAcrossANetwork) {
  for (const char* transport : {"shm", "socket"}) {
    SCOPED_TRACE(transport);
    const std::string dir = scratch_dir("logtest", transport);
    const LaunchOptions opt = coll_log_launch(3, transport, dir);
    auto res = run_ranks(opt, [](mycollComm_t comm, int rank, int n, const mycollUniqueId&) {
      for (size_t count : {size_t(5), size_t(8193)}) {  // 20 B, then 32 KiB + 4 B
        std::vector<int32_t> send(count), recv(count, -1);
        for (size_t i = 0; i < count; ++i) send[i] = int32_t(rank * 7 + i % 1000);
        auto want = [&](size_t i) { return int32_t(7 * n * (n - 1) / 2 + n * (i % 1000)); };
        if (mycollAllReduce(send.data(), recv.data(), count, mycollInt32, mycollSum, comm,
                            nullptr) != mycollSuccess)
          return 1;
        for (size_t i = 0; i < count; ++i)
          if (recv[i] != want(i)) return 2;
        if (mycollAllReduce(send.data(), send.data(), count, mycollInt32, mycollMax, comm,
                            nullptr) != mycollSuccess)
          return 3;
        for (size_t i = 0; i < count; ++i)
          if (send[i] != int32_t(7 * (n - 1) + i % 1000)) return 4;
      }
      // Max and Min whose result depends on operand order (max(-0, +0) is
      // the left one, and so is the payload of max(NaN, NaN)): every rank
      // must end with the same bits, which an all-gather of the results
      // shows. Sum: the zeros only (which NaN's payload a sum of two NaNs
      // keeps is the compiler's choice of operand order in the add).
      for (mycollRedOp_t op : {mycollMax, mycollMin, mycollSum}) {
        const int k = op == mycollSum ? 4 : 6;
        std::vector<uint32_t> v(k), all(k * n);
        for (int i = 0; i < k; ++i)
          v[i] = i < 4 ? ((rank + i) % 2 ? 0x80000000u : 0u) : 0x7fc00000u | uint32_t(rank + 1 + i);
        if (mycollAllReduce(v.data(), v.data(), k, mycollFloat32, op, comm, nullptr) !=
            mycollSuccess)
          return 5;
        if (mycollAllGather(v.data(), all.data(), k, mycollUint32, comm, nullptr) != mycollSuccess)
          return 6;
        for (int q = 0; q < n; ++q)
          for (int i = 0; i < k; ++i)
            if (all[q * k + i] != all[i]) return 7;
        for (int i = 0; i < 4; ++i)
          if ((all[i] & 0x7fffffffu) != 0) return 8;  // a zero of either sign
        for (int i = 4; i < k; ++i)
          if ((all[i] & 0x7fc00000u) != 0x7fc00000u) return 9;  // a quiet NaN
      }
      return 0;
    });
    ASSERT_EQ(describe_failures(res), "");
    const bool shm = std::string(transport) == "shm";
    const char* oop_steps[] = {"2 steps", "3 steps", "2 steps"};
    const char* ip_steps[] = {"2 steps", "3 steps", "3 steps"};
    for (int r = 0; r < 3; ++r) {
      const std::string text = read_text_file(dir + "/log." + std::to_string(r));
      const std::string oop = "allreduce sum count 5 int32 out-of-place root 0 bytes 20 algo ";
      const std::string ip = "allreduce max count 5 int32 in-place root 0 bytes 20 algo ";
      if (shm) {
        EXPECT_EQ(count_of(text, oop + "direct"), 1u) << text;
        EXPECT_EQ(count_of(text, ip + "direct"), 1u) << text;
      } else {
        EXPECT_EQ(count_of(text, oop + "doubling, " + oop_steps[r]), 1u) << text;
        EXPECT_EQ(count_of(text, ip + "doubling, " + ip_steps[r]), 1u) << text;
      }
      EXPECT_EQ(
          count_of(text, "allreduce sum count 8193 int32 out-of-place root 0 bytes 32772 algo " +
                             std::string("rhd")),
          1u)
          << text;
      EXPECT_EQ(count_of(text, "algo doubling"), shm ? 0u : 5u) << text;
    }
    remove_dir(dir);
  }
}

TEST(Logging, TraceShowsEveryStepWithPeerAndBytes) {
  const std::string dir = scratch_dir("logtest", "trace");
  LaunchOptions opt;
  opt.nranks = 3;
  opt.env = {{"MYCOLL_DEBUG", "TRACE"},
             {"MYCOLL_ALGO", "ring"},
             {"MYCOLL_TIMEOUT", "60"},
             {"MYCOLL_DEBUG_FILE", dir + "/log.%r"}};
  auto res = run_ranks(opt, [](mycollComm_t comm, int, int, const mycollUniqueId&) {
    std::vector<float> buf(3000, 1.0f);  // 12000 B: ring all-reduce chunks of 4000 B
    return mycollAllReduce(buf.data(), buf.data(), buf.size(), mycollFloat32, mycollSum, comm,
                           nullptr) == mycollSuccess
               ? 0
               : 1;
  });
  ASSERT_EQ(describe_failures(res), "");
  for (int r = 0; r < 3; ++r) {
    const std::string text = read_text_file(dir + "/log." + std::to_string(r));
    const int next = (r + 1) % 3, prev = (r + 2) % 3;
    // Ring all-reduce of 3 ranks: 2 reduce-scatter and 2 all-gather steps.
    for (int step = 1; step <= 4; ++step) {
      EXPECT_NE(text.find("allreduce ring step " + std::to_string(step) + "/4: send to rank " +
                          std::to_string(next) + " 4000 B"),
                std::string::npos)
          << "step " << step << ":\n"
          << text;
      EXPECT_NE(text.find("allreduce step " + std::to_string(step) + "/4 done in"),
                std::string::npos)
          << text;
    }
    EXPECT_NE(text.find("recv+reduce from rank " + std::to_string(prev) + " 4000 B"),
              std::string::npos)
        << text;
  }
  remove_dir(dir);
}

// A message read straight from the sender's memory says so at TRACE. With
// MYCOLL_SHM_READ_BYTES unset, a gather's messages keep the FIFO at any
// size (its root would make every copy itself), while an all-gather's of
// the same size are read single copy; given, the threshold holds for the
// gather too. Every element of both outputs checked.
TEST(Logging, TraceNamesSingleCopyReadsAndGathersKeepTheFifoUnlessSet) {
  for (const char* given : {"", "1M"}) {
    const std::string dir = scratch_dir("logtest", *given ? "read_given" : "read_unset");
    LaunchOptions opt;
    opt.nranks = 2;
    // The thresholds as on a host where reads are fast (the speed check
    // has a test of its own below).
    opt.env = {{"MYCOLL_DEBUG", "TRACE"},   {"MYCOLL_DEBUG_SUBSYS", "COLL,TRANSPORT"},
               {"MYCOLL_TRANSPORT", "shm"}, {"MYCOLL_SHM_READ_SPEED_CHECK", "0"},
               {"MYCOLL_TIMEOUT", "60"},    {"MYCOLL_DEBUG_FILE", dir + "/log.%r"}};
    if (*given) opt.env["MYCOLL_SHM_READ_BYTES"] = given;
    auto res = run_ranks(opt, [](mycollComm_t comm, int rank, int n, const mycollUniqueId&) {
      // 2.5 MiB blocks: past the 2 MiB (1 MiB oversubscribed) threshold.
      const size_t block = 640 * 1024;
      std::vector<float> in(block), out(block * n, -1.0f);
      for (size_t i = 0; i < block; ++i) in[i] = static_cast<float>(rank * 1000000 + i);
      auto wrong = [&](bool all) {
        if (!all && rank != 0) return false;
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < block; ++i)
            if (out[r * block + i] != static_cast<float>(r * 1000000 + i)) return true;
        return false;
      };
      if (mycollGather(in.data(), out.data(), block, mycollFloat32, 0, comm, nullptr) !=
              mycollSuccess ||
          wrong(false))
        return 1;
      std::fill(out.begin(), out.end(), -1.0f);
      if (mycollAllGather(in.data(), out.data(), block, mycollFloat32, comm, nullptr) !=
              mycollSuccess ||
          wrong(true))
        return 2;
      return 0;
    });
    ASSERT_EQ(describe_failures(res), "") << "MYCOLL_SHM_READ_BYTES=" << given;
    const std::string text = read_text_file(dir + "/log.0");  // the gather's root
    size_t gather_reads = 0, allgather_reads = 0;
    for (const auto& l : lines_of(text)) {
      if (l.find("2621440 B from rank 1 read single copy") == std::string::npos) continue;
      gather_reads += l.find(": gather (direct") != std::string::npos;
      allgather_reads += l.find(": allgather (") != std::string::npos;
    }
    if (allgather_reads == 0 &&
        text.find("single-copy reads from 0 of them") != std::string::npos) {
      remove_dir(dir);
      GTEST_SKIP() << "this machine does not let a rank read its peer's memory";
    }
    EXPECT_EQ(allgather_reads, 1u) << text;
    EXPECT_EQ(gather_reads, *given ? 1u : 0u) << "MYCOLL_SHM_READ_BYTES=" << given << "\n" << text;
    remove_dir(dir);
  }
}

// Ranks bound to one CPU together: 3 of them (3 per CPU) read an
// all-to-all's 160 KiB messages single copy (the 128 KiB threshold there),
// said at INFO and per message at TRACE, while an all-gather's messages of
// the same size keep the FIFO (the oversubscribed host's 1 MiB); 2 ranks
// on the CPU keep 1 MiB for both. Every element of both outputs checked.
TEST(Logging, AllToAllReadsSingleCopyFrom128KWhereRanksAreThreePerCpu) {
  cpu_set_t mine;
  ASSERT_EQ(sched_getaffinity(0, sizeof(mine), &mine), 0);
  int cpu = -1;
  for (int c = 0; c < CPU_SETSIZE && cpu < 0; ++c)
    if (CPU_ISSET(c, &mine)) cpu = c;
  ASSERT_GE(cpu, 0);
  for (int n : {2, 3}) {
    SCOPED_TRACE(std::to_string(n) + " ranks on one CPU");
    const std::string dir = scratch_dir("logtest", n == 3 ? "a2a3" : "a2a2");
    LaunchOptions opt;
    opt.nranks = n;
    opt.env = {{"MYCOLL_DEBUG", "TRACE"},
               {"MYCOLL_DEBUG_SUBSYS", "COLL,TUNING,TRANSPORT"},
               {"MYCOLL_TRANSPORT", "shm"},
               {"MYCOLL_SHM_READ_SPEED_CHECK", "0"},  // the thresholds where reads are fast
               {"MYCOLL_TIMEOUT", "60"},
               {"MYCOLL_DEBUG_FILE", dir + "/log.%r"}};
    opt.pre_init = [&](int) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      if (sched_setaffinity(0, sizeof(one), &one) != 0) _exit(3);
    };
    auto res = run_ranks(opt, [](mycollComm_t comm, int rank, int nr, const mycollUniqueId&) {
      const size_t block = 40960;  // 160 KiB of floats per peer
      std::vector<float> in(block * nr), out(block * nr, -1.0f);
      for (int d = 0; d < nr; ++d)
        for (size_t i = 0; i < block; ++i) in[d * block + i] = float((rank * 4 + d) * 65536 + i);
      if (mycollAllToAll(in.data(), out.data(), block, mycollFloat32, comm, nullptr) !=
          mycollSuccess)
        return 1;
      for (int s = 0; s < nr; ++s)
        for (size_t i = 0; i < block; ++i)
          if (out[s * block + i] != float((s * 4 + rank) * 65536 + i)) return 2;
      std::fill(out.begin(), out.end(), -1.0f);
      if (mycollAllGather(in.data(), out.data(), block, mycollFloat32, comm, nullptr) !=
          mycollSuccess)
        return 3;
      for (int s = 0; s < nr; ++s)
        for (size_t i = 0; i < block; ++i)
          if (out[s * block + i] != float(s * 4 * 65536 + i)) return 4;
      return 0;
    });
    ASSERT_EQ(describe_failures(res), "");
    const std::string text = read_text_file(dir + "/log.0");
    if (text.find("single-copy reads from 0 of them") != std::string::npos) {
      remove_dir(dir);
      GTEST_SKIP() << "this machine does not let a rank read its peer's memory";
    }
    size_t a2a_reads = 0, ag_reads = 0;
    for (const auto& l : lines_of(text)) {
      if (l.find("163840 B from rank") == std::string::npos ||
          l.find("read single copy") == std::string::npos)
        continue;
      a2a_reads += l.find(": alltoall (") != std::string::npos;
      ag_reads += l.find(": allgather (") != std::string::npos;
    }
    EXPECT_EQ(a2a_reads, n == 3 ? 2u : 0u) << text;
    EXPECT_EQ(ag_reads, 0u) << text;
    EXPECT_EQ(
        text.find("shm single copy from 1048576 B (all-to-all from 131072 B)") != std::string::npos,
        n == 3)
        << text;
    remove_dir(dir);
  }
}

// MYCOLL_SHM_READ_BYTES unset: each rank times process_vm_readv against
// memcpy at init and both ranks log the host's median at INFO. Below 0.35
// of memcpy's speed no message is read single copy (the shm line says why);
// at or above it a 2.5 MiB all-gather block is. MYCOLL_SHM_READ_SPEED_CHECK=0
// skips the check and keeps the 2 MiB threshold. Which branch runs depends
// on the machine (a 2-core AMD VM measures about 0.25, a 16-core Intel host
// about 0.5); the assertions follow the number logged. Every element of the
// output checked on every rank.
TEST(Logging, ReadSpeedCheckDecidesSingleCopyPerHost) {
  for (const char* check : {"1", "0"}) {
    SCOPED_TRACE(std::string("MYCOLL_SHM_READ_SPEED_CHECK=") + check);
    const std::string dir = scratch_dir("logtest", *check == '1' ? "speed1" : "speed0");
    LaunchOptions opt;
    opt.nranks = 2;
    opt.env = {{"MYCOLL_DEBUG", "TRACE"},   {"MYCOLL_DEBUG_SUBSYS", "COLL,TUNING,TRANSPORT"},
               {"MYCOLL_TRANSPORT", "shm"}, {"MYCOLL_SHM_READ_SPEED_CHECK", check},
               {"MYCOLL_TIMEOUT", "60"},    {"MYCOLL_DEBUG_FILE", dir + "/log.%r"}};
    auto res = run_ranks(opt, [](mycollComm_t comm, int rank, int n, const mycollUniqueId&) {
      const size_t block = 640 * 1024 + 3;  // 2.5 MiB and 12 B of floats
      std::vector<float> in(block), out(block * n, -1.0f);
      for (size_t i = 0; i < block; ++i) in[i] = static_cast<float>(rank * 1000000 + i);
      if (mycollAllGather(in.data(), out.data(), block, mycollFloat32, comm, nullptr) !=
          mycollSuccess)
        return 1;
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < block; ++i)
          if (out[r * block + i] != static_cast<float>(r * 1000000 + i)) return 2;
      return 0;
    });
    ASSERT_EQ(describe_failures(res), "");
    const std::string text0 = read_text_file(dir + "/log.0");
    const std::string text1 = read_text_file(dir + "/log.1");
    const std::string said = "process_vm_readv copies at ";
    auto speed = [&](const std::string& text) {
      const size_t at = text.find(said);
      return at == std::string::npos ? std::string() : text.substr(at + said.size(), 4);
    };
    size_t reads = 0;
    for (const auto& l : lines_of(text0))
      reads += l.find("2621452 B from rank 1 read single copy") != std::string::npos;
    const bool readable = text0.find("single-copy reads from 0 of them") == std::string::npos;
    if (*check == '0') {
      EXPECT_EQ(speed(text0), "") << text0;
      EXPECT_EQ(reads, readable ? 1u : 0u) << text0;
      remove_dir(dir);
      continue;
    }
    const std::string v = speed(text0);
    if (v.empty()) {  // process_vm_readv refused even on this process itself
      EXPECT_EQ(reads, 0u) << text0;
      remove_dir(dir);
      GTEST_SKIP() << "process_vm_readv does not work here";
    }
    EXPECT_EQ(speed(text1), v) << "both ranks take the host's median\n" << text1;
    const bool slow = std::stod(v) < 0.35;
    EXPECT_EQ(text0.find(said + v +
                         " of memcpy's speed on this host (median of its ranks' "
                         "checks, MYCOLL_SHM_READ_SPEED_CHECK): " +
                         (slow ? std::string("below 0.35") : std::string("0.35 or more"))) !=
                  std::string::npos,
              true)
        << text0;
    EXPECT_EQ(text0.find("(off: slower than the FIFO on this host)") != std::string::npos, slow)
        << text0;
    EXPECT_EQ(reads, !slow && readable ? 1u : 0u) << text0;
    remove_dir(dir);
  }
}

TEST(Logging, ApiErrorsUnderTheCallsSubsystemAndTyposWarnedOnce) {
  const std::string dir = scratch_dir("logtest", "errors");
  LaunchOptions opt;
  opt.nranks = 2;
  opt.env = {
      {"MYCOLL_TIMEOUTS", "5"}, {"MYCOLL_TIMEOUT", "60"}, {"MYCOLL_DEBUG_FILE", dir + "/log.%r"}};
  auto res = run_ranks(opt, [](mycollComm_t comm, int, int, const mycollUniqueId&) {
    float x = 0;
    mycollResult_t bad =
        mycollAllReduce(&x, &x, 1, static_cast<mycollDataType_t>(99), mycollSum, comm, nullptr);
    mycollComm_t sub = nullptr;
    mycollCommSplit(comm, 0, 0, &sub);  // a second init: the typo is not warned again
    mycollCommDestroy(sub);
    return bad == mycollInvalidArgument ? 0 : 1;
  });
  ASSERT_EQ(describe_failures(res), "");
  for (int r = 0; r < 2; ++r) {
    const std::string text = read_text_file(dir + "/log." + std::to_string(r));
    EXPECT_EQ(count_of(text,
                       "MYCOLL_TIMEOUTS is not a mycoll variable (did you mean "
                       "MYCOLL_TIMEOUT?)"),
              1u)
        << text;
    // WARN lines: timestamped, under COLL, with the communicator's id.
    static const std::regex re(
        "^\\[[0-9-]+ [0-9:]+\\] [^ ]+ mycoll WARN \\[COLL\\] comm [0-9a-f]{8} rank [01]/2: "
        "mycollAllReduce: datatype 99 is not a mycollDataType_t .*\\(invalid argument\\)");
    bool found = false;
    for (const auto& l : lines_of(text)) found |= std::regex_search(l, re);
    EXPECT_TRUE(found) << text;
    EXPECT_EQ(text.find("[INIT] mycollAllReduce"), std::string::npos) << text;
  }
  remove_dir(dir);
}

TEST(Logging, ARankWaitingForASilentRootSaysSo) {
  // A port with no listener: bind, read the port, close.
  int s = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(s, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  socklen_t len = sizeof(a);
  ASSERT_EQ(getsockname(s, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const int port = ntohs(a.sin_port);
  close(s);

  const std::string dir = scratch_dir("logtest", "root");
  LaunchOptions opt;
  opt.nranks = 1;
  opt.init_comm = false;
  opt.timeout_s = 60;
  opt.env = {{"MYCOLL_RANK", "1"},
             {"MYCOLL_NRANKS", "2"},
             {"MYCOLL_ADDR", "127.0.0.1:" + std::to_string(port)},
             {"MYCOLL_TIMEOUT", "4"},
             {"MYCOLL_DEBUG_FILE", dir + "/log"}};
  auto res = run_ranks(opt, [](mycollComm_t, int, int, const mycollUniqueId&) {
    mycollComm_t comm = nullptr;
    mycollResult_t r = mycollCommInitFromEnv(&comm);
    return r == mycollTimeout ? 0 : 10 + int(r);
  });
  ASSERT_EQ(describe_failures(res), "");
  const std::string text = read_text_file(dir + "/log");
  EXPECT_NE(text.find("root at 127.0.0.1:" + std::to_string(port) +
                      ": no answer yet (Connection refused); still waiting"),
            std::string::npos)
      << text;
  remove_dir(dir);
}

// Ranks bound to a CPU each (what mpirun and srun --cpu-bind do) are not
// oversubscribed, however few CPUs each may use; ranks bound to one CPU
// together are, and say so at INFO (before session 36 each rank compared
// the host's ranks with its own mask, so ranks bound a core each were
// judged oversubscribed and the all-reduce rule of 3+ ranks changed).
TEST(Logging, OversubscriptionJudgedFromTheRanksAffinityMasks) {
  cpu_set_t mine;
  ASSERT_EQ(sched_getaffinity(0, sizeof(mine), &mine), 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c)
    if (CPU_ISSET(c, &mine)) cpus.push_back(c);
  if (cpus.size() < 2) GTEST_SKIP() << "needs two CPUs to bind the ranks apart";
  for (bool shared : {false, true}) {
    SCOPED_TRACE(shared ? "both ranks on one CPU" : "a CPU each");
    const std::string dir = scratch_dir("logtest", shared ? "oversub" : "bound");
    LaunchOptions opt;
    opt.nranks = 2;
    opt.env = {
        {"MYCOLL_DEBUG", "INFO"}, {"MYCOLL_TIMEOUT", "60"}, {"MYCOLL_DEBUG_FILE", dir + "/log.%r"}};
    opt.pre_init = [&](int rank) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpus[shared ? 0 : rank], &one);
      if (sched_setaffinity(0, sizeof(one), &one) != 0) _exit(3);
    };
    auto res = run_ranks(opt, [](mycollComm_t comm, int rank, int, const mycollUniqueId&) {
      const size_t n = 262144;  // 1 MiB of floats
      std::vector<float> in(n), out(n, -1.0f);
      for (size_t i = 0; i < n; ++i) in[i] = float(rank * 3 + int(i % 5));
      if (mycollAllReduce(in.data(), out.data(), n, mycollFloat32, mycollSum, comm, nullptr) !=
          mycollSuccess)
        return 1;
      for (size_t i = 0; i < n; ++i)
        if (out[i] != float(3 + 2 * int(i % 5))) return 2;
      return 0;
    });
    ASSERT_EQ(describe_failures(res), "");
    for (int r = 0; r < 2; ++r) {
      const std::string text = read_text_file(dir + "/log." + std::to_string(r));
      ASSERT_FALSE(text.empty()) << "no log for rank " << r;
      const std::string said =
          "rank " + std::to_string(r) + ": 2 ranks on this host may run on 1 CPUs";
      EXPECT_EQ(text.find(said) != std::string::npos, shared) << text;
      // Broadcasts take 1 MiB chunks (the single-copy threshold there)
      // only where the host reads single copy: not where the speed check
      // found process_vm_readv slow (Logging.ReadSpeedCheckDecidesSingleCopyPerHost).
      const bool reads_off =
          text.find("so shm messages go through the FIFO at every size") != std::string::npos;
      const std::string fewer = "rank " + std::to_string(r) +
                                ": a host of this communicator has more ranks than CPUs: "
                                "automatic all-reduce prefers fewer steps";
      EXPECT_EQ(text.find(fewer + "\n") != std::string::npos, shared && reads_off) << text;
      EXPECT_EQ(text.find(fewer + "; broadcasts of 2097152 B or more in chunks of 1048576 B") !=
                    std::string::npos,
                shared && !reads_off)
          << text;
    }
    remove_dir(dir);
  }
}
