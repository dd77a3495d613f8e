// Handles of destroyed communicators, destroy/abort with queued group calls,
// and argument errors found before data moves: one-rank communicators in one
// process (the multi-rank cases are in tests/e2e/test_misuse.cc).
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/comm.h"
#include "comm/registry.h"
#include "mycoll.h"

namespace {

bool contains(const char* s, const char* what) { return s && std::strstr(s, what) != nullptr; }

mycollComm_t one_rank_comm() {
  mycollUniqueId id;
  EXPECT_EQ(mycollGetUniqueId(&id), mycollSuccess);
  mycollComm_t c = nullptr;
  EXPECT_EQ(mycollCommInitRank(&c, 1, id, 0), mycollSuccess) << mycollGetLastError(nullptr);
  return c;
}

bool allreduce_works(mycollComm_t c) {
  std::vector<float> a(16, 2.0f), b(16, 0.0f);
  if (mycollAllReduce(a.data(), b.data(), 16, mycollFloat32, mycollSum, c, nullptr) !=
      mycollSuccess)
    return false;
  return b[15] == 2.0f;
}

class Registry : public ::testing::Test {
 protected:
  void SetUp() override { setenv("MYCOLL_HOST_COMM", "1", 1); }
  void TearDown() override { unsetenv("MYCOLL_HOST_COMM"); }
};

TEST_F(Registry, StaleHandleIsRejectedEvenWhenItsSlotIsReused) {
  mycollComm_t a = one_rank_comm();
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(mycollCommDestroy(a), mycollSuccess);
  mycollComm_t b = one_rank_comm();  // takes a's slot, next generation
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);
  std::vector<float> x(4, 1.0f), y(4);
  EXPECT_EQ(mycollAllReduce(x.data(), y.data(), 4, mycollFloat32, mycollSum, a, nullptr),
            mycollInvalidArgument);
  EXPECT_TRUE(contains(mycollGetLastError(nullptr), "destroyed")) << mycollGetLastError(nullptr);
  int n = 0;
  EXPECT_EQ(mycollCommCount(a, &n), mycollInvalidArgument);
  EXPECT_EQ(mycollCommDestroy(a), mycollInvalidArgument);  // must not destroy b
  EXPECT_EQ(mycollCommAbort(a), mycollInvalidArgument);
  EXPECT_TRUE(allreduce_works(b));
  EXPECT_EQ(mycollCommDestroy(b), mycollSuccess);
  EXPECT_EQ(mycollCommDestroy(b), mycollInvalidArgument);
}

TEST_F(Registry, ForeignPointerIsNotACommunicator) {
  int junk[64] = {};
  auto fake = reinterpret_cast<mycollComm_t>(junk);
  int n = 0;
  EXPECT_EQ(mycollCommCount(fake, &n), mycollInvalidArgument);
  EXPECT_EQ(mycollCommDestroy(fake), mycollInvalidArgument);
  EXPECT_STREQ(mycollGetLastError(fake), mycollGetLastError(nullptr));
}

TEST_F(Registry, DestroyWithQueuedGroupCallsIsAnError) {
  mycollComm_t c = one_rank_comm();
  std::vector<float> a(8, 3.0f), b(8, 0.0f);
  int live = mycoll::registry_live_count();
  ASSERT_EQ(mycollGroupStart(), mycollSuccess);
  ASSERT_EQ(mycollAllReduce(a.data(), b.data(), 8, mycollFloat32, mycollSum, c, nullptr),
            mycollSuccess);
  EXPECT_EQ(mycollCommDestroy(c), mycollInvalidUsage);
  EXPECT_TRUE(contains(mycollGetLastError(nullptr), "open group")) << mycollGetLastError(nullptr);
  EXPECT_EQ(mycoll::registry_live_count(), live);
  ASSERT_EQ(mycollGroupEnd(), mycollSuccess);
  EXPECT_EQ(b[7], 3.0f);
  EXPECT_EQ(mycollCommDestroy(c), mycollSuccess);
  EXPECT_EQ(mycoll::registry_live_count(), live - 1);
}

