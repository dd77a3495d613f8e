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

// A host collective that repeats the communicator's last small-message call
// exactly runs without its argument checks and plan lookup
// (submit_repeat). Calls that repeat it but for one argument (op, type,
// count, in place, output buffer, root), calls of other collectives between
// repeats, and enough other shapes to evict its cached plan must each run
// as called: the same buffers throughout, inputs rewritten before every
// call, every output element and one element past it checked. 2 and 3
// ranks on shm (the path needs records); 1 rank too (no messages at all).
TEST(Comm, RepeatedCallsHonourEveryChangedArgument) {
  for (int nranks : {1, 2, 3}) {
    LaunchOptions opt;
    opt.nranks = nranks;
    opt.env = {{"MYCOLL_TRANSPORT", "shm"}, {"MYCOLL_TIMEOUT", "30"}};
    auto res = run_ranks(opt, [](mycollComm_t comm, int rank, int n, const mycollUniqueId&) {
      enum Kind { kAllReduce, kBroadcast, kReduce, kAllGather };
      struct Spec {
        Kind kind;
        size_t count;
        mycollDataType_t dt;  // mycollInt32 or mycollUint32 (same bits, other order)
        mycollRedOp_t op;
        int root;
        int in, out;       // buffer numbers; in == out: in place
        bool bad = false;  // an invalid argument: mycollInvalidArgument expected
      };
      // A chain in which each spec differs from the one before in one
      // argument, each run three times in a row.
      const Spec base{kAllReduce, 5, mycollInt32, mycollSum, 0, 0, 1};
      std::vector<Spec> chain{base};
      auto next = [&](auto edit) {
        Spec s = chain.back();
        edit(s);
        chain.push_back(s);
      };
      next([](Spec& s) { s.op = mycollMax; });
      next([](Spec& s) { s.dt = mycollUint32; });  // negatives now the largest
      next([](Spec& s) { s.op = mycollMin; });
      next([](Spec& s) { s.count = 7; });
      next([](Spec& s) { s.in = 1; });  // in place
      next([](Spec& s) { s.out = 2; });
      next([](Spec& s) { s.in = 2; });  // in place
      chain.push_back({kBroadcast, 5, mycollInt32, mycollSum, 0, 0, 1});
      next([&](Spec& s) { s.root = n - 1; });
      next([](Spec& s) { s.kind = kReduce; });
      next([](Spec& s) { s.root = 0; });
      next([](Spec& s) { s.op = mycollMax; });
      chain.push_back({kAllGather, 3, mycollInt32, mycollSum, 0, 0, 1});
      next([](Spec& s) { s.in = 1; });  // in place
      std::vector<Spec> seq;
      for (const Spec& sp : chain)
        for (int k = 0; k < 3; ++k) seq.push_back(sp);
      // Then the base, and 17 calls of other shapes too large for the
      // small-message path (they build plans, evicting the base's, and are
      // not remembered themselves), and the base again.
      seq.push_back(base);
      for (size_t c = 2000; c < 2017; ++c) {
        Spec s = base;
        s.count = c;
        seq.push_back(s);
      }
      seq.push_back(base);
      seq.push_back(base);
      // A repeat but for one invalid argument is refused as any call with
      // it would be, and the next call runs.
      const Spec bcast{kBroadcast, 5, mycollInt32, mycollSum, 0, 0, 1};
      Spec bad_op = base, bad_type = base, bad_root = bcast;
      bad_op.op = static_cast<mycollRedOp_t>(99);
      bad_type.dt = static_cast<mycollDataType_t>(99);
      bad_root.root = n;
      bad_op.bad = bad_type.bad = bad_root.bad = true;
      Spec null_out = base, overlap = base;
      null_out.out = -1;  // recvbuff NULL
      overlap.out = -2;   // recvbuff one element past sendbuff: partly overlapping
      null_out.bad = overlap.bad = true;
      for (const Spec& sp : {base, bad_op, base, bad_type, base, null_out, base, overlap, base,
                             bcast, bad_root, bcast})
        seq.push_back(sp);

      const size_t cap = 2048 * static_cast<size_t>(n);
      std::vector<std::vector<int32_t>> buf(3, std::vector<int32_t>(cap + 1));
      auto value = [](int r, int iter, size_t i) {
        return static_cast<int32_t>((r + 1) * 7919 + iter * 131 + static_cast<int>(i) * 17) % 2001 -
               1000;
      };
      auto combine = [](mycollDataType_t dt, mycollRedOp_t op, int32_t a, int32_t b) -> int32_t {
        const uint32_t ua = static_cast<uint32_t>(a), ub = static_cast<uint32_t>(b);
        switch (op) {
          case mycollSum: return static_cast<int32_t>(ua + ub);
          case mycollMax:
            return dt == mycollUint32 ? static_cast<int32_t>(std::max(ua, ub)) : std::max(a, b);
          default:
            return dt == mycollUint32 ? static_cast<int32_t>(std::min(ua, ub)) : std::min(a, b);
        }
      };
      const int32_t kPast = -77777;
      for (size_t iter = 0; iter < seq.size(); ++iter) {
        const Spec& sp = seq[iter];
        const int it = static_cast<int>(iter);
        const size_t c = sp.count;
        const bool in_place = sp.in == sp.out;
        for (auto& b : buf) std::fill(b.begin(), b.end(), kPast);
        int32_t* out = sp.out == -1   ? nullptr
                       : sp.out == -2 ? buf[static_cast<size_t>(sp.in)].data() + 1
                                      : buf[static_cast<size_t>(sp.out)].data();
        // The input: at its place in the output when in place (all-gather:
        // this rank's block), else its own buffer.
        int32_t* in = in_place && sp.kind == kAllGather ? out + static_cast<size_t>(rank) * c
                      : in_place                        ? out
                                                        : buf[static_cast<size_t>(sp.in)].data();
        for (size_t i = 0; i < c && !sp.bad; ++i) in[i] = value(rank, it, i);
        mycollResult_t r = mycollSuccess;
        switch (sp.kind) {
          case kAllReduce: r = mycollAllReduce(in, out, c, sp.dt, sp.op, comm, nullptr); break;
          case kBroadcast: r = mycollBroadcast(in, out, c, sp.dt, sp.root, comm, nullptr); break;
          case kReduce: r = mycollReduce(in, out, c, sp.dt, sp.op, sp.root, comm, nullptr); break;
          case kAllGather: r = mycollAllGather(in, out, c, sp.dt, comm, nullptr); break;
        }
        const std::string at = "call " + std::to_string(iter) + " (kind " +
                               std::to_string(sp.kind) + ", count " + std::to_string(c) + ")";
        if (sp.bad) {
          if (!check(r == mycollInvalidArgument,
                     at + ": an invalid argument gave " + mycollGetErrorString(r)))
            return 1;
          continue;
        }
        if (!check(r == mycollSuccess, at + ": " + mycollGetLastError(comm))) return 1;
        const bool writes = sp.kind != kReduce || rank == sp.root;
        const size_t outn = sp.kind == kAllGather ? c * static_cast<size_t>(n) : c;
        for (size_t i = 0; writes && i < outn; ++i) {
          int32_t want = 0;
          if (sp.kind == kBroadcast) {
            want = value(sp.root, it, i);
          } else if (sp.kind == kAllGather) {
            want = value(static_cast<int>(i / c), it, i % c);
          } else {
            want = value(0, it, i);
            for (int p = 1; p < n; ++p) want = combine(sp.dt, sp.op, want, value(p, it, i));
          }
          if (!check(out[i] == want, at + " element " + std::to_string(i) + ": got " +
                                         std::to_string(out[i]) + ", want " + std::to_string(want)))
            return 1;
        }
        if (!check(!writes || out[outn] == kPast, at + ": wrote past the output")) return 1;
      }
      return 0;
    });
    EXPECT_EQ(describe_failures(res), "") << nranks << " ranks";
  }
}

