// The shared "a rank dies mid-collective" check, for every transport's tests.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/multiproc.h"

namespace mycoll_test {

// After one all-reduce, rank `victim` SIGKILLs itself while the others are in
// the next all-reduces. Every other rank must get RemoteError or Timeout
// within max_seconds, see the async error set and have later calls refused;
// the victim must have died by the signal and no rank may hang.
inline void expect_killed_rank_detected(LaunchOptions opt, int victim, double max_seconds,
                                        size_t count = size_t(1) << 20) {
  auto res = run_ranks(opt, [&](mycollComm_t comm, int rank, int, const mycollUniqueId&) {
    std::vector<float> a(count, 1.0f), b(count);
    check(mycollAllReduce(a.data(), b.data(), count, mycollFloat32, mycollSum, comm, nullptr) ==
              mycollSuccess,
          "first allreduce");
    if (rank == victim) {
      std::thread([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        raise(SIGKILL);
      }).detach();
    }
    auto t0 = std::chrono::steady_clock::now();
    mycollResult_t r = mycollSuccess;
    for (int i = 0; i < 200 && r == mycollSuccess; ++i)
      r = mycollAllReduce(a.data(), b.data(), count, mycollFloat32, mycollSum, comm, nullptr);
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    check(r == mycollRemoteError || r == mycollTimeout,
          std::string("error after peer death, got ") + mycollGetErrorString(r));
    check(dt < max_seconds, "returned within " + std::to_string(max_seconds) + " s (" +
                                std::to_string(dt) + " s)");
    check(std::strlen(mycollGetLastError(comm)) > 0, "reason recorded");
    mycollResult_t async = mycollSuccess;
    mycollCommGetAsyncError(comm, &async);
    check(async != mycollSuccess, "async error set");
    check(mycollAllReduce(a.data(), b.data(), 16, mycollFloat32, mycollSum, comm, nullptr) !=
              mycollSuccess,
          "broken communicator refuses work");
    std::fprintf(stderr, "[rank %d] after peer death: %s (%.2f s): %s\n", rank,
                 mycollGetErrorString(r), dt, mycollGetLastError(comm));
    return 0;
  });
  ASSERT_EQ(res.size(), static_cast<size_t>(opt.nranks));
  EXPECT_EQ(res[victim].signal, SIGKILL);
  for (int r = 0; r < opt.nranks; ++r) {
    if (r == victim) continue;
    EXPECT_FALSE(res[r].timed_out) << "rank " << r;
    EXPECT_EQ(res[r].exit_code, 0) << "rank " << r;
  }
}

}  // namespace mycoll_test
