// Ranks as threads of one process: every thread makes its own
// communicator and runs collectives and grouped send/recv at the same time
// as the others, twice (the second round reuses registry slots and the
// logger, config and root state the first left). Under TSan (the sanitizer
// stage) this is where the library's process-wide state meets concurrency.
// The threads run in a forked child, so the test process stays free of
// library threads.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "common/multiproc.h"

using namespace mycoll_test;

namespace {

constexpr int kThreads = 4;
constexpr size_t kCount = 1001;

// One rank's work; returns "" or what went wrong.
std::string rank_body(const mycollUniqueId& id, int rank, int n) {
  mycollComm_t comm = nullptr;
  if (mycollCommInitRank(&comm, n, id, rank) != mycollSuccess)
    return std::string("init: ") + mycollGetLastError(nullptr);
  auto fail = [&](const std::string& what) {
    std::string why = what + ": " + mycollGetLastError(comm);
    mycollCommDestroy(comm);
    return why;
  };
  std::vector<float> in(kCount), out(kCount);
  for (size_t i = 0; i < kCount; ++i) in[i] = float(rank + int(i % 7));
  if (mycollAllReduce(in.data(), out.data(), kCount, mycollFloat32, mycollSum, comm, nullptr) !=
      mycollSuccess)
    return fail("allreduce");
  for (size_t i = 0; i < kCount; ++i) {
    const float want = float(n * (n - 1) / 2 + n * int(i % 7));
    if (out[i] != want)
      return fail("allreduce element " + std::to_string(i) + " is " + std::to_string(out[i]) +
                  ", not " + std::to_string(want));
  }
  // Ring exchange in one group: send to the next rank, receive from the previous.
  std::vector<int> mine(kCount, rank), got(kCount, -1);
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  if (mycollGroupStart() != mycollSuccess) return fail("group start");
  mycollSend(mine.data(), kCount, mycollInt32, next, comm, nullptr);
  mycollRecv(got.data(), kCount, mycollInt32, prev, comm, nullptr);
  if (mycollGroupEnd() != mycollSuccess) return fail("group end");
  for (size_t i = 0; i < kCount; ++i)
    if (got[i] != prev)
      return fail("received " + std::to_string(got[i]) + " from rank " + std::to_string(prev));
  if (mycollCommDestroy(comm) != mycollSuccess) return "destroy failed";
  return "";
}

class ThreadRanks : public ::testing::TestWithParam<std::string> {};

TEST_P(ThreadRanks, CommunicatorsOnThreadsOfOneProcess) {
  LaunchOptions opt;
  opt.nranks = 1;
  opt.init_comm = false;
  opt.env = {{"MYCOLL_TRANSPORT", GetParam()}, {"MYCOLL_TIMEOUT", "60"}};
  opt.timeout_s = 240;
  auto res = run_ranks(opt, [&](mycollComm_t, int, int, const mycollUniqueId&) {
    for (int round = 0; round < 2; ++round) {
      mycollUniqueId id;
      if (!check(mycollGetUniqueId(&id) == mycollSuccess, "unique id")) return 1;
      std::vector<std::string> errors(kThreads);
      std::vector<std::thread> threads;
      for (int r = 0; r < kThreads; ++r)
        threads.emplace_back([&, r] { errors[r] = rank_body(id, r, kThreads); });
      for (auto& t : threads) t.join();
      for (int r = 0; r < kThreads; ++r)
        check(errors[r].empty(), "round " + std::to_string(round) + ", thread rank " +
                                     std::to_string(r) + ": " + errors[r]);
    }
    return 0;
  });
  EXPECT_EQ(describe_failures(res), "");
}

INSTANTIATE_TEST_SUITE_P(Host, ThreadRanks, ::testing::Values("shm", "socket"));

}  // namespace
