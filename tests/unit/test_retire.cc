// The meeting before a communicator's memory goes runs apart from destroy
// (lib/comm/retire.h): a destroy returns after a bounded wait, the job ends
// later, and two ranks destroying two communicators in opposite orders
// both get through (each "communicator" here is a two-party barrier, as the
// GPU communicator's meeting is). The GPU communicators themselves are
// tested in tests/nccl (suite comm, --mem cuda).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "comm/retire.h"

// LeakSanitizer's check at a forked child's exit stops every thread the
// child inherited the records of, and reports the parent's running thread
// as one it could not stop; the fork test below skips under ASan.
#if defined(__SANITIZE_ADDRESS__)
#define RETIRE_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RETIRE_TEST_ASAN 1
#endif
#endif

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// A barrier of two parties that gives up after max_s (as a bootstrap
// barrier gives up after MYCOLL_TIMEOUT). Returns whether both arrived.
class Meeting {
 public:
  bool arrive(double max_s) {
    std::unique_lock<std::mutex> lk(mu_);
    if (++arrived_ == 2) cv_.notify_all();
    return cv_.wait_for(lk, std::chrono::duration<double>(max_s), [&] { return arrived_ >= 2; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
};

// A latch the test opens.
class Gate {
 public:
  void open() {
    std::lock_guard<std::mutex> g(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void pass() {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

TEST(RunBehind, AJobThatEndsInTimeHasEndedWhenItReturns) {
  std::atomic<int> ran{0};
  EXPECT_TRUE(mycoll::run_behind([&] { ran.fetch_add(1); }, 5.0));
  EXPECT_EQ(ran.load(), 1);
  EXPECT_EQ(mycoll::wait_behind(0), 0);
}

TEST(RunBehind, ASlowJobGoesOnAloneAndEndsLater) {
  Gate gate;
  std::atomic<bool> ended{false};
  const auto t0 = Clock::now();
  EXPECT_FALSE(mycoll::run_behind(
      [&] {
        gate.pass();
        ended = true;
      },
      0.1));
  const double took = seconds_since(t0);
  EXPECT_GE(took, 0.09);
  EXPECT_LT(took, 5.0);
  EXPECT_FALSE(ended.load());
  EXPECT_EQ(mycoll::wait_behind(0.05), 1);  // still waiting at the gate
  gate.open();
  EXPECT_EQ(mycoll::wait_behind(30.0), 0);
  EXPECT_TRUE(ended.load());
}

// Rank 0 frees x then y, rank 1 y then x; each free meets the other rank.
// Run in place, rank 0 would wait in x while rank 1 waits in y, until the
// meetings give up (30 s); apart, both meet within a wait of each other.
TEST(RunBehind, RanksFreeingInOppositeOrdersBothMeet) {
  Meeting x, y;
  std::atomic<int> met{0}, gave_up{0};
  auto free_one = [&](Meeting& m) {
    mycoll::run_behind([&] { (m.arrive(30.0) ? met : gave_up).fetch_add(1); }, 0.2);
  };
  const auto t0 = Clock::now();
  std::thread rank0([&] {
    free_one(x);
    free_one(y);
  });
  std::thread rank1([&] {
    free_one(y);
    free_one(x);
  });
  rank0.join();
  rank1.join();
  EXPECT_EQ(mycoll::wait_behind(30.0), 0);
  EXPECT_EQ(met.load(), 4);
  EXPECT_EQ(gave_up.load(), 0);
  EXPECT_LT(seconds_since(t0), 10.0);
}

// A process forked while a job runs has none of its parent's threads: its
// exit must not wait for that job.
TEST(RunBehind, AForkedChildDoesNotWaitForItsParentsJobs) {
#ifdef RETIRE_TEST_ASAN
  GTEST_SKIP() << "LeakSanitizer reports a forked child's inherited running thread at its exit "
                  "(the main and TSan suites run this test)";
#endif
  Gate gate;
  EXPECT_FALSE(mycoll::run_behind([&] { gate.pass(); }, 0.05));
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) std::exit(0);  // runs the static destructors, as an exit does
  int status = -1;
  const auto t0 = Clock::now();
  pid_t got = 0;
  while ((got = waitpid(child, &status, WNOHANG)) == 0 && seconds_since(t0) < 20.0)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (got == 0) kill(child, SIGKILL), waitpid(child, &status, 0);
  gate.open();
  EXPECT_EQ(got, child) << "the forked child's exit waited for its parent's job";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(mycoll::wait_behind(30.0), 0);
}

}  // namespace