// A repeated small call after the peer died fails, and the repeat after
// that names the earlier failure (the communicator's sticky error is
// checked on the repeat path too), within MYCOLL_TIMEOUT.
TEST(Comm, RepeatedCallAfterAPeerDiedReportsTheFailure) {
  LaunchOptions opt;
  opt.nranks = 2;
  opt.env = {{"MYCOLL_TRANSPORT", "shm"}, {"MYCOLL_TIMEOUT", "10"}};
  opt.timeout_s = 60;
  auto res = run_ranks(opt, [](mycollComm_t comm, int rank, int n, const mycollUniqueId&) {
    std::vector<float> in(6), out(6);
    for (int k = 0; k < 3; ++k) {
      for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(rank * 100 + k + i);
      if (!check(mycollAllReduce(in.data(), out.data(), 5, mycollFloat32, mycollSum, comm,
                                 nullptr) == mycollSuccess,
                 mycollGetLastError(comm)))
        return 1;
      for (size_t i = 0; i < 5; ++i)
        if (!check(out[i] == static_cast<float>(100 + 2 * (k + i)), "element " + std::to_string(i)))
          return 1;
    }
    if (rank == 1) _exit(0);  // leaves without a word
    const mycollResult_t first =
        mycollAllReduce(in.data(), out.data(), 5, mycollFloat32, mycollSum, comm, nullptr);
    if (!check(first == mycollRemoteError, std::string("call after the peer died: ") +
                                               mycollGetErrorString(first) + ": " +
                                               mycollGetLastError(comm)))
      return 1;
    const mycollResult_t again =
        mycollAllReduce(in.data(), out.data(), 5, mycollFloat32, mycollSum, comm, nullptr);
    const std::string why = mycollGetLastError(comm);
    if (!check(again == mycollRemoteError && contains(why.c_str(), "earlier failure"),
               std::string("the repeat: ") + mycollGetErrorString(again) + ": " + why))
      return 1;
    (void)n;
    return 0;
  });
  EXPECT_EQ(describe_failures(res), "");
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