TEST_F(Registry, AbortWithQueuedGroupCallsFailsTheGroupCleanly) {
  mycollComm_t c = one_rank_comm();
  mycollComm_t d = one_rank_comm();
  std::vector<float> a(8, 3.0f), b(8, 0.0f), e(8, 0.0f);
  ASSERT_EQ(mycollGroupStart(), mycollSuccess);
  ASSERT_EQ(mycollAllReduce(a.data(), b.data(), 8, mycollFloat32, mycollSum, c, nullptr),
            mycollSuccess);
  ASSERT_EQ(mycollAllReduce(a.data(), e.data(), 8, mycollFloat32, mycollSum, d, nullptr),
            mycollSuccess);
  EXPECT_EQ(mycollCommAbort(c), mycollSuccess);
  mycollResult_t r = mycollGroupEnd();
  EXPECT_NE(r, mycollSuccess);
  EXPECT_TRUE(contains(mycollGetLastError(nullptr), "destroyed")) << mycollGetLastError(nullptr);
  // The other communicator of the group holds the reason and still works.
  EXPECT_TRUE(contains(mycollGetLastError(d), "mycollGroupEnd")) << mycollGetLastError(d);
  EXPECT_EQ(e[0], 0.0f);  // nothing ran
  EXPECT_TRUE(allreduce_works(d));
  EXPECT_EQ(mycollCommDestroy(d), mycollSuccess);
}

// A call that fails when queued in a group (here a bad datatype, then a
// destroyed handle) fails mycollGroupEnd with that error, as NCCL's group
// does, and none of the group's calls runs; the next group starts clean.
TEST_F(Registry, AFailedCallFailsItsGroupAndNothingRuns) {
  mycollComm_t c = one_rank_comm();
  mycollComm_t gone = one_rank_comm();
  ASSERT_EQ(mycollCommDestroy(gone), mycollSuccess);
  std::vector<float> a(8, 3.0f), b(8, 0.0f), e(8, 0.0f);
  for (int bad = 0; bad < 2; ++bad) {
    ASSERT_EQ(mycollGroupStart(), mycollSuccess);
    ASSERT_EQ(mycollAllReduce(a.data(), b.data(), 8, mycollFloat32, mycollSum, c, nullptr),
              mycollSuccess);
    const mycollResult_t want = mycollInvalidArgument;
    if (bad == 0)
      EXPECT_EQ(mycollAllReduce(a.data(), e.data(), 8, static_cast<mycollDataType_t>(99), mycollSum,
                                c, nullptr),
                want);
    else
      EXPECT_EQ(mycollAllReduce(a.data(), e.data(), 8, mycollFloat32, mycollSum, gone, nullptr),
                want);
    ASSERT_EQ(mycollAllReduce(a.data(), e.data(), 8, mycollFloat32, mycollSum, c, nullptr),
              mycollSuccess);
    EXPECT_EQ(mycollGroupEnd(), want);
    const char* why = mycollGetLastError(nullptr);
    EXPECT_TRUE(contains(why, "none of its 2 queued call(s) ran")) << why;
    EXPECT_TRUE(contains(why, bad == 0 ? "datatype 99" : "destroyed")) << why;
    EXPECT_EQ(b[0], 0.0f);  // nothing ran
    EXPECT_EQ(e[0], 0.0f);
  }
  ASSERT_EQ(mycollGroupStart(), mycollSuccess);  // a clean group runs
  ASSERT_EQ(mycollAllReduce(a.data(), b.data(), 8, mycollFloat32, mycollSum, c, nullptr),
            mycollSuccess);
  EXPECT_EQ(mycollGroupEnd(), mycollSuccess) << mycollGetLastError(nullptr);
  EXPECT_EQ(b[7], 3.0f);
  EXPECT_EQ(mycollCommDestroy(c), mycollSuccess);  // no call counts as queued any more
}

// An open group holds the pin of the communicator its calls name until it
// ends: another thread's call on it meanwhile is InvalidUsage (a group is
// one call), the group's own thread keeps using it, and a thread that ends
// with a group still open lets it go.
TEST_F(Registry, AnOpenGroupHoldsItsCommunicatorUntilItEnds) {
  mycollComm_t c = one_rank_comm();
  std::vector<float> a(8, 3.0f), b(8, 0.0f), x(8, 0.0f);
  ASSERT_EQ(mycollGroupStart(), mycollSuccess);
  ASSERT_EQ(mycollAllReduce(a.data(), b.data(), 8, mycollFloat32, mycollSum, c, nullptr),
            mycollSuccess);
  mycollResult_t other = mycollSuccess;
  std::thread([&] {
    other = mycollAllReduce(a.data(), x.data(), 8, mycollFloat32, mycollSum, c, nullptr);
  }).join();
  EXPECT_EQ(other, mycollInvalidUsage);
  EXPECT_EQ(x[0], 0.0f);
  int n = 0;
  EXPECT_EQ(mycollCommCount(c, &n), mycollSuccess);  // queries do not need the pin
  EXPECT_EQ(n, 1);
  ASSERT_EQ(mycollAllReduce(a.data(), x.data(), 8, mycollFloat32, mycollSum, c, nullptr),
            mycollSuccess);
  ASSERT_EQ(mycollGroupEnd(), mycollSuccess);
  EXPECT_EQ(b[7], 3.0f);
  EXPECT_EQ(x[7], 3.0f);
  // Released at the group's end: another thread may use it now.
  std::thread([&] { other = allreduce_works(c) ? mycollSuccess : mycollInternalError; }).join();
  EXPECT_EQ(other, mycollSuccess);
  // A thread ending inside a group lets the communicator go.
  std::thread([&] {
    mycollGroupStart();
    mycollAllReduce(a.data(), x.data(), 8, mycollFloat32, mycollSum, c, nullptr);
  }).join();
  EXPECT_TRUE(allreduce_works(c));
  EXPECT_EQ(mycollCommDestroy(c), mycollSuccess);
}

