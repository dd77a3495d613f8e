// Handles of destroyed communicators, destroy/abort with queued group calls,
// and argument errors found before data moves: one-rank communicators in one
// process (the multi-rank cases are in tests/e2e/test_misuse.cc).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

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

}  // namespace
