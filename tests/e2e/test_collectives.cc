// Every collective x algorithm x transport x dtype x op x in/out-of-place x
// nranks, on real processes, every output element checked.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "common/coll_check.h"
#include "common/multiproc.h"

using namespace mycoll_test;

namespace {

using Param = std::tuple<std::string /*transport*/, int /*nranks*/, std::string /*algo*/>;

// Every (dtype, op, count, root, out of place / in place) case of one
// collective, each output element checked; false at the first wrong one.
bool check_cases(mycollComm_t comm, CollKind kind, const std::vector<mycollDataType_t>& types,
                 const std::vector<mycollRedOp_t>& ops, const std::vector<size_t>& counts,
                 const std::vector<int>& roots, const MemOps& mem, int* seed) {
  for (mycollDataType_t t : types)
    for (mycollRedOp_t op : ops)
      for (size_t count : counts)
        for (int root : roots)
          for (bool inplace : {false, true}) {
            if (kind == CollKind::SendRecvRing && inplace) continue;
            CheckCase c{kind, t, op, count, root, inplace, ++*seed % 17};
            std::string err;
            if (!check(run_and_check(comm, c, mem, &err), err)) return false;
          }
  return true;
}

// check_cases over every collective `want` takes, roots 0 and n-1 where
// rooted, `reduce_ops` where it reduces (sum elsewhere); false at the first
// wrong element.
template <typename Want>
bool check_kinds(mycollComm_t comm, int n, Want want, const std::vector<mycollDataType_t>& types,
                 const std::vector<mycollRedOp_t>& reduce_ops, const std::vector<size_t>& counts) {
  const MemOps mem = host_mem();
  int seed = 0;
  for (CollKind kind : kAllKinds) {
    if (!want(kind)) continue;
    const std::vector<int> roots =
        kind_rooted(kind) ? std::vector<int>{0, n - 1} : std::vector<int>{0};
    const std::vector<mycollRedOp_t> ops =
        kind_reduces(kind) ? reduce_ops : std::vector<mycollRedOp_t>{mycollSum};
    if (!check_cases(comm, kind, types, ops, counts, roots, mem, &seed)) return false;
  }
  return true;
}

class Collectives : public ::testing::TestWithParam<Param> {};

TEST_P(Collectives, EveryElementMatchesReference) {
  // (Not a structured binding: the lambda below captures algo.)
  const std::string transport = std::get<0>(GetParam()), algo = std::get<2>(GetParam());
  const int nranks = std::get<1>(GetParam());
  LaunchOptions opt;
  opt.nranks = nranks;
  opt.env = {{"MYCOLL_TRANSPORT", transport},
             {"MYCOLL_ALGO", algo},
             {"MYCOLL_TIMEOUT", "60"},
             // Small chunks and FIFOs: pipelining and channel wrap-around on modest sizes.
             {"MYCOLL_CHUNK_BYTES", "4K"},
             {"MYCOLL_SHM_FIFO_BYTES", "64K"}};
  opt.timeout_s = 600;
  auto res = run_ranks(opt, [&](mycollComm_t comm, int rank, int n, const mycollUniqueId&) {
    const std::vector<size_t> counts = {0, 1, 7, 1001};
    const std::vector<mycollDataType_t> types(std::begin(kAllTypes), std::end(kAllTypes));
    MemOps mem = host_mem();
    int seed = 0;
    for (CollKind kind : kAllKinds) {
      if (!algo_serves(algo, kind)) continue;
      std::vector<int> roots = {0};
      if (kind_rooted(kind)) roots = {0, n - 1, n / 2};
      std::vector<mycollRedOp_t> ops = {mycollSum};
      if (kind_reduces(kind)) ops.assign(std::begin(kAllOps), std::end(kAllOps));
      if (!check_cases(comm, kind, types, ops, counts, roots, mem, &seed)) return 1;
      // One larger message per collective: many chunks, uneven splits.
      CheckCase big{kind, mycollFloat32, mycollSum, 100003, n - 1, false, 3};
      std::string err;
      if (!check(run_and_check(comm, big, mem, &err), err)) return 1;
    }
    return 0;
  });
  EXPECT_EQ(describe_failures(res), "");
}

std::string name(const ::testing::TestParamInfo<Param>& info) {
  return std::get<0>(info.param) + "_" + std::to_string(std::get<1>(info.param)) + "ranks_" +
         std::get<2>(info.param);
}

INSTANTIATE_TEST_SUITE_P(Host, Collectives,
                         ::testing::Combine(::testing::Values("shm", "socket"),
                                            ::testing::Values(1, 2, 3, 4, 5, 8),
                                            ::testing::Values("auto", "ring", "tree", "rhd",
                                                              "direct", "twoshot", "doubling")),
                         name);

// MYCOLL_SHM_READ_BYTES moves the point where shm messages of collectives
// that do not reduce (and send/recv) switch from the FIFO to the receiver
// reading the sender's buffer: 0 (never), 1 (every message too large for a
// record), 4K. Every collective, every element checked, ranks deciding
// differently in the mixed case (each rank decides for what it sends).
using ReadParam = std::tuple<std::string /*threshold, or "mixed"*/, int /*nranks*/>;
class ShmRemoteRead : public ::testing::TestWithParam<ReadParam> {};

TEST_P(ShmRemoteRead, EveryElementMatchesReference) {
  const std::string threshold = std::get<0>(GetParam());
  const int nranks = std::get<1>(GetParam());
  LaunchOptions opt;
  opt.nranks = nranks;
  opt.env = {
      {"MYCOLL_TRANSPORT", "shm"}, {"MYCOLL_TIMEOUT", "60"}, {"MYCOLL_SHM_FIFO_BYTES", "64K"}};
  if (threshold != "mixed") opt.env["MYCOLL_SHM_READ_BYTES"] = threshold;
  opt.timeout_s = 300;
  auto res = run_ranks(opt, [&](mycollComm_t comm, int rank, int n, const mycollUniqueId&) {
    if (threshold == "mixed") {
      // Settings are read at init: odd ranks read every message too large
      // for a record, even ranks never, in a communicator split off after.
      setenv("MYCOLL_SHM_READ_BYTES", rank % 2 ? "1" : "0", 1);
      mycollComm_t sub = nullptr;
      if (mycollCommSplit(comm, 0, rank, &sub) != mycollSuccess) return 2;
      comm = sub;
    }
    const int rc = check_kinds(comm, n, [](CollKind k) { return !kind_reduces(k); },
                               {mycollInt8, mycollFloat32, mycollFloat64}, {}, {1, 7, 1001, 100003})
                       ? 0
                       : 1;
    if (threshold == "mixed") mycollCommDestroy(comm);
    return rc;
  });
  EXPECT_EQ(describe_failures(res), "");
}

INSTANTIATE_TEST_SUITE_P(Host, ShmRemoteRead,
                         ::testing::Combine(::testing::Values("0", "1", "4K", "mixed"),
                                            ::testing::Values(2, 3)),
                         [](const ::testing::TestParamInfo<ReadParam>& info) {
                           return "read_" + std::get<0>(info.param) + "_" +
                                  std::to_string(std::get<1>(info.param)) + "ranks";
                         });

// MYCOLL_HOST_NT_COPY_BYTES=1: every local copy of a collective that does
// not reduce (own block into the output, a broadcast root's input, an
// in-place all-to-all's blocks out of scratch) of 128 bytes and more that
// the general engine makes (the small-message path's copies stay memmove)
// goes through copy_host's streaming stores, at odd counts, so blocks start
// at unaligned addresses. Every element checked, in place and out of place,
// on the default plans and forced ring / direct.
using NtParam = std::tuple<int /*nranks*/, std::string /*algo*/>;
class HostNtCopy : public ::testing::TestWithParam<NtParam> {};

TEST_P(HostNtCopy, EveryElementMatchesReference) {
  const int nranks = std::get<0>(GetParam());
  const std::string algo = std::get<1>(GetParam());
  LaunchOptions opt;
  opt.nranks = nranks;
  opt.env = {{"MYCOLL_TRANSPORT", "shm"},
             {"MYCOLL_ALGO", algo},
             {"MYCOLL_TIMEOUT", "60"},
             {"MYCOLL_HOST_NT_COPY_BYTES", "1"}};
  opt.timeout_s = 300;
  auto res = run_ranks(opt, [&](mycollComm_t comm, int, int n, const mycollUniqueId&) {
    auto want = [&](CollKind k) { return !kind_reduces(k) && algo_serves(algo, k); };
    return check_kinds(comm, n, want, {mycollInt8, mycollFloat16, mycollFloat32, mycollFloat64}, {},
                       {7, 1001, 20011, 100003})
               ? 0
               : 1;
  });
  EXPECT_EQ(describe_failures(res), "");
}

INSTANTIATE_TEST_SUITE_P(Host, HostNtCopy,
                         ::testing::Combine(::testing::Values(2, 3, 5),
                                            ::testing::Values("auto", "ring", "direct")),
                         [](const ::testing::TestParamInfo<NtParam>& info) {
                           return std::to_string(std::get<0>(info.param)) + "ranks_" +
                                  std::get<1>(info.param);
                         });

// Socket buffers of a few KiB (MYCOLL_SOCKET_BUFFER_BYTES) and 32 KiB
// chunks: a message's header and payload go in one sendmsg that the kernel
// often takes only in part, splitting inside the header or the payload, and
// the receiver takes headers through peek with payloads cut anywhere. Every
// collective, every element checked, sizes around the 32 KiB line where
// the header and payload are written apart.
class SocketSmallBuffers : public ::testing::TestWithParam<int> {};

TEST_P(SocketSmallBuffers, EveryElementMatchesReference) {
  const int nranks = GetParam();
  LaunchOptions opt;
  opt.nranks = nranks;
  opt.env = {{"MYCOLL_TRANSPORT", "socket"},
             {"MYCOLL_TIMEOUT", "60"},
             {"MYCOLL_SOCKET_BUFFER_BYTES", "4K"},
             {"MYCOLL_CHUNK_BYTES", "32K"}};
  opt.timeout_s = 300;
  auto res = run_ranks(opt, [&](mycollComm_t comm, int, int n, const mycollUniqueId&) {
    auto every = [](CollKind) { return true; };
    return check_kinds(comm, n, every, {mycollInt8, mycollFloat32, mycollFloat64},
                       {mycollSum, mycollMax}, {1, 7, 1001, 8191, 8193, 100003})
               ? 0
               : 1;
  });
  EXPECT_EQ(describe_failures(res), "");
}

INSTANTIATE_TEST_SUITE_P(Host, SocketSmallBuffers, ::testing::Values(2, 3),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "ranks";
                         });

}  // namespace