TEST_F(Registry, PartlyOverlappingBuffersAreRejectedAndCommStaysUsable) {
  mycollComm_t c = one_rank_comm();
  std::vector<float> buf(64, 1.0f);
  EXPECT_EQ(mycollAllReduce(buf.data(), buf.data() + 1, 32, mycollFloat32, mycollSum, c, nullptr),
            mycollInvalidArgument);
  EXPECT_TRUE(contains(mycollGetLastError(c), "partly overlap")) << mycollGetLastError(c);
  // All-gather: the receive buffer spans nranks blocks; in place is allowed.
  EXPECT_EQ(mycollAllGather(buf.data(), buf.data(), 16, mycollFloat32, c, nullptr), mycollSuccess);
  EXPECT_EQ(mycollAllGather(buf.data() + 8, buf.data(), 16, mycollFloat32, c, nullptr),
            mycollInvalidArgument);
  EXPECT_TRUE(allreduce_works(c));
  mycollResult_t async = mycollInternalError;
  EXPECT_EQ(mycollCommGetAsyncError(c, &async), mycollSuccess);
  EXPECT_EQ(async, mycollSuccess);
  EXPECT_EQ(mycollCommDestroy(c), mycollSuccess);
}

// Every collective with count 0, buffers NULL (nothing to read or write):
// k picks the collective, the rest are its arguments.
constexpr int kZeroCountColls = 8;
mycollResult_t zero_count_call(int k, mycollComm_t c, mycollDataType_t t = mycollFloat32,
                               mycollRedOp_t op = mycollSum, int root = 0) {
  switch (k) {
    case 0: return mycollAllReduce(nullptr, nullptr, 0, t, op, c, nullptr);
    case 1: return mycollBroadcast(nullptr, nullptr, 0, t, root, c, nullptr);
    case 2: return mycollReduce(nullptr, nullptr, 0, t, op, root, c, nullptr);
    case 3: return mycollAllGather(nullptr, nullptr, 0, t, c, nullptr);
    case 4: return mycollReduceScatter(nullptr, nullptr, 0, t, op, c, nullptr);
    case 5: return mycollAllToAll(nullptr, nullptr, 0, t, c, nullptr);
    case 6: return mycollScatter(nullptr, nullptr, 0, t, root, c, nullptr);
    default: return mycollGather(nullptr, nullptr, 0, t, root, c, nullptr);
  }
}
bool zero_count_reduces(int k) { return k == 0 || k == 2 || k == 4; }
bool zero_count_rooted(int k) { return k == 1 || k == 2 || k == 6 || k == 7; }

