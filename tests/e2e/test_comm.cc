// Communicator life cycle on real processes: split, init from the
// environment, queries, groups with many peers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/coll_check.h"
#include "common/multiproc.h"

using namespace mycoll_test;

namespace {

TEST(Comm, VersionAndErrorStrings) {
  int v = 0;
  ASSERT_EQ(mycollGetVersion(&v), mycollSuccess);
  EXPECT_EQ(v, MYCOLL_VERSION_CODE);
  EXPECT_EQ(mycollGetVersion(nullptr), mycollInvalidArgument);
  EXPECT_STREQ(mycollGetErrorString(mycollTimeout), "operation timed out");
  EXPECT_EQ(mycollGetUniqueId(nullptr), mycollInvalidArgument);
  mycollComm_t c = nullptr;
  mycollUniqueId bad;
  std::memset(&bad, 0x11, sizeof(bad));
  EXPECT_EQ(mycollCommInitRank(&c, 2, bad, 0), mycollInvalidArgument);
  EXPECT_NE(std::strstr(mycollGetLastError(nullptr), "unique id"), nullptr)
      << mycollGetLastError(nullptr);
  EXPECT_EQ(mycollCommDestroy(nullptr), mycollSuccess);
}

TEST(Comm, InitAllWithoutGpuIsInvalidUsage) {
  int dev = 0;
  mycollComm_t comms[2];
  mycollResult_t r = mycollCommInitAll(comms, 2, &dev);
  if (r == mycollSuccess) GTEST_SKIP() << "machine has GPUs; covered by the GPU tests";
  EXPECT_TRUE(r == mycollInvalidUsage || r == mycollInvalidArgument) << mycollGetErrorString(r);
}

TEST(Comm, SplitByParityWithKeysReversingOrder) {
  LaunchOptions opt;
  opt.nranks = 5;
  opt.env = {{"MYCOLL_TIMEOUT", "30"}};
  auto res = run_ranks(opt, [](mycollComm_t comm, int rank, int n, const mycollUniqueId&) {
    mycollComm_t sub = nullptr;
    int color = rank == 4 ? MYCOLL_SPLIT_NOCOLOR : rank % 2;
    if (!check(mycollCommSplit(comm, color, -rank, &sub) == mycollSuccess,
               std::string("split: ") + mycollGetLastError(comm)))
      return 1;
    if (rank == 4) return check(sub == nullptr, "NOCOLOR gives NULL") ? 0 : 1;
    int sn = 0, sr = -1, dev = 7;
    mycollCommCount(sub, &sn);
    mycollCommUserRank(sub, &sr);
    mycollCommCuDevice(sub, &dev);
    check(sn == 2, "two ranks per color");
    check(dev == -1, "host communicator reports device -1");
    // Keys are -rank: higher old rank comes first.
    int expect_rank = (rank == 0 || rank == 1) ? 1 : 0;
    check(sr == expect_rank, "new rank ordered by key");
    // The sub-communicator works and holds only its members.
    std::vector<int32_t> a(33, rank), b(33);
    check(mycollAllReduce(a.data(), b.data(), 33, mycollInt32, mycollSum, sub, nullptr) ==
              mycollSuccess,
          "allreduce on split comm");
    int want = rank % 2 == 0 ? 0 + 2 : 1 + 3;
    for (int v : b) check(v == want, "split allreduce sum");
    mycollCommDestroy(sub);
    return 0;
  });
  EXPECT_EQ(describe_failures(res), "");
}

TEST(Comm, InitFromEnvWithMycollAndTorchrunVariables) {
  for (int variant = 0; variant < 2; ++variant) {
    LaunchOptions opt;
    opt.nranks = 3;
    opt.init_comm = false;
    int port = 29500 + (getpid() % 1000) * 2 + variant;
    opt.env = {{"MYCOLL_TIMEOUT", "30"}};
    opt.pre_init = [variant, port](int rank) {
      if (variant == 0) {
        setenv("MYCOLL_RANK", std::to_string(rank).c_str(), 1);
        setenv("MYCOLL_NRANKS", "3", 1);
        setenv("MYCOLL_ADDR", ("127.0.0.1:" + std::to_string(port)).c_str(), 1);
      } else {
        setenv("RANK", std::to_string(rank).c_str(), 1);
        setenv("WORLD_SIZE", "3", 1);
        setenv("MASTER_ADDR", "localhost", 1);
        setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      }
    };
    auto res = run_ranks(opt, [](mycollComm_t, int rank, int n, const mycollUniqueId&) {
      mycollComm_t comm = nullptr;
      if (!check(mycollCommInitFromEnv(&comm) == mycollSuccess,
                 std::string("init from env: ") + mycollGetLastError(nullptr)))
        return 1;
      int r = -1, sz = 0;
      mycollCommUserRank(comm, &r);
      mycollCommCount(comm, &sz);
      check(r == rank && sz == n, "rank and size from env");
      std::vector<double> a(10, rank + 1.0), b(10);
      check(mycollAllReduce(a.data(), b.data(), 10, mycollFloat64, mycollMax, comm, nullptr) ==
                mycollSuccess,
            "allreduce");
      for (double v : b) check(v == n, "max over ranks");
      mycollCommDestroy(comm);
      return 0;
    });
    EXPECT_EQ(describe_failures(res), "") << "variant " << variant;
  }
}

// Every rank sends a different-size message to every other rank, posted in a
// random order per rank, inside one group: must complete without deadlock.
TEST(Comm, GroupedSendRecvAllPairsRandomOrder) {
  for (const char* transport : {"shm", "socket"}) {
    LaunchOptions opt;
    opt.nranks = 5;
    opt.env = {{"MYCOLL_TRANSPORT", transport},
               {"MYCOLL_TIMEOUT", "30"},
               {"MYCOLL_SHM_FIFO_BYTES", "16K"}};
    auto res = run_ranks(opt, [](mycollComm_t comm, int rank, int n, const mycollUniqueId&) {
      auto size_of = [](int from, int to) {
        return static_cast<size_t>(1000 + 977 * from + 31 * to);
      };
      std::vector<std::vector<int64_t>> out(n), in(n);
      struct Item {
        bool send;
        int peer;
      };
      std::vector<Item> items;
      for (int p = 0; p < n; ++p) {
        out[p].resize(size_of(rank, p));
        for (size_t i = 0; i < out[p].size(); ++i)
          out[p][i] = rank * 1000000 + p * 10000 + static_cast<int64_t>(i);
        in[p].assign(size_of(p, rank), -1);
        items.push_back({true, p});
        items.push_back({false, p});
      }
      std::shuffle(items.begin(), items.end(), std::mt19937(rank * 7 + 1));
      mycollGroupStart();
      for (const Item& it : items) {
        if (it.send)
          mycollSend(out[it.peer].data(), out[it.peer].size(), mycollInt64, it.peer, comm, nullptr);
        else
          mycollRecv(in[it.peer].data(), in[it.peer].size(), mycollInt64, it.peer, comm, nullptr);
      }
      if (!check(mycollGroupEnd() == mycollSuccess,
                 std::string("group end: ") + mycollGetLastError(comm)))
        return 1;
      for (int p = 0; p < n; ++p)
        for (size_t i = 0; i < in[p].size(); ++i)
          if (!check(in[p][i] == p * 1000000 + rank * 10000 + static_cast<int64_t>(i),
                     "payload from rank " + std::to_string(p) + " element " + std::to_string(i)))
            return 1;
      return 0;
    });
    EXPECT_EQ(describe_failures(res), "") << transport;
  }
}

// Small grouped send/recv batches whose shapes repeat, change a little or
// come in another order (the small-message path reuses the last batch's
// plan only for the same peers, directions and sizes in order, renewing
// addresses and message numbers): every element of every receive checked,
// 2 ranks (next = previous) and 3, each batch's buffers at new addresses.
TEST(Comm, RepeatedSmallBatchesMatchEveryShapeChange) {
  for (int nranks : {2, 3}) {
    LaunchOptions opt;
    opt.nranks = nranks;
    opt.env = {{"MYCOLL_TRANSPORT", "shm"}, {"MYCOLL_TIMEOUT", "30"}};
    auto res = run_ranks(opt, [](mycollComm_t comm, int rank, int n, const mycollUniqueId&) {
      const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
      auto value = [](int from, int iter, size_t i) {
        return static_cast<int32_t>(from * 1000003 + iter * 1009 + static_cast<int>(i));
      };
      // Five buffers per direction, used in turn: addresses change between
      // batches of one shape.
      std::vector<std::vector<int32_t>> out(5), in(5);
      for (int iter = 0; iter < 200; ++iter) {
        const int shape = iter % 6;
        // shapes 0, 1: count 5; 2: count 6; 3, 4: receive first; 4 and 5 add
        // an empty send first; 5: count 1.
        const size_t count = shape == 2 ? 6 : shape == 5 ? 1 : 5;
        std::vector<int32_t>& o = out[iter % 5];
        std::vector<int32_t>& in_buf = in[(iter + 2) % 5];
        o.assign(count, 0);
        for (size_t i = 0; i < count; ++i) o[i] = value(rank, iter, i);
        in_buf.assign(count + 1, -7);  // one element past the message stays untouched
        mycollGroupStart();
        if (shape >= 4) mycollSend(o.data(), 0, mycollInt32, next, comm, nullptr);
        if (shape == 3 || shape == 4) {
          mycollRecv(in_buf.data(), count, mycollInt32, prev, comm, nullptr);
          mycollSend(o.data(), count, mycollInt32, next, comm, nullptr);
        } else {
          mycollSend(o.data(), count, mycollInt32, next, comm, nullptr);
          mycollRecv(in_buf.data(), count, mycollInt32, prev, comm, nullptr);
        }
        if (!check(mycollGroupEnd() == mycollSuccess,
                   "iteration " + std::to_string(iter) + ": " + mycollGetLastError(comm)))
          return 1;
        for (size_t i = 0; i < count; ++i)
          if (!check(in_buf[i] == value(prev, iter, i), "iteration " + std::to_string(iter) +
                                                            " element " + std::to_string(i) +
                                                            ": got " + std::to_string(in_buf[i])))
            return 1;
        if (!check(in_buf[count] == -7,
                   "iteration " + std::to_string(iter) + ": wrote past the message"))
          return 1;
      }
      return 0;
    });
    EXPECT_EQ(describe_failures(res), "") << nranks << " ranks";
  }
}

}  // namespace

namespace {

TEST(Comm, UnknownTransportOrNetIsAnErrorAtInit) {
  for (const auto& bad : {std::pair<const char*, const char*>{"MYCOLL_TRANSPORT", "carrier-pigeon"},
                          {"MYCOLL_NET", "smoke-signals"}}) {
    const char *var = bad.first, *value = bad.second;  // captured below: not a structured binding
    LaunchOptions opt;
    opt.nranks = 2;
    opt.init_comm = false;
    opt.env = {{"MYCOLL_TIMEOUT", "20"}, {var, value}};
    auto res = run_ranks(opt, [&](mycollComm_t, int rank, int n, const mycollUniqueId& id) {
      mycollComm_t comm = nullptr;
      mycollResult_t r = mycollCommInitRank(&comm, n, id, rank);
      check(r == mycollInvalidArgument || r == mycollInvalidUsage,
            std::string(var) + ": " + mycollGetErrorString(r));
      check(std::string(mycollGetLastError(nullptr)).find(value) != std::string::npos,
            std::string("message quotes the value: ") + mycollGetLastError(nullptr));
      return 0;
    });
    EXPECT_EQ(describe_failures(res), "") << var;
  }
}

}  // namespace
