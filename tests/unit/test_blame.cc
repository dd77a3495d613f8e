// The wait-for chain that names the root cause of a failure
// (lib/bootstrap/blame.h): reports from other ranks, the links that ended,
// and whom the failing rank waited for.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bootstrap/blame.h"

namespace {

using mycoll::Blame;
using mycoll::BlameView;
using mycoll::find_root_cause;
using mycoll::bswire::Report;

struct World {
  int self;
  std::vector<Report> reports;
  std::vector<std::string> gone;
  explicit World(int self_rank, int n) : self(self_rank), gone(n) {}
  void report(int origin, std::vector<int> waits, std::string text, std::vector<int> also = {}) {
    reports.push_back(Report{origin, std::move(waits), std::move(text), std::move(also)});
  }
  Blame blame(std::vector<int> waits_for, std::vector<int> also = {}) const {
    BlameView v;
    v.self = self;
    v.waits_for = std::move(waits_for);
    v.also = std::move(also);
    v.reports = &reports;
    v.gone = &gone;
    return find_root_cause(v);
  }
};

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// The loaded CI's case: rank 2 stopped; rank 0 waits for rank 1, which
// waits for rank 2. Whichever times out first, both name rank 2.
TEST(Blame, FollowsTheChainToTheRankThatReportedNothing) {
  World w0(0, 3);
  w0.report(1, {2}, "rank 1: no progress for 4 s (MYCOLL_TIMEOUT) while receiving from rank 2");
  Blame b = w0.blame({1});
  EXPECT_FALSE(b.settled) << "rank 2 may still report";
  EXPECT_EQ(b.roots, std::vector<int>{2});
  EXPECT_TRUE(has(b.text, "rank 2 reported no failure and made no progress")) << b.text;
  EXPECT_TRUE(has(b.text, "rank 1 was waiting for it")) << b.text;

  // Rank 1 heard rank 0's report first (rank 0 waits for rank 1): that is
  // no cause of rank 1's own wait.
  World w1(1, 3);
  w1.report(0, {1}, "rank 0: no progress for 4 s (MYCOLL_TIMEOUT) while receiving from rank 1");
  b = w1.blame({2});
  EXPECT_EQ(b.roots, std::vector<int>{2});
  EXPECT_TRUE(has(b.text, "rank 2 reported no failure")) << b.text;
  EXPECT_FALSE(has(b.text, "was waiting for it")) << b.text;
}

// Before the awaited rank's report arrives, it is the suspect; unsettled.
TEST(Blame, TheAwaitedRankWhileItsReportIsAwaited) {
  World w(0, 3);
  Blame b = w.blame({1});
  EXPECT_FALSE(b.settled);
  EXPECT_EQ(b.roots, std::vector<int>{1});
  EXPECT_TRUE(has(b.text, "rank 1 reported no failure")) << b.text;
}

// A link that ended after everything its rank sent settles it: that rank
// ended without a report.
TEST(Blame, AnEndedLinkWithoutAReportSettles) {
  World w(0, 3);
  w.report(1, {2}, "rank 1: connection to rank 2 closed");
  w.gone[2] = "closed (process exited or aborted?)";
  Blame b = w.blame({1});
  EXPECT_TRUE(b.settled);
  EXPECT_EQ(b.roots, std::vector<int>{2});
  EXPECT_TRUE(has(b.text, "rank 2 reported no failure and its link closed (process exited"))
      << b.text;
}

// A rank that failed waiting for nobody is the root; its report is the
// text (named, where its text does not name it).
TEST(Blame, AReportWaitingForNobodyIsTheCause) {
  World w(0, 4);
  w.report(1, {3}, "rank 1: no progress while receiving from rank 3");
  w.report(3, {}, "an illegal memory access was encountered");
  Blame b = w.blame({1});
  EXPECT_TRUE(b.settled);
  EXPECT_EQ(b.roots, std::vector<int>{3});
  EXPECT_EQ(b.text, "rank 3: an illegal memory access was encountered (rank 1 was waiting for it)");
}

// Waits that come back around: no rank to blame, a cycle named.
TEST(Blame, ACycleIsNamedAsOne) {
  World w(2, 4);
  w.report(0, {1}, "rank 0: no progress while receiving from rank 1");
  w.report(1, {2}, "rank 1: no progress while receiving from rank 2");
  Blame b = w.blame({0});
  EXPECT_TRUE(b.settled);
  EXPECT_TRUE(b.roots.empty());
  EXPECT_TRUE(has(b.text, "ranks 0, 1, 2 were all waiting for one another")) << b.text;
}

// Several waits: every branch followed, each end named once.
TEST(Blame, EveryBranchIsFollowed) {
  World w(0, 5);
  w.report(1, {3, 4}, "rank 1: no progress while receiving from ranks 3 and 4");
  w.report(2, {}, "rank 2 aborted");
  w.report(4, {3}, "rank 4: no progress while receiving from rank 3");
  w.gone[3] = "closed (process exited or aborted?)";
  Blame b = w.blame({1, 2});
  EXPECT_TRUE(b.settled);
  EXPECT_EQ(b.roots, (std::vector<int>{2, 3}));
  EXPECT_TRUE(has(b.text, "rank 2 aborted")) << b.text;
  EXPECT_TRUE(has(b.text, "rank 3 reported no failure and its link closed")) << b.text;
}

// Issue 14's lost connection: rank 2 stopped; rank 0 waited for rank 1 and
// timed out first, reported, and shut its links; rank 1, waiting on rank 0
// and rank 2, lost its connection to rank 0 before its own timeout. Its
// report names rank 0 and, apart, rank 2. Both ranks name rank 2, where the
// waits through the lost connection alone come back around.
TEST(Blame, ALostConnectionToTheFirstFailingRankLeadsOnThroughTheOtherWaits) {
  World w0(0, 3);
  w0.report(1, {0}, "rank 1: connection to rank 0 closed", {2});
  Blame b = w0.blame({1});
  EXPECT_EQ(b.roots, std::vector<int>{2}) << b.text;
  EXPECT_FALSE(b.settled) << "rank 2 may still report";
  EXPECT_TRUE(has(b.text, "rank 2 reported no failure and made no progress")) << b.text;
  EXPECT_TRUE(has(b.text, "rank 1 was waiting for it")) << b.text;
  w0.gone[2] = "closed (process exited or aborted?)";
  b = w0.blame({1});
  EXPECT_TRUE(b.settled);
  EXPECT_EQ(b.roots, std::vector<int>{2}) << b.text;

  World w1(1, 3);
  w1.report(0, {1}, "rank 0: no progress for 4 s (MYCOLL_TIMEOUT) while receiving from rank 1");
  b = w1.blame({0}, {2});
  EXPECT_EQ(b.roots, std::vector<int>{2}) << b.text;
  EXPECT_FALSE(has(b.text, "waiting for one another")) << b.text;
}

// The other waits are followed only where the waits come back around: a
// root found without them is the answer (a live rank's other transfers are
// not blamed), and a cycle they do not break is still named as one.
TEST(Blame, TheOtherWaitsOnlyWhereTheWaitsComeBackAround) {
  World w(1, 3);
  w.report(0, {}, "rank 0 aborted");
  Blame b = w.blame({0}, {2});
  EXPECT_TRUE(b.settled);
  EXPECT_EQ(b.roots, std::vector<int>{0});
  EXPECT_FALSE(has(b.text, "rank 2")) << b.text;

  World c(2, 4);
  c.report(0, {1}, "rank 0: connection to rank 1 closed", {2});
  c.report(1, {2}, "rank 1: no progress while receiving from rank 2");
  b = c.blame({0}, {1});
  EXPECT_TRUE(b.settled);
  EXPECT_TRUE(b.roots.empty());
  EXPECT_TRUE(has(b.text, "ranks 0, 1, 2 were all waiting for one another")) << b.text;
}

// The GPU path: rank 1's kernels were stopped by rank 2's report (a call
// mismatch its kernel found); rank 1 reports no waits and rank 2 as its
// cause. A rank waiting on rank 1 names rank 2; where the cause leads back
// (rank 2 waited for rank 1), rank 1 is the root, as before.
TEST(Blame, AReportCausedByAnotherLeadsOnToIt) {
  World w(0, 3);
  w.report(1, {}, "rank 1: GPU kernels stopped: another rank failed", {2});
  w.report(2, {}, "rank 2: call mismatch: all_reduce of 7 floats here, 9 on rank 0");
  Blame b = w.blame({1});
  EXPECT_TRUE(b.settled);
  EXPECT_EQ(b.roots, std::vector<int>{2}) << b.text;
  EXPECT_TRUE(has(b.text, "call mismatch")) << b.text;

  World k(0, 3);  // stopped by the end of rank 2's link
  k.report(1, {}, "rank 1: rank 2's bootstrap link closed", {2});
  k.gone[2] = "closed (process exited or aborted?)";
  b = k.blame({1});
  EXPECT_TRUE(b.settled);
  EXPECT_EQ(b.roots, std::vector<int>{2}) << b.text;
  EXPECT_TRUE(has(b.text, "rank 2 reported no failure and its link closed")) << b.text;

  World back(0, 3);
  back.report(2, {1}, "rank 2: no progress while receiving from rank 1");
  back.report(1, {}, "rank 1: GPU kernels stopped: another rank failed", {2});
  b = back.blame({2});
  EXPECT_TRUE(b.settled);
  EXPECT_EQ(b.roots, std::vector<int>{1}) << b.text;
  EXPECT_TRUE(has(b.text, "GPU kernels stopped")) << b.text;
}

TEST(Blame, NoWaitsNoCause) {
  World w(0, 3);
  w.report(1, {}, "rank 1 aborted");
  Blame b = w.blame({});
  EXPECT_TRUE(b.text.empty());
  EXPECT_TRUE(b.roots.empty());
}

}  // namespace