// A collective of count 0 returns at the API entry without pinning the
// communicator (issue 17: Open MPI's zero-count calls took 12 ns, mycoll's
// pinned ones 28): it must still find every wrong argument and every
// communicator it may not use, as a call with elements would, and say the
// same thing.
TEST_F(Registry, CallsOfCountZeroCheckTheirArgumentsAndTheCommunicator) {
  mycollComm_t c = one_rank_comm();
  ASSERT_NE(c, nullptr);
  for (int k = 0; k < kZeroCountColls; ++k) {
    SCOPED_TRACE("collective " + std::to_string(k));
    EXPECT_EQ(zero_count_call(k, c), mycollSuccess) << mycollGetLastError(c);
    EXPECT_EQ(zero_count_call(k, c, static_cast<mycollDataType_t>(mycollNumTypes)),
              mycollInvalidArgument);
    EXPECT_TRUE(contains(mycollGetLastError(c), "is not a mycollDataType_t"))
        << mycollGetLastError(c);
    EXPECT_EQ(zero_count_call(k, c, static_cast<mycollDataType_t>(-1)), mycollInvalidArgument);
    // An op or root the call does not take is not looked at.
    EXPECT_EQ(zero_count_call(k, c, mycollFloat32, static_cast<mycollRedOp_t>(mycollNumOps)),
              zero_count_reduces(k) ? mycollInvalidArgument : mycollSuccess);
    if (zero_count_reduces(k))
      EXPECT_TRUE(contains(mycollGetLastError(c), "is not a mycollRedOp_t"))
          << mycollGetLastError(c);
    for (int root : {1, -1}) {
      EXPECT_EQ(zero_count_call(k, c, mycollFloat32, mycollSum, root),
                zero_count_rooted(k) ? mycollInvalidArgument : mycollSuccess);
      if (zero_count_rooted(k))
        EXPECT_TRUE(contains(mycollGetLastError(c), "out of range [0, 1)"))
            << mycollGetLastError(c);
    }
  }
  EXPECT_TRUE(allreduce_works(c));  // argument errors leave it usable

  // Inside another thread's call (an open group holds the pin): refused
  // as any call is, and the group's own call still runs.
  std::mutex mu;
  std::condition_variable cv;
  int stage = 0;
  std::vector<float> a(8, 3.0f), b(8, 0.0f);
  mycollResult_t group_end = mycollInternalError;
  std::thread holder([&] {
    mycollGroupStart();
    mycollAllReduce(a.data(), b.data(), 8, mycollFloat32, mycollSum, c, nullptr);
    std::unique_lock<std::mutex> lk(mu);
    stage = 1;
    cv.notify_all();
    cv.wait(lk, [&] { return stage == 2; });
    group_end = mycollGroupEnd();
  });
  {
    std::unique_lock<std::mutex> lk(mu);
    cv.wait(lk, [&] { return stage == 1; });
  }
  for (int k = 0; k < kZeroCountColls; ++k) {
    EXPECT_EQ(zero_count_call(k, c), mycollInvalidUsage) << k;
    EXPECT_TRUE(contains(mycollGetLastError(nullptr), "in use by another thread"))
        << mycollGetLastError(nullptr);
  }
  {
    std::lock_guard<std::mutex> lk(mu);
    stage = 2;
    cv.notify_all();
  }
  holder.join();
  EXPECT_EQ(group_end, mycollSuccess);
  EXPECT_EQ(b[7], 3.0f);
  for (int k = 0; k < kZeroCountColls; ++k) EXPECT_EQ(zero_count_call(k, c), mycollSuccess) << k;

  // A failed communicator's sticky error, and an aborted one's.
  mycollComm_t failed = one_rank_comm();
  mycoll::registry_peek(failed)->fail(mycollRemoteError, "rank 0: a probe failure");
  mycollComm_t stopped = one_rank_comm();
  mycoll::registry_peek(stopped)->interrupt();  // abort's first half: the slot stays live
  for (int k = 0; k < kZeroCountColls; ++k) {
    EXPECT_EQ(zero_count_call(k, failed), mycollRemoteError) << k;
    EXPECT_TRUE(contains(mycollGetLastError(failed), "a probe failure"))
        << mycollGetLastError(failed);
    EXPECT_EQ(zero_count_call(k, stopped), mycollInvalidUsage) << k;
    EXPECT_TRUE(contains(mycollGetLastError(stopped), "aborted")) << mycollGetLastError(stopped);
  }
  EXPECT_EQ(mycollCommDestroy(failed), mycollSuccess);
  EXPECT_EQ(mycollCommDestroy(stopped), mycollSuccess);

  // Destroyed, and destroyed with its slot taken by the next communicator
  // (whose count of ranks the slot now holds): not a communicator.
  ASSERT_EQ(mycollCommDestroy(c), mycollSuccess);
  for (int k = 0; k < kZeroCountColls; ++k) {
    EXPECT_EQ(zero_count_call(k, c), mycollInvalidArgument) << k;
    EXPECT_TRUE(contains(mycollGetLastError(nullptr), "destroyed")) << mycollGetLastError(nullptr);
  }
  mycollComm_t next = one_rank_comm();
  EXPECT_NE(next, c);
  for (int k = 0; k < kZeroCountColls; ++k) {
    EXPECT_EQ(zero_count_call(k, c), mycollInvalidArgument) << k;
    EXPECT_EQ(zero_count_call(k, next), mycollSuccess) << k;
  }
  EXPECT_EQ(zero_count_call(0, nullptr), mycollInvalidArgument);
  EXPECT_TRUE(contains(mycollGetLastError(nullptr), "comm is NULL")) << mycollGetLastError(nullptr);
  EXPECT_EQ(mycollCommDestroy(next), mycollSuccess);
}

}  // namespace
