// Hostile and accidental strangers at the rendezvous: connection floods,
// other jobs on the same address, a rendezvous without a secret.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/socket_util.h"
#include "base/error.h"
#include "thread_bootstrap.h"

namespace mycoll {
namespace {

class Hostile : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("MYCOLL_TIMEOUT", "30", 1);
    unsetenv("MYCOLL_SECRET");
    unsetenv("MYCOLL_JOB_ID");
    unsetenv("MYCOLL_REQUIRE_SECRET");
  }
  void TearDown() override { SetUp(); }
};

// 600 idle connections from one source (more than the per-source and close
// to the total bound) arrive before the ranks: the oldest are evicted, the
// real ranks still meet, promptly.
TEST_F(Hostile, IdleConnectionFloodDoesNotLockRanksOut) {
  mycollUniqueId uid;
  create_unique_id(&uid);
  UniqueIdData id = unpack_unique_id(uid);
  const net::SockAddr root = net::SockAddr::from_bytes(id.addr);
  std::vector<net::Fd> flood;
  for (int i = 0; i < 600; ++i)
    flood.push_back(net::connect_to(root, net::Deadline::after(5), "flood", true));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // root accepts them
  auto t0 = std::chrono::steady_clock::now();
  auto errors = run_rank_threads(3, [&](int r) {
    auto bs = Bootstrap::init(id, r, 3, 20, "");
    bs->barrier();
  });
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (int r = 0; r < 3; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  EXPECT_LT(secs, 10.0);
}

TEST_F(Hostile, JobIdentitySeparatesJobsOnOneAddress) {
  setenv("MYCOLL_JOB_ID", "job-a", 1);
  UniqueIdData a1 = unique_id_from_address("127.0.0.1", 29555);
  UniqueIdData a2 = unique_id_from_address("127.0.0.1", 29555);
  setenv("MYCOLL_JOB_ID", "job-b", 1);
  UniqueIdData b = unique_id_from_address("127.0.0.1", 29555);
  unsetenv("MYCOLL_JOB_ID");
  setenv("SLURM_JOB_ID", "77", 1);
  setenv("SLURM_STEP_ID", "0", 1);
  UniqueIdData s0 = unique_id_from_address("127.0.0.1", 29555);
  setenv("SLURM_STEP_ID", "1", 1);
  UniqueIdData s1 = unique_id_from_address("127.0.0.1", 29555);
  unsetenv("SLURM_JOB_ID");
  unsetenv("SLURM_STEP_ID");
  EXPECT_EQ(a1.secret, a2.secret);  // ranks of one job agree without talking
  EXPECT_NE(a1.secret, b.secret);
  EXPECT_NE(s0.secret, s1.secret);
  setenv("MYCOLL_SECRET", "s3cret", 1);
  EXPECT_NE(unique_id_from_address("127.0.0.1", 29555).secret, s0.secret);
}

// Two jobs given the same address: the second job's rank is refused by the
// first job's root (authentication), it never joins.
TEST_F(Hostile, OtherJobOnTheSameAddressNeverPairs) {
  setenv("MYCOLL_JOB_ID", "job-a", 1);
  const int port = 20000 + static_cast<int>(getpid() % 20000);
  UniqueIdData a = unique_id_from_address("127.0.0.1", port);
  setenv("MYCOLL_JOB_ID", "job-b", 1);
  UniqueIdData b = unique_id_from_address("127.0.0.1", port);
  start_root_listener(a, 2, 5.0);
  try {
    Bootstrap::init(b, 1, 2, 3.0, "");
    FAIL() << "a rank of another job joined";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), mycollInvalidUsage) << e.what();
    EXPECT_NE(std::string(e.what()).find("authentication"), std::string::npos) << e.what();
  }
}

TEST_F(Hostile, RequireSecretRefusesAnUnauthenticatedRendezvous) {
  setenv("MYCOLL_REQUIRE_SECRET", "1", 1);
  try {
    unique_id_from_address("127.0.0.1", 29555);
    FAIL() << "no error without MYCOLL_SECRET";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), mycollInvalidUsage);
    EXPECT_NE(std::string(e.what()).find("MYCOLL_SECRET"), std::string::npos) << e.what();
  }
  setenv("MYCOLL_SECRET", "s3cret", 1);
  EXPECT_NO_THROW(unique_id_from_address("127.0.0.1", 29555));
}

}  // namespace
}  // namespace mycoll
