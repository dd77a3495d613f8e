// GPU collectives: every collective x algorithm x dtype x op x size x
// in/out-of-place on 2, 3, 4, 8 GPUs, one process per GPU (the torchrun
// layout) and one thread per GPU in one process; outputs poisoned before
// each run and every element checked against the host reference.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "common/coll_check.h"
#include "common/multiproc.h"
#include "common/reference.h"
#include "gpu/gpu_util.h"

using namespace mycoll_test;

namespace {

// Runs the whole matrix on one communicator; returns 0 when all passed.
int matrix(mycollComm_t comm, const std::string& algo, const MemOps& mem, bool quick) {
  int n = 0;
  mycollCommCount(comm, &n);
  std::vector<size_t> counts = {0, 1, 7, 1001, 65537};
  if (!quick) counts.push_back(1000003);
  int seed = 0;
  for (CollKind kind : kAllKinds) {
    if (!algo_serves(algo, kind)) continue;
    std::vector<int> roots = {0};
    if (kind_rooted(kind)) roots = {0, n - 1};
    for (mycollDataType_t t : kAllTypes) {
      std::vector<mycollRedOp_t> ops = {mycollSum};
      if (kind_reduces(kind)) ops.assign(std::begin(kAllOps), std::end(kAllOps));
      for (mycollRedOp_t op : ops)
        for (size_t count : counts)
          for (int root : roots)
            for (bool inplace : {false, true}) {
              if (kind == CollKind::SendRecvRing && inplace) continue;
              // Large sizes: every dtype but one op per collective keeps time sane.
              if (count > 70000 && op != mycollSum && op != mycollAvg) continue;
              CheckCase c{kind, t, op, count, root, inplace, ++seed % 13};
              std::string err;
              if (!check(run_and_check(comm, c, mem, &err), err)) return 1;
            }
    }
  }
  return 0;
}

// The matrix on a fresh stream of the current GPU.
int matrix_on_new_stream(mycollComm_t comm, const std::string& algo, bool quick) {
  cudaStream_t s = rank_stream();
  int rc = matrix(comm, algo, device_mem(s), quick);
  cudaStreamDestroy(s);
  return rc;
}

// One process per GPU (rank r on GPU r) with `env` set and `unset` removed,
// each running body on a fresh stream of its GPU; returns the failures ("" when
// every rank passed).
using GpuBody = int (*)(mycollComm_t, const MemOps&);
std::string on_gpus(int ngpus, std::map<std::string, std::string> env, GpuBody body,
                    std::vector<std::string> unset = {}) {
  LaunchOptions opt;
  opt.nranks = ngpus;
  opt.env = std::move(env);
  opt.env.emplace("MYCOLL_TIMEOUT", "60");
  opt.pre_init = [unset](int rank) {
    cudaSetDevice(gpu_of(rank));
    for (const std::string& v : unset) unsetenv(v.c_str());
  };
  opt.timeout_s = 900;
  auto res = run_ranks(opt, [body](mycollComm_t comm, int, int, const mycollUniqueId&) {
    cudaStream_t s = rank_stream();
    int rc = body(comm, device_mem(s));
    cudaStreamDestroy(s);
    return rc;
  });
  return describe_failures(res);
}

using Param = std::tuple<int /*ngpus*/, std::string /*algo*/>;
class GpuProcesses : public ::testing::TestWithParam<Param> {};

TEST_P(GpuProcesses, EveryElementMatchesReference) {
  auto [ngpus, algo] = GetParam();
  SKIP_WITHOUT_GPU();
  LaunchOptions opt;
  opt.nranks = ngpus;
  opt.env = {{"MYCOLL_ALGO", algo}, {"MYCOLL_TIMEOUT", "60"}};
  opt.pre_init = [](int rank) { cudaSetDevice(gpu_of(rank)); };
  opt.timeout_s = 900;
  auto res = run_ranks(opt, [&](mycollComm_t comm, int rank, int, const mycollUniqueId&) {
    int dev = -1;
    mycollCommCuDevice(comm, &dev);
    if (!check(dev == gpu_of(rank), "communicator bound to GPU " + std::to_string(gpu_of(rank))))
      return 1;
    return matrix_on_new_stream(comm, algo, ngpus == 3);
  });
  EXPECT_EQ(describe_failures(res), "");
}

std::string pname(const ::testing::TestParamInfo<Param>& i) {
  return std::to_string(std::get<0>(i.param)) + "gpus_" + std::get<1>(i.param);
}

INSTANTIATE_TEST_SUITE_P(Gpu, GpuProcesses,
                         ::testing::Combine(::testing::Values(2, 3, 4, 8),
                                            ::testing::Values("auto", "ring", "tree", "rhd",
                                                              "direct", "twoshot", "doubling")),
                         pname);
// Five ranks (no power of two; more ranks than GPUs on every machine but
// 8-GPU ones), the automatic rule.
INSTANTIATE_TEST_SUITE_P(Gpu5, GpuProcesses,
                         ::testing::Combine(::testing::Values(5), ::testing::Values("auto")),
                         pname);

// What an independent check found wrong with several ranks on one GPU:
// rooted collectives and all-to-all right after other collectives on the
// same communicator (broadcast, reduce, scatter, gather at every root; odd
// counts in the LL-collective, plan and direct kernels' ranges), and a
// grouped send/recv of every rank to rank + k for every k (the LL
// point-to-point kernel), then all shifts at once in one group.
int rooted_after_others(mycollComm_t comm, const MemOps& mem, bool quick) {
  int n = 0;
  mycollCommCount(comm, &n);
  std::vector<size_t> counts = {1, 1031, 65539};
  if (!quick) counts.push_back(4194311);
  int seed = 0;
  std::string err;
  for (size_t count : counts)
    for (int root = 0; root < n; ++root) {
      // Big counts: one root other than 0 is enough (and keeps time sane).
      if (count > 100000 && root != n - 1) continue;
      const mycollDataType_t t = (root % 2 || count > 100000) ? mycollFloat64 : mycollFloat32;
      const CheckCase seq[] = {
          {CollKind::AllReduce, mycollFloat32, mycollSum, 1031, 0, false, ++seed},
          {CollKind::Broadcast, t, mycollSum, count, root, false, ++seed},
          {CollKind::AllGather, mycollUint32, mycollSum, count, 0, false, ++seed},
          {CollKind::Reduce, t, mycollSum, count, root, root % 2 == 0, ++seed},
          {CollKind::Scatter, t, mycollSum, count, root, false, ++seed},
          {CollKind::Broadcast, mycollUint8, mycollSum, count + 2, root, true, ++seed},
          {CollKind::Gather, t, mycollSum, count, root, root % 2 == 1, ++seed},
          {CollKind::AllToAll, mycollUint32, mycollSum, count, 0, false, ++seed},
          {CollKind::ReduceScatter, t, mycollMax, count, 0, false, ++seed},
          {CollKind::AllToAll, t, mycollSum, count, 0, true, ++seed},
      };
      for (const CheckCase& c : seq)
        if (!check(run_and_check(comm, c, mem, &err), err)) return 1;
    }
  // Send/recv shifts: rank r sends 1031 floats to r + k, receives from r - k.
  int rank = 0;
  mycollCommUserRank(comm, &rank);
  const size_t count = 1031;
  const size_t bytes = count * sizeof(float);
  std::vector<void*> sb(n), rb(n);
  for (int k = 0; k < n; ++k) {
    sb[k] = mem.alloc(bytes);
    rb[k] = mem.alloc(bytes);
  }
  auto value = [](int from, int k, size_t i, int it) {
    return float(from * 1000 + k * 10 + int(i % 7) + it);
  };
  std::vector<float> h(count);
  int bad = 0;
  for (int it = 0; it < 3 && !bad; ++it)
    for (int shift = 1; shift <= n && !bad; ++shift) {  // shift == n: every k at once
      std::vector<int> ks;
      if (shift < n)
        ks.push_back(shift);
      else
        for (int k = 1; k < n; ++k) ks.push_back(k);
      for (int k : ks) {
        for (size_t i = 0; i < count; ++i) h[i] = value(rank, k, i, it);
        mem.upload(sb[k], h.data(), bytes);
        std::vector<unsigned char> p(bytes);
        poison(p.data(), bytes);
        mem.upload(rb[k], p.data(), bytes);
      }
      mycollGroupStart();
      for (int k : ks) {
        mycollSend(sb[k], count, mycollFloat32, (rank + k) % n, comm, mem.stream);
        mycollRecv(rb[k], count, mycollFloat32, (rank - k + n) % n, comm, mem.stream);
      }
      if (!check(mycollGroupEnd() == mycollSuccess,
                 std::string("send/recv group: ") + mycollGetLastError(comm)))
        return 1;
      mem.sync();
      mycollResult_t async = mycollSuccess;
      mycollCommGetAsyncError(comm, &async);
      if (!check(async == mycollSuccess,
                 std::string("send/recv async: ") + mycollGetLastError(comm)))
        return 1;
      for (int k : ks) {
        mem.download(h.data(), rb[k], bytes);
        const int from = (rank - k + n) % n;
        for (size_t i = 0; i < count; ++i)
          if (!check(h[i] == value(from, k, i, it),
                     "send/recv shift " + std::to_string(k) + " from rank " + std::to_string(from) +
                         " element " + std::to_string(i) + ": got " + std::to_string(h[i]))) {
            bad = 1;
            break;
          }
      }
    }
  for (int k = 0; k < n; ++k) {
    mem.release(sb[k]);
    mem.release(rb[k]);
  }
  return bad;
}

int rooted_after_others_full(mycollComm_t comm, const MemOps& mem) {
  return rooted_after_others(comm, mem, false);
}

// Collectives of one communicator issued back to back on three streams, no
// host synchronisation in between (FSDP issues all-gathers and
// reduce-scatters from different streams): they must run in issue order as
// with NCCL. All-reduce (the LL kernel's one-shot and two-shot), all-gather
// (LL kernel) and broadcast (plan kernel) into separate outputs, checked after.
int streams_in_issue_order(mycollComm_t comm, const MemOps&) {
  int n = 0, rank = 0;
  mycollCommCount(comm, &n);
  mycollCommUserRank(comm, &rank);
  cudaStream_t ss[3];
  for (auto& st : ss) st = rank_stream();
  constexpr int kIters = 60;
  const size_t counts[3] = {1031, 70001, 4099};
  std::vector<float*> in(kIters), out(kIters);
  std::vector<size_t> outn(kIters);
  for (int it = 0; it < kIters; ++it) {
    const size_t c = counts[it % 3];
    outn[it] = it % 3 == 1 ? c : (it % 3 == 0 ? c : c * size_t(n));
    cudaMalloc(&in[it], c * sizeof(float));
    cudaMalloc(&out[it], outn[it] * sizeof(float));
    std::vector<float> h(c);
    for (size_t i = 0; i < c; ++i) h[i] = float(rank * 7 + it + int(i % 11));
    cudaMemcpy(in[it], h.data(), c * sizeof(float), cudaMemcpyHostToDevice);
  }
  cudaDeviceSynchronize();
  for (int it = 0; it < kIters; ++it) {
    auto st = reinterpret_cast<mycollStream_t>(ss[it % 3]);
    const size_t c = counts[it % 3];
    mycollResult_t r =
        it % 3 == 0   ? mycollAllReduce(in[it], out[it], c, mycollFloat32, mycollSum, comm, st)
        : it % 3 == 1 ? mycollBroadcast(in[it], out[it], c, mycollFloat32, it % n, comm, st)
                      : mycollAllGather(in[it], out[it], c, mycollFloat32, comm, st);
    if (!check(r == mycollSuccess, std::string("issue: ") + mycollGetLastError(comm))) return 1;
  }
  for (auto& st : ss) cudaStreamSynchronize(st);
  mycollResult_t async = mycollSuccess;
  mycollCommGetAsyncError(comm, &async);
  if (!check(async == mycollSuccess, std::string("async: ") + mycollGetLastError(comm))) return 1;
  int bad = 0;
  for (int it = 0; it < kIters && !bad; ++it) {
    std::vector<float> h(outn[it]);
    cudaMemcpy(h.data(), out[it], h.size() * sizeof(float), cudaMemcpyDeviceToHost);
    const size_t c = counts[it % 3];
    for (size_t i = 0; i < h.size() && !bad; ++i) {
      float want = 0;
      if (it % 3 == 0)
        for (int r = 0; r < n; ++r) want += float(r * 7 + it + int(i % 11));
      else if (it % 3 == 1)
        want = float((it % n) * 7 + it + int(i % 11));
      else
        want = float(int(i / c) * 7 + it + int((i % c) % 11));
      if (!check(h[i] == want, "call " + std::to_string(it) + " element " + std::to_string(i) +
                                   ": got " + std::to_string(h[i]) + " expected " +
                                   std::to_string(want)))
        bad = 1;
    }
  }
  for (int it = 0; it < kIters; ++it) {
    cudaFree(in[it]);
    cudaFree(out[it]);
  }
  for (auto& st : ss) cudaStreamDestroy(st);
  return bad;
}

TEST(GpuStreams, CollectivesOnSeveralStreamsRunInIssueOrder) {
  SKIP_WITHOUT_GPU();
  EXPECT_EQ(on_gpus(3, {}, streams_in_issue_order), "");
}

// The cases above in processes (3 and 5 ranks: more ranks than GPUs on
// every machine this runs on but 8-GPU ones).
class GpuShared : public ::testing::TestWithParam<int> {};

TEST_P(GpuShared, RootedAndAllToAllAfterOthers) {
  SKIP_WITHOUT_GPU();
  EXPECT_EQ(on_gpus(GetParam(), {}, rooted_after_others_full), "");
}

INSTANTIATE_TEST_SUITE_P(Gpu, GpuShared, ::testing::Values(2, 3, 5),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return std::to_string(i.param) + "ranks";
                         });

// One process, one thread per rank, communicators from mycollCommInitAll
// with the ranks placed round-robin over the GPUs present (a repeated
// device when ranks outnumber GPUs: their kernels then run concurrently in
// one CUDA context, so their grids must fit the GPU together).
class GpuThreads : public ::testing::TestWithParam<int> {};

TEST_P(GpuThreads, InitAllOneThreadPerRank) {
  SKIP_WITHOUT_GPU();
  const int n = GetParam();
  LaunchOptions opt;  // run in a child: this test process must not init CUDA
  opt.nranks = 1;
  opt.init_comm = false;
  opt.timeout_s = 900;
  opt.env = {{"MYCOLL_TIMEOUT", "60"}};
  auto res = run_ranks(opt, [n](mycollComm_t, int, int, const mycollUniqueId&) {
    std::vector<mycollComm_t> comms(n);
    std::vector<int> devs(n);
    for (int i = 0; i < n; ++i) devs[i] = gpu_of(i);
    if (!check(mycollCommInitAll(comms.data(), n, devs.data()) == mycollSuccess,
               std::string("InitAll: ") + mycollGetLastError(nullptr)))
      return 1;
    std::vector<int> rcs(n, 0);
    std::vector<std::thread> th;
    for (int i = 0; i < n; ++i)
      th.emplace_back([&, i] {
        cudaSetDevice(devs[i]);
        int dev = -1;
        mycollCommCuDevice(comms[i], &dev);
        if (!check(dev == devs[i], "communicator bound to GPU " + std::to_string(devs[i]))) {
          rcs[i] = 1;
          return;
        }
        rcs[i] = matrix_on_new_stream(comms[i], "auto", true);
        if (rcs[i] == 0) {
          cudaStream_t st = rank_stream();
          rcs[i] = rooted_after_others(comms[i], device_mem(st), true);
          cudaStreamDestroy(st);
        }
      });
    for (auto& t : th) t.join();
    // Group launch from one thread over all communicators.
    size_t count = 1 << 20;
    std::vector<float*> bufs(n);
    std::vector<cudaStream_t> ss(n);
    std::vector<float> h(count);
    for (int i = 0; i < n; ++i) {
      cudaSetDevice(devs[i]);
      cudaStreamCreateWithFlags(&ss[i], cudaStreamNonBlocking);
      cudaMalloc(&bufs[i], count * sizeof(float));
      for (size_t k = 0; k < count; ++k) h[k] = float(i + (k % 7));
      cudaMemcpyAsync(bufs[i], h.data(), count * sizeof(float), cudaMemcpyHostToDevice, ss[i]);
      cudaStreamSynchronize(ss[i]);  // a plain cudaMemcpy's DMA may land after the call
    }
    mycollGroupStart();
    for (int i = 0; i < n; ++i)
      mycollAllReduce(bufs[i], bufs[i], count, mycollFloat32, mycollSum, comms[i],
                      reinterpret_cast<mycollStream_t>(ss[i]));
    check(mycollGroupEnd() == mycollSuccess, "group allreduce");
    for (int i = 0; i < n; ++i) {
      cudaSetDevice(devs[i]);
      cudaStreamSynchronize(ss[i]);
      cudaMemcpy(h.data(), bufs[i], count * sizeof(float), cudaMemcpyDeviceToHost);
      for (size_t k = 0; k < count; ++k)
        if (!check(h[k] == float(n * (n - 1) / 2 + n * (k % 7)), "group allreduce element")) break;
      cudaFree(bufs[i]);
    }
    for (int i = 0; i < n; ++i) mycollCommDestroy(comms[i]);
    int bad = failures();
    for (int r : rcs) bad += r;
    return bad;
  });
  EXPECT_EQ(describe_failures(res), "");
}

// One thread drives two ranks of one communicator on one GPU with one
// stream: inside a group their all-reduce runs (side by side); outside a
// group the second rank's call is refused at once naming the group, not
// queued behind the first rank's kernel that waits for it; abort then
// ends the first rank's kernel promptly.
TEST(GpuOneThread, RanksOnOneStreamGroupedRunUngroupedAreRefused) {
  SKIP_WITHOUT_GPU();
  LaunchOptions opt;  // run in a child: this test process must not init CUDA
  opt.nranks = 1;
  opt.init_comm = false;
  opt.timeout_s = 120;
  opt.env = {{"MYCOLL_TIMEOUT", "30"}};
  auto res = run_ranks(opt, [](mycollComm_t, int, int, const mycollUniqueId&) {
    const int dev = gpu_of(0);
    int devs[2] = {dev, dev};
    mycollComm_t comms[2] = {nullptr, nullptr};
    if (!check(mycollCommInitAll(comms, 2, devs) == mycollSuccess,
               std::string("InitAll: ") + mycollGetLastError(nullptr)))
      return 1;
    cudaSetDevice(dev);
    cudaStream_t s = rank_stream();
    const auto st = reinterpret_cast<mycollStream_t>(s);
    const size_t count = 1031;
    float* buf = nullptr;  // rank r's input at r * count, output at (2 + r) * count
    cudaMalloc(&buf, 4 * count * sizeof(float));
    std::vector<float> h(2 * count);
    for (size_t i = 0; i < 2 * count; ++i) h[i] = float(i / count + 1) * float(i % count % 13);
    cudaMemcpyAsync(buf, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice, s);
    cudaStreamSynchronize(s);
    mycollGroupStart();
    for (int r = 0; r < 2; ++r)
      mycollAllReduce(buf + r * count, buf + (2 + r) * count, count, mycollFloat32, mycollSum,
                      comms[r], st);
    check(mycollGroupEnd() == mycollSuccess, "grouped all-reduce on one stream");
    cudaStreamSynchronize(s);
    std::vector<float> out(2 * count);
    cudaMemcpy(out.data(), buf + 2 * count, out.size() * sizeof(float), cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < 2 * count; ++i)
      if (!check(out[i] == 3.0f * float(i % count % 13), "grouped all-reduce element")) break;
    for (int r = 0; r < 2; ++r) {
      mycollResult_t async = mycollSuccess;
      mycollCommGetAsyncError(comms[r], &async);
      check(async == mycollSuccess, std::string("async error: ") + mycollGetLastError(comms[r]));
    }
    // Outside a group: rank 0's call is enqueued, rank 1's refused.
    check(mycollAllReduce(buf, buf + 2 * count, count, mycollFloat32, mycollSum, comms[0], st) ==
              mycollSuccess,
          "rank 0's ungrouped all-reduce is enqueued");
    const mycollResult_t r1 = mycollAllReduce(buf + count, buf + 3 * count, count, mycollFloat32,
                                              mycollSum, comms[1], st);
    const std::string why = mycollGetLastError(comms[1]);
    check(r1 == mycollInvalidUsage && why.find("mycollGroupStart") != std::string::npos,
          "rank 1's call on the same stream: " + std::to_string(r1) + " " + why);
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < 2; ++r) check(mycollCommAbort(comms[r]) == mycollSuccess, "abort");
    cudaStreamSynchronize(s);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    check(secs < 10, "rank 0's kernel ended " + std::to_string(secs) + " s after abort");
    cudaFree(buf);
    cudaStreamDestroy(s);
    return failures();
  });
  EXPECT_EQ(describe_failures(res), "");
}

INSTANTIATE_TEST_SUITE_P(Gpu, GpuThreads, ::testing::Values(2, 3, 4, 5, 8),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return std::to_string(i.param) + "ranks";
                         });

// Runs `cases(n)` on n GPUs (one process each) for every n in `ns` that
// this machine has, every element of every output checked; skips without 2.
void run_large(std::initializer_list<int> ns, std::vector<CheckCase> (*cases)(int)) {
  SKIP_WITHOUT_GPU();
  for (int n : ns) {
    LaunchOptions opt;
    opt.nranks = n;
    opt.pre_init = [](int rank) { cudaSetDevice(gpu_of(rank)); };
    opt.timeout_s = 600;
    auto res = run_ranks(opt, [cases](mycollComm_t comm, int, int nr, const mycollUniqueId&) {
      cudaStream_t s = rank_stream();
      MemOps mem = device_mem(s);
      std::string err;
      for (const CheckCase& c : cases(nr))
        if (!check(run_and_check(comm, c, mem, &err), err)) break;
      cudaStreamDestroy(s);
      return failures() ? 1 : 0;
    });
    EXPECT_EQ(describe_failures(res), "") << n << " ranks";
  }
}

constexpr size_t kLarge = size_t(256) << 20;

// >= 256 MiB all-reduce, all-gather and reduce-scatter.
TEST(GpuLarge, AllReduceAllGather256MiB) {
  run_large({2, 8}, [](int nr) {
    const size_t m = kLarge, n = size_t(nr);
    return std::vector<CheckCase>{
        {CollKind::AllReduce, mycollFloat32, mycollSum, m / 4 + 3, 0, false, 1},
        {CollKind::AllReduce, mycollBfloat16, mycollMax, m / 2 + 1, 0, true, 2},
        {CollKind::AllGather, mycollInt32, mycollSum, m / 4 / n + 5, 0, false, 3},
        {CollKind::ReduceScatter, mycollFloat16, mycollSum, m / 2 / n + 1, 0, true, 4},
    };
  });
}

// The other collectives at >= 256 MiB (the automatic algorithm: broadcast
// and reduce through the ring kernel's chains, all-to-all, scatter and
// gather through the direct kernel), odd counts, roots other than 0, in
// place and out of place.
TEST(GpuLarge, RootedAndAllToAll256MiB) {
  run_large({2, 3, 8}, [](int nr) {
    const size_t m = kLarge, n = size_t(nr);
    return std::vector<CheckCase>{
        {CollKind::Broadcast, mycollFloat32, mycollSum, m / 4 + 3, nr - 1, false, 1},
        {CollKind::Broadcast, mycollInt8, mycollSum, m + 1, 1, true, 2},
        {CollKind::Reduce, mycollFloat32, mycollAvg, m / 4 + 5, 0, true, 3},
        {CollKind::Reduce, mycollBfloat16, mycollMax, m / 2 + 1, nr - 1, false, 4},
        {CollKind::AllToAll, mycollInt32, mycollSum, m / 4 / n + 7, 0, false, 5},
        {CollKind::AllToAll, mycollFloat16, mycollSum, m / 2 / n + 1, 0, true, 6},
        {CollKind::Scatter, mycollUint8, mycollSum, m / n + 3, nr - 1, false, 7},
        {CollKind::Gather, mycollFloat64, mycollSum, m / 8 / n + 1, 1, true, 8},
    };
  });
}

}  // namespace

namespace {

// A small representative subset for compute-sanitizer (memcheck, racecheck):
// every collective once with odd sizes, a reduction dtype each, 2 GPUs.
TEST(GpuSanitize, Subset) {
  SKIP_WITHOUT_GPU();
  LaunchOptions opt;
  opt.nranks = 2;
  opt.pre_init = [](int rank) { cudaSetDevice(gpu_of(rank)); };
  opt.timeout_s = 600;
  auto res = run_ranks(opt, [](mycollComm_t comm, int, int, const mycollUniqueId&) {
    cudaStream_t s = rank_stream();
    MemOps mem = device_mem(s);
    int seed = 0;
    for (CollKind k : kAllKinds)
      for (size_t count : {size_t(1), size_t(1001), size_t(70001)})
        for (bool inplace : {false, true}) {
          if (k == CollKind::SendRecvRing && inplace) continue;
          CheckCase c{
              k,     count == 1001 ? mycollFloat16 : mycollFloat32, mycollSum, count, 1, inplace,
              ++seed};
          std::string err;
          if (!check(run_and_check(comm, c, mem, &err), err)) return 1;
        }
    cudaStreamDestroy(s);
    return 0;
  });
  EXPECT_EQ(describe_failures(res), "");
}

}  // namespace

namespace {

// GPU buffers through host transports: forced shm on one host, and two
// "hosts" (MYCOLL_HOST_ID) joined by MYCOLL_NET=socket; the kernel hands
// slots to the GPU proxy thread through host-mapped FIFOs. Same checks as
// the main matrix.
using StagedParam = std::tuple<int /*ngpus*/, std::string /*mode*/>;
class GpuProxied : public ::testing::TestWithParam<StagedParam> {};

TEST_P(GpuProxied, EveryElementMatchesReference) {
  auto [ngpus, mode] = GetParam();
  SKIP_WITHOUT_GPU();
  LaunchOptions opt;
  opt.nranks = ngpus;
  opt.env = {{"MYCOLL_TIMEOUT", "60"}};
  if (mode == "shm") opt.env["MYCOLL_TRANSPORT"] = "shm";
  if (mode == "socket") opt.env["MYCOLL_NET"] = "socket";
  opt.pre_init = [mode = mode](int rank) {
    cudaSetDevice(gpu_of(rank));
    // socket: ranks 0..1 on host "a", the rest on host "b".
    if (mode == "socket") setenv("MYCOLL_HOST_ID", rank < 2 ? "gpu-host-a" : "gpu-host-b", 1);
  };
  opt.timeout_s = 900;
  auto res = run_ranks(opt, [&](mycollComm_t comm, int, int, const mycollUniqueId&) {
    return matrix_on_new_stream(comm, "auto", true);
  });
  EXPECT_EQ(describe_failures(res), "");
}

INSTANTIATE_TEST_SUITE_P(Gpu, GpuProxied,
                         ::testing::Values(StagedParam{2, "shm"}, StagedParam{3, "socket"}),
                         [](const ::testing::TestParamInfo<StagedParam>& i) {
                           return std::to_string(std::get<0>(i.param)) + "gpus_" +
                                  std::get<1>(i.param);
                         });

}  // namespace

namespace {

// The one-shot all-reduce kernel (messages <= MYCOLL_GPU_ONESHOT_BYTES with
// the direct algorithm): every dtype x op, sizes around the limit (the one
// just above runs the plan kernel), in and out of place; then one size 1000
// times, inputs changing every call, so the epoch runs through both buffer
// parities hundreds of times and a stale line of an earlier call would show.
constexpr size_t kOneShotBytes = 65536;

// `iters` all-reduces alternating `odd` and `even` element counts: uint32
// sums, int32 products where it % prod_mod == prod_at, in place where
// it % 3 == inplace_at, the seed the iteration (every result differs from
// the ones two calls back). Errors are labelled `what` and the iteration.
int alternating_allreduces(mycollComm_t comm, const MemOps& mem, const char* what, int iters,
                           size_t odd, size_t even, int prod_mod, int prod_at, int inplace_at) {
  for (int it = 0; it < iters; ++it) {
    const bool prod = it % prod_mod == prod_at;
    CheckCase c{CollKind::AllReduce,
                prod ? mycollInt32 : mycollUint32,
                prod ? mycollProd : mycollSum,
                it % 2 ? odd : even,
                0,
                it % 3 == inplace_at,
                it};
    std::string err;
    if (!check(run_and_check(comm, c, mem, &err), what + std::to_string(it) + ": " + err)) return 1;
  }
  return 0;
}

int oneshot_matrix(mycollComm_t comm, const MemOps& mem) {
  int seed = 0;
  for (mycollDataType_t t : kAllTypes) {
    const size_t most = kOneShotBytes / elem_size(t);
    for (mycollRedOp_t op : kAllOps)
      for (size_t count : {size_t(1), size_t(7), size_t(1001), size_t(4099), most, most + 1})
        for (bool inplace : {false, true}) {
          CheckCase c{CollKind::AllReduce, t, op, count, 0, inplace, ++seed % 13};
          std::string err;
          if (!check(run_and_check(comm, c, mem, &err), err)) return 1;
        }
  }
  // Every call's result differs from the ones two calls back (same
  // buffer parity).
  return alternating_allreduces(comm, mem, "loop ", 1000, 1001, kOneShotBytes / 4, 5, 4, 0);
}

class GpuOneShot : public ::testing::TestWithParam<int> {};

TEST_P(GpuOneShot, EveryElementMatchesReference) {
  const int ngpus = GetParam();
  SKIP_WITHOUT_GPU();
  EXPECT_EQ(on_gpus(ngpus,
                    {{"MYCOLL_ALGO", "direct"},
                     {"MYCOLL_GPU_ONESHOT_BYTES", std::to_string(kOneShotBytes)}},
                    oneshot_matrix),
            "");
}

INSTANTIATE_TEST_SUITE_P(Gpu, GpuOneShot, ::testing::Values(2, 3, 4, 8),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return std::to_string(i.param) + "gpus";
                         });

}  // namespace

namespace {

// The LL kernel's two-shot all-reduce (messages <= MYCOLL_GPU_TWOSHOT_BYTES
// with the twoshot algorithm). A limit of 3 MiB + 24 bytes: the last part
// cut by the message's end, and at 2 GPUs more than one round of the fold
// per thread, at 8 more than one round of the sends and receives. Every dtype x op over small
// counts and line counts around n (parts of one line, parts without a message line); the largest
// count that fits and one more (the twoshot plan) every op out of place, Sum in place; then 500
// calls alternating two sizes with inputs changing every call (both buffer parities, stale lines
// would show).
constexpr size_t kTwoShotBytes = (size_t(3) << 20) + 24;

int twoshot_matrix(mycollComm_t comm, const MemOps& mem) {
  int n = 0;
  mycollCommCount(comm, &n);
  int seed = 0;
  for (mycollDataType_t t : kAllTypes) {
    const size_t es = elem_size(t), per_line = 8 / es;
    std::vector<size_t> counts = {1, 2, 3, 7, 1001, 65537};
    for (size_t lines :
         {size_t(n - 1), size_t(n), size_t(n + 1), size_t(2 * n - 1), size_t(2 * n + 1)}) {
      if (lines == 0) continue;
      counts.push_back(lines * per_line);
      if (lines * per_line > 1) counts.push_back(lines * per_line - 1);  // a partial last line
    }
    const size_t most = kTwoShotBytes / es;
    for (mycollRedOp_t op : kAllOps) {
      for (size_t count : counts)
        for (bool inplace : {false, true}) {
          CheckCase c{CollKind::AllReduce, t, op, count, 0, inplace, ++seed % 13};
          std::string err;
          if (!check(run_and_check(comm, c, mem, &err), err)) return 1;
        }
      for (size_t count : {most, most + 1})
        for (bool inplace : {false, true}) {
          if (inplace && op != mycollSum) continue;
          CheckCase c{CollKind::AllReduce, t, op, count, 0, inplace, ++seed % 13};
          std::string err;
          if (!check(run_and_check(comm, c, mem, &err), err)) return 1;
        }
    }
  }
  return alternating_allreduces(comm, mem, "loop ", 500, 65537, 300001, 5, 4, 0);
}

// The automatic rule with the default limits: 1 KiB runs the one-shot
// schedule, 1 MiB the two-shot one; 300 calls alternating, so launches of
// both interleave on one stream and share the epoch.
int oneshot_twoshot_mix(mycollComm_t comm, const MemOps& mem) {
  return alternating_allreduces(comm, mem, "mix ", 300, 256, (size_t(1) << 20) / 4, 7, 5, 1);
}

class GpuTwoShot : public ::testing::TestWithParam<int> {};

TEST_P(GpuTwoShot, EveryElementMatchesReference) {
  const int ngpus = GetParam();
  SKIP_WITHOUT_GPU();
  EXPECT_EQ(on_gpus(ngpus,
                    {{"MYCOLL_ALGO", "twoshot"},
                     {"MYCOLL_GPU_TWOSHOT_BYTES", std::to_string(kTwoShotBytes)}},
                    twoshot_matrix),
            "");
}

TEST_P(GpuTwoShot, AutoRuleMixesOneShotAndTwoShot) {
  const int ngpus = GetParam();
  SKIP_WITHOUT_GPU();
  // The automatic rule with the default one-shot and two-shot limits.
  EXPECT_EQ(on_gpus(ngpus, {}, oneshot_twoshot_mix,
                    {"MYCOLL_ALGO", "MYCOLL_GPU_ONESHOT_BYTES", "MYCOLL_GPU_TWOSHOT_BYTES"}),
            "");
}

INSTANTIATE_TEST_SUITE_P(Gpu, GpuTwoShot, ::testing::Values(2, 3, 4, 8),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return std::to_string(i.param) + "gpus";
                         });

}  // namespace

namespace {

// The LL all-gather / reduce-scatter / broadcast / reduce / all-to-all kernel
// (whole messages <= MYCOLL_GPU_LL_COLL_BYTES; all-gather, reduce-scatter and
// all-to-all through the automatic rule's direct, broadcast and reduce
// because MYCOLL_ALGO leaves them to the rule): every dtype (x every op for
// reduce-scatter and reduce, x every root for broadcast and reduce), counts
// {1, 7, 1001, the most that fits, one more (the plan kernel)}, in and out of
// place; then 300 calls cycling through the five collectives and two sizes
// with inputs changing every call, so the shared epoch runs through both
// buffer parities with every collective following every other, and a stale
// line of an earlier call would show. kLlCollBytes is also the 256 KiB cap of
// broadcast and reduce.
constexpr size_t kLlCollBytes = 262144;

size_t ll_coll_most(CollKind kind, mycollDataType_t t, int n) {
  const size_t es = elem_size(t);
  const bool whole = kind == CollKind::Broadcast || kind == CollKind::Reduce;
  return whole ? kLlCollBytes / es : kLlCollBytes / es / size_t(n);
}

int ll_coll_matrix(mycollComm_t comm, const MemOps& mem) {
  int n = 0;
  mycollCommCount(comm, &n);
  int seed = 0;
  for (CollKind kind : {CollKind::AllGather, CollKind::ReduceScatter, CollKind::Broadcast,
                        CollKind::Reduce, CollKind::AllToAll})
    for (mycollDataType_t t : kAllTypes) {
      const size_t most = ll_coll_most(kind, t, n);
      std::vector<mycollRedOp_t> ops = {mycollSum};
      if (kind_reduces(kind)) ops.assign(std::begin(kAllOps), std::end(kAllOps));
      std::vector<int> roots = {0};
      if (kind_rooted(kind))
        for (int r = 1; r < n; ++r) roots.push_back(r);
      for (mycollRedOp_t op : ops)
        for (size_t count : {size_t(1), size_t(7), size_t(1001), most, most + 1})
          for (int root : roots)
            for (bool inplace : {false, true}) {
              CheckCase c{kind, t, op, count, root, inplace, ++seed % 13};
              std::string err;
              if (!check(run_and_check(comm, c, mem, &err), err)) return 1;
            }
    }
  // Uint32 sums and Int32 products change with the seed, so every call's
  // result differs from the one two LL calls back (same buffer parity).
  const CollKind cycle[5] = {CollKind::AllGather, CollKind::ReduceScatter, CollKind::Broadcast,
                             CollKind::Reduce, CollKind::AllToAll};
  for (int it = 0; it < 300; ++it) {
    const CollKind kind = cycle[it % 5];
    const bool prod = kind_reduces(kind) && it % 7 == 1;
    const mycollDataType_t t = prod ? mycollInt32 : mycollUint32;
    const size_t count = (it / 5) % 2 ? 1001 : ll_coll_most(kind, t, n);
    CheckCase c{kind, t, prod ? mycollProd : mycollSum, count, it % n, it % 4 == 0, it};
    std::string err;
    if (!check(run_and_check(comm, c, mem, &err), "loop " + std::to_string(it) + ": " + err))
      return 1;
  }
  return 0;
}

// The one mailbox and launch epoch of the LL kernel's schedules
// (kernels/prims/epoch.cuh): with the automatic rule, a 1 KiB all-reduce
// runs the one-shot schedule, a 1 MiB one the two-shot schedule, and the
// five LL collectives up to kLlCollBytes their own; 280 calls cycle through
// all seven so every schedule follows every other on both parities of the
// shared slots, inputs changing every call (Uint32 sums, Int32 products now
// and then), so a line left by any schedule two launches back would show in
// a result.
int mailbox_mix(mycollComm_t comm, const MemOps& mem) {
  int n = 0;
  mycollCommCount(comm, &n);
  const CollKind cycle[7] = {CollKind::AllReduce, CollKind::AllGather,     CollKind::AllReduce,
                             CollKind::Broadcast, CollKind::ReduceScatter, CollKind::Reduce,
                             CollKind::AllToAll};
  for (int it = 0; it < 280; ++it) {
    const int k = it % 7;
    const CollKind kind = cycle[k];
    const bool prod = kind_reduces(kind) && it % 5 == 2;
    const mycollDataType_t t = prod ? mycollInt32 : mycollUint32;
    size_t count;
    if (kind == CollKind::AllReduce)
      count = k == 0 ? 1024 / 4 : (size_t(1) << 20) / 4;  // one-shot, two-shot
    else
      count = (it / 7) % 2 ? 1001 : ll_coll_most(kind, t, n);
    CheckCase c{kind, t, prod ? mycollProd : mycollSum, count, it % n, it % 3 == 1, it};
    std::string err;
    if (!check(run_and_check(comm, c, mem, &err), "mix " + std::to_string(it) + ": " + err))
      return 1;
  }
  return 0;
}

class GpuLlColl : public ::testing::TestWithParam<int> {};

TEST_P(GpuLlColl, EveryElementMatchesReference) {
  const int ngpus = GetParam();
  SKIP_WITHOUT_GPU();
  EXPECT_EQ(
      on_gpus(ngpus, {{"MYCOLL_GPU_LL_COLL_BYTES", std::to_string(kLlCollBytes)}}, ll_coll_matrix),
      "");
}

TEST_P(GpuLlColl, SharesTheMailboxWithOneShotAndTwoShot) {
  const int ngpus = GetParam();
  SKIP_WITHOUT_GPU();
  EXPECT_EQ(
      on_gpus(ngpus, {{"MYCOLL_GPU_LL_COLL_BYTES", std::to_string(kLlCollBytes)}}, mailbox_mix,
              {"MYCOLL_ALGO", "MYCOLL_GPU_ONESHOT_BYTES", "MYCOLL_GPU_TWOSHOT_BYTES"}),
      "");
}

INSTANTIATE_TEST_SUITE_P(Gpu, GpuLlColl, ::testing::Values(2, 3, 4, 8),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return std::to_string(i.param) + "gpus";
                         });

}  // namespace

namespace {

// The fused ring kernel (all-reduce, all-gather, reduce-scatter with the
// ring algorithm; MYCOLL_GPU_RING_BYTES=1 sends every non-empty message
// through it): the whole matrix, whose other collectives (broadcast, reduce,
// point-to-point) run the plan kernel over the same FIFOs in between, so the
// shared counters are exercised too; then the quick matrix with 8 slots of
// 4112 bytes per FIFO (slot lengths that are no power of two, batches of 2
// slots moved as one span or cut where the FIFO wraps, a wrap every few
// slots, senders waiting for room all the time).
int ring_full(mycollComm_t comm, const MemOps& mem) { return matrix(comm, "ring", mem, false); }
int ring_quick(mycollComm_t comm, const MemOps& mem) { return matrix(comm, "ring", mem, true); }

class GpuRingKernel : public ::testing::TestWithParam<int> {};

TEST_P(GpuRingKernel, EveryElementMatchesReference) {
  const int ngpus = GetParam();
  SKIP_WITHOUT_GPU();
  EXPECT_EQ(on_gpus(ngpus, {{"MYCOLL_ALGO", "ring"}, {"MYCOLL_GPU_RING_BYTES", "1"}}, ring_full),
            "");
}

TEST_P(GpuRingKernel, SmallFifosWrap) {
  const int ngpus = GetParam();
  SKIP_WITHOUT_GPU();
  EXPECT_EQ(on_gpus(ngpus,
                    {{"MYCOLL_ALGO", "ring"},
                     {"MYCOLL_GPU_RING_BYTES", "1"},
                     {"MYCOLL_GPU_SLOT_BYTES", "4112"},
                     {"MYCOLL_GPU_SLOTS", "8"}},
                    ring_quick),
            "");
}

INSTANTIATE_TEST_SUITE_P(Gpu, GpuRingKernel, ::testing::Values(2, 3, 4, 8),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return std::to_string(i.param) + "gpus";
                         });

// The direct kernel (all-to-all, scatter, gather with the direct algorithm;
// MYCOLL_GPU_DIRECT_BYTES=1 and the LL-collective kernel off send every
// non-empty one through it): the whole direct matrix, whose all-reduce,
// all-gather and reduce-scatter run the plan kernel over the same FIFOs in
// between; then the quick matrix with 4 slots of 4112 bytes per FIFO.
int direct_full(mycollComm_t comm, const MemOps& mem) { return matrix(comm, "direct", mem, false); }
int direct_quick(mycollComm_t comm, const MemOps& mem) { return matrix(comm, "direct", mem, true); }

class GpuDirectKernel : public ::testing::TestWithParam<int> {};

TEST_P(GpuDirectKernel, EveryElementMatchesReference) {
  const int ngpus = GetParam();
  SKIP_WITHOUT_GPU();
  EXPECT_EQ(on_gpus(ngpus,
                    {{"MYCOLL_ALGO", "direct"},
                     {"MYCOLL_GPU_DIRECT_BYTES", "1"},
                     {"MYCOLL_GPU_LL_COLL_BYTES", "0"}},
                    direct_full),
            "");
}

TEST_P(GpuDirectKernel, SmallFifosWrap) {
  const int ngpus = GetParam();
  SKIP_WITHOUT_GPU();
  EXPECT_EQ(on_gpus(ngpus,
                    {{"MYCOLL_ALGO", "direct"},
                     {"MYCOLL_GPU_DIRECT_BYTES", "1"},
                     {"MYCOLL_GPU_LL_COLL_BYTES", "0"},
                     {"MYCOLL_GPU_SLOT_BYTES", "4112"},
                     {"MYCOLL_GPU_SLOTS", "4"}},
                    direct_quick),
            "");
}

INSTANTIATE_TEST_SUITE_P(Gpu, GpuDirectKernel, ::testing::Values(2, 3, 4, 8),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return std::to_string(i.param) + "gpus";
                         });

}  // namespace

namespace {

// The ring kernel gives up: rank 1 never joins a 4 MiB ring all-reduce, so
// rank 0's kernel times out (MYCOLL_TIMEOUT=3) waiting on rank 1, reports it
// through mycollCommGetAsyncError and names the peer; the broken
// communicator refuses the next call. Ranks leave with _exit (a broken
// communicator is not destroyed collectively).
// Polls mycollCommGetAsyncError every `poll` until it reports an error or
// 30 s passed since t0; returns the last result, *seconds the time since t0.
mycollResult_t wait_async_error(mycollComm_t comm, std::chrono::steady_clock::time_point t0,
                                std::chrono::milliseconds poll, double* seconds) {
  mycollResult_t async = mycollSuccess;
  while (async == mycollSuccess &&
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30)) {
    std::this_thread::sleep_for(poll);
    mycollCommGetAsyncError(comm, &async);
  }
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return async;
}

template <bool kAllToAll>
int kernel_stuck(mycollComm_t comm, const MemOps&) {
  int rank = -1;
  mycollCommUserRank(comm, &rank);
  if (rank != 0) {
    std::this_thread::sleep_for(std::chrono::seconds(12));
    _exit(0);
  }
  cudaStream_t s = rank_stream();
  auto st = reinterpret_cast<mycollStream_t>(s);
  const size_t count = size_t(1) << 20;
  float* buf = nullptr;
  cudaMalloc(&buf, count * sizeof(float));
  const auto t0 = std::chrono::steady_clock::now();
  auto call = [&] {
    return kAllToAll ? mycollAllToAll(buf, buf, count / 2, mycollFloat32, comm, st)
                     : mycollAllReduce(buf, buf, count, mycollFloat32, mycollSum, comm, st);
  };
  check(call() == mycollSuccess, "collective enqueued");
  double dt = 0;
  const mycollResult_t async = wait_async_error(comm, t0, std::chrono::milliseconds(20), &dt);
  check(async == mycollTimeout,
        std::string("timeout reported, got ") + mycollGetErrorString(async));
  check(dt > 2 && dt < 20, "timed out after " + std::to_string(dt) + " s");
  check(call() != mycollSuccess, "broken communicator refuses work");
  const std::string why = mycollGetLastError(comm);
  check(why.find("rank 1") != std::string::npos && why.find("timed out") != std::string::npos,
        "reason '" + why + "' names the timeout and rank 1");
  check(cudaStreamSynchronize(s) == cudaSuccess, "kernel ended after the timeout");
  std::fflush(nullptr);
  _exit(failures() ? 1 : 0);
}

TEST(GpuRingKernelGiveUp, TimesOutNamingThePeer) {
  SKIP_WITHOUT_GPU();
  EXPECT_EQ(on_gpus(2, {{"MYCOLL_ALGO", "ring"}, {"MYCOLL_TIMEOUT", "3"}}, kernel_stuck<false>),
            "");
}

// The same for the direct kernel: a 4 MiB in-place all-to-all.
TEST(GpuDirectKernelGiveUp, TimesOutNamingThePeer) {
  SKIP_WITHOUT_GPU();
  EXPECT_EQ(on_gpus(2, {{"MYCOLL_TIMEOUT", "3"}}, kernel_stuck<true>), "");
}

// One GPU rank's failure reaches the others (lib/engine/peer_watch.h), the
// GPU's rank-death matrix: three processes sharing the GPU(s) make one
// matching call, then a second one (PEER_COLL: a 4 MiB all-reduce, a 4 MiB
// broadcast from rank 0, a 12 MiB all-to-all, or a grouped 256 MiB ring
// send/recv, larger than the FIFOs) in which rank 1 fails the way
// PEER_FAILURE names:
//   kill, exit0, exit1  its process ends (SIGKILL, _exit(0), _exit(1));
//   stop     it stops (SIGSTOP, continued 8 s later); MYCOLL_TIMEOUT 3 on all;
//   abort    it never joins; rank 0 calls mycollCommAbort while waiting;
//   timeout  it never joins; rank 0 alone has MYCOLL_TIMEOUT=3;
//   fault    a kernel of its own faults (an illegal address: every later
//            CUDA call of its process fails), so its call cannot be
//            launched: the call returns the CUDA error, and the others
//            learn why from its report while it stays alive.
// MYCOLL_TIMEOUT is 60 elsewhere: every rank still running must report an
// error within 10 s, name the cause (and no live rank), end its kernel and
// refuse the next call.
constexpr int kVictim = 1;

int peer_failure_body(mycollComm_t comm) {
  int rank = -1, n = 0;
  mycollCommUserRank(comm, &rank);
  mycollCommCount(comm, &n);
  const std::string how = std::getenv("PEER_FAILURE");
  const std::string coll = std::getenv("PEER_COLL");
  cudaStream_t s = rank_stream();
  auto st = reinterpret_cast<mycollStream_t>(s);
  // Send/recv: 256 MiB, more than a pair's FIFOs hold (64 channels x 16
  // slots x 64 KiB = 64 MiB on separate GPUs), so the sender waits for its
  // receiver (at 64 MiB a sender on four H200s finished without it).
  const size_t count = coll == "sendrecv" ? size_t(64) << 20 : size_t(1) << 20;  // floats
  float* a = nullptr;
  float* b = nullptr;
  cudaMalloc(&a, count * n * sizeof(float));
  cudaMalloc(&b, count * n * sizeof(float));
  cudaMemset(a, 0, count * n * sizeof(float));
  cudaDeviceSynchronize();
  auto call = [&] {
    if (coll == "allreduce")
      return mycollAllReduce(a, a, count, mycollFloat32, mycollSum, comm, st);
    if (coll == "broadcast") return mycollBroadcast(a, b, count, mycollFloat32, 0, comm, st);
    if (coll == "alltoall") return mycollAllToAll(a, b, count, mycollFloat32, comm, st);
    mycollGroupStart();
    mycollSend(a, count, mycollFloat32, (rank + 1) % n, comm, st);
    mycollRecv(b, count, mycollFloat32, (rank + n - 1) % n, comm, st);
    return mycollGroupEnd();
  };
  check(call() == mycollSuccess && cudaStreamSynchronize(s) == cudaSuccess,
        "a matching " + coll + " first");
  if (rank == kVictim) {
    std::fflush(nullptr);
    if (how == "kill" || how == "exit0" || how == "exit1") {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      if (how == "kill") raise(SIGKILL);
      _exit(how == "exit1" ? 1 : 0);
    }
    if (how == "stop") {
      if (fork() == 0) {  // continues the victim; touches no CUDA
        std::this_thread::sleep_for(std::chrono::seconds(8));
        kill(getppid(), SIGCONT);
        _exit(0);
      }
      raise(SIGSTOP);
    } else if (how == "fault") {
      check(fault_this_context(s) != cudaSuccess, "the faulting kernel faults");
      const mycollResult_t r = call();
      const std::string why = mycollGetLastError(comm);
      check(r == mycollUnhandledCudaError,
            std::string("call after a fault returned ") + mycollGetErrorString(r) + ": " + why);
      check(why.find("could not be launched") != std::string::npos, "reason '" + why + "'");
      check(call() != mycollSuccess, "the failed communicator refuses the next call");
      std::this_thread::sleep_for(std::chrono::seconds(12));  // alive past the others' checks
    } else {
      std::this_thread::sleep_for(std::chrono::seconds(8));  // never joins
    }
    _exit(failures() ? 1 : 0);
  }
  const auto t0 = std::chrono::steady_clock::now();
  check(call() == mycollSuccess, coll + " enqueued");
  if (rank == 0 && how == "abort") {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    check(mycollCommAbort(comm) == mycollSuccess, "abort returns");
    check(cudaStreamSynchronize(s) == cudaSuccess, "aborting rank's kernel ended");
    std::fflush(nullptr);
    _exit(failures() ? 1 : 0);
  }
  double dt = 0;
  const mycollResult_t async = wait_async_error(comm, t0, std::chrono::milliseconds(5), &dt);
  const std::string why = mycollGetLastError(comm);
  // Who times out first under SIGSTOP (all at 3 s) is a race: either code.
  const bool timed_out_ok = (how == "timeout" && rank == 0) || how == "stop";
  const bool remote_ok = !(how == "timeout" && rank == 0);
  check((async == mycollTimeout && timed_out_ok) || (async == mycollRemoteError && remote_ok),
        std::string("got ") + mycollGetErrorString(async) + ": " + why);
  check(dt < 10, "error reported after " + std::to_string(dt) + " s");
  const bool ended = how == "kill" || how == "exit0" || how == "exit1";
  const std::string cause = ended            ? "rank 1's bootstrap link closed"
                            : how == "abort" ? "rank 0 aborted"
                            : how == "fault"
                                ? "rank 1 on GPU " + std::to_string(gpu_of(1)) + ": op "
                                : "timed out";
  check(why.find(cause) != std::string::npos, "reason '" + why + "' names '" + cause + "'");
  // Rank 1 is alive there: closing its links after a report is no cause.
  check(ended || why.find("rank 1's bootstrap link") == std::string::npos,
        "reason '" + why + "' blames no live rank");
  check(cudaStreamSynchronize(s) == cudaSuccess, "kernel ended");
  check(call() != mycollSuccess, "broken communicator refuses work");
  std::fflush(nullptr);
  _exit(failures() ? 1 : 0);
}

using PeerFailureParam = std::tuple<std::string /*failure*/, std::string /*collective*/>;
class GpuPeerFailure : public ::testing::TestWithParam<PeerFailureParam> {};

TEST_P(GpuPeerFailure, ReachesEveryRankNamingTheCause) {
  SKIP_WITHOUT_GPU();
  const auto [how, coll] = GetParam();
  LaunchOptions opt;
  opt.nranks = 3;
  opt.env = {
      {"MYCOLL_TIMEOUT", how == "stop" ? "3" : "60"}, {"PEER_FAILURE", how}, {"PEER_COLL", coll}};
  opt.pre_init = [how = how](int rank) {
    cudaSetDevice(gpu_of(rank));
    if (how == "timeout" && rank == 0) setenv("MYCOLL_TIMEOUT", "3", 1);
  };
  opt.timeout_s = 120;
  auto res = run_ranks(opt, [](mycollComm_t comm, int, int, const mycollUniqueId&) {
    return peer_failure_body(comm);
  });
  ASSERT_EQ(res.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    const bool killed = r == kVictim && how == "kill";
    const int code = r == kVictim && how == "exit1" ? 1 : 0;
    EXPECT_TRUE(killed ? res[r].signal == SIGKILL
                       : res[r].exit_code == code && res[r].signal == 0 && !res[r].timed_out)
        << "rank " << r << ": exit " << res[r].exit_code << ", signal " << res[r].signal
        << (res[r].timed_out ? ", timed out" : "");
  }
}

INSTANTIATE_TEST_SUITE_P(Gpu, GpuPeerFailure,
                         ::testing::Combine(::testing::Values("kill", "exit0", "exit1", "stop",
                                                              "abort", "timeout", "fault"),
                                            ::testing::Values("allreduce", "broadcast", "alltoall",
                                                              "sendrecv")),
                         [](const ::testing::TestParamInfo<PeerFailureParam>& i) {
                           return std::get<0>(i.param) + "_" + std::get<1>(i.param);
                         });

}  // namespace

namespace {

// Mismatched GPU calls are an error, never a silently wrong buffer
// (kernels/prims/call_check.cuh): one matching call first (no false
// alarm), then rank 0 makes another call than the others (op, root, count
// or datatype, chosen by MISMATCH_FIELD; "selfroot": every rank names
// itself the root) on the kernel the environment picks, the root being
// MISMATCH_ROOT (default 0). Every rank must report InvalidUsage through
// mycollCommGetAsyncError long before MYCOLL_TIMEOUT (60 s here: a
// timeout is not the expected diagnosis), name the field, and the other
// ranks must name rank 0; the kernels end (the stream synchronises). A
// rank that only sends in its view of the call checks only a peer it sends
// to within the call (kernels/prims/call_check.cuh): where that peer agreed
// with it, it learns of the mismatch from the rank that found it, as
// RemoteError carrying that rank's words. MISMATCH_DEFERS=1: such a rank
// is a ring chain's first (the broadcast root, the rank after the reduce
// root); =any: any rank may be (the plan kernel's trees: the root, the
// leaves), and a self-rooted call's ranks name some other rank.
int mismatch_body(mycollComm_t comm, const MemOps&) {
  int rank = -1, n = 0;
  mycollCommUserRank(comm, &rank);
  mycollCommCount(comm, &n);
  const std::string coll = std::getenv("MISMATCH_COLL");
  std::string field = std::getenv("MISMATCH_FIELD");
  const bool self_root = field == "selfroot";
  if (self_root) field = "root";
  const size_t count = std::strtoull(std::getenv("MISMATCH_COUNT"), nullptr, 10);
  const char* root_env = std::getenv("MISMATCH_ROOT");
  const int root0 = root_env ? std::atoi(root_env) : 0;
  // The ranks that may defer their check in the mismatched call.
  const char* defers_env = std::getenv("MISMATCH_DEFERS");
  const bool any_defers = defers_env != nullptr && std::string(defers_env) == "any";
  const bool defers =
      defers_env != nullptr &&
      (any_defers || (coll == "broadcast" ? rank == root0 : rank == (root0 + 1) % n));
  cudaStream_t s = rank_stream();
  auto st = reinterpret_cast<mycollStream_t>(s);
  void* in = nullptr;
  void* out = nullptr;
  cudaMalloc(&in, count * 4 * size_t(n));
  cudaMalloc(&out, count * 4 * size_t(n));
  cudaMemset(in, 0, count * 4 * size_t(n));
  cudaDeviceSynchronize();
  auto call = [&](bool odd) {
    const bool diff = odd && rank == 0;
    const mycollRedOp_t op = diff && field == "op" ? mycollMax : mycollSum;
    const int root = odd && self_root ? rank : diff && field == "root" ? n - 1 : root0;
    const size_t c = diff && field == "count" ? count / 2 : count;
    const mycollDataType_t t = diff && field == "datatype" ? mycollInt32 : mycollFloat32;
    if (coll == "allreduce") return mycollAllReduce(in, out, c, t, op, comm, st);
    if (coll == "broadcast") return mycollBroadcast(in, out, c, t, root, comm, st);
    if (coll == "reduce") return mycollReduce(in, out, c, t, op, root, comm, st);
    if (coll == "alltoall") return mycollAllToAll(in, out, c, t, comm, st);
    return mycollInvalidArgument;
  };
  check(call(false) == mycollSuccess, "matching call enqueued");
  check(cudaStreamSynchronize(s) == cudaSuccess, "matching call ran");
  mycollResult_t async = mycollSuccess;
  mycollCommGetAsyncError(comm, &async);
  check(async == mycollSuccess, std::string("matching call raised no error, got ") +
                                    mycollGetErrorString(async) + ": " + mycollGetLastError(comm));
  const auto t0 = std::chrono::steady_clock::now();
  check(call(true) == mycollSuccess, "mismatched call enqueued");
  double dt = 0;
  async = wait_async_error(comm, t0, std::chrono::milliseconds(5), &dt);
  check(async == mycollInvalidUsage || (defers && async == mycollRemoteError),
        std::string("mismatch reported as InvalidUsage") + (defers ? " or RemoteError" : "") +
            ", got " + mycollGetErrorString(async));
  check(dt < 15, "mismatch reported after " + std::to_string(dt) + " s");
  check(call(false) != mycollSuccess, "broken communicator refuses work");
  const std::string why = mycollGetLastError(comm);
  check(why.find("mismatch with rank") != std::string::npos && why.find(field) != std::string::npos,
        "reason '" + why + "' names the mismatch and the " + field);
  // Every rank of a self-rooted call defers and finds another root in the
  // peer it sends to first: its chain successor, or (any_defers) a child in
  // its own tree; a RemoteError carries the words of whichever rank's report
  // came first.
  const int culprit = self_root ? (rank + 1) % n : 0;
  if (self_root && any_defers)
    check(why.find("mismatch with rank " + std::to_string(rank) + ",") == std::string::npos,
          "reason '" + why + "' names another rank than " + std::to_string(rank));
  else if ((rank != 0 || self_root) && async != mycollRemoteError)
    check(why.find("mismatch with rank " + std::to_string(culprit) + ",") != std::string::npos,
          "reason '" + why + "' names rank " + std::to_string(culprit));
  check(cudaStreamSynchronize(s) == cudaSuccess, "kernels ended after the mismatch");
  std::fflush(nullptr);
  _exit(failures() ? 1 : 0);
}

struct MismatchCase {
  const char* name;
  const char* coll;
  const char* field;
  size_t count;
  std::map<std::string, std::string> env;
};

// Each case lands on one kernel (the environment forces it where the
// default rule would not).
const MismatchCase kMismatchCases[] = {
    {"OneShotOp", "allreduce", "op", 1001, {{"MYCOLL_ALGO", "direct"}}},
    {"TwoShotOp", "allreduce", "op", 100003, {{"MYCOLL_ALGO", "twoshot"}}},
    {"LlBroadcastRoot", "broadcast", "root", 1001, {}},
    {"LlReduceOp", "reduce", "op", 1001, {}},
    {"RingCount",
     "allreduce",
     "count",
     size_t(1) << 20,
     {{"MYCOLL_ALGO", "ring"}, {"MYCOLL_GPU_RING_BYTES", "1"}}},
    {"ChainBroadcastRoot",
     "broadcast",
     "root",
     size_t(1) << 20,
     {{"MYCOLL_ALGO", "ring"}, {"MYCOLL_GPU_RING_BYTES", "1"}}},
    // The chains' first rank defers its check (kernels/prims/call_check.cuh):
    // rank 1 as broadcast root, rank 1 after reduce root 0, every rank as
    // its own root.
    {"ChainBroadcastCountRoot1",
     "broadcast",
     "count",
     size_t(1) << 20,
     {{"MYCOLL_ALGO", "ring"},
      {"MYCOLL_GPU_RING_BYTES", "1"},
      {"MISMATCH_ROOT", "1"},
      {"MISMATCH_DEFERS", "1"}}},
    {"ChainReduceCount",
     "reduce",
     "count",
     size_t(1) << 20,
     {{"MYCOLL_ALGO", "ring"}, {"MYCOLL_GPU_RING_BYTES", "1"}, {"MISMATCH_DEFERS", "1"}}},
    {"ChainBroadcastSelfRoot",
     "broadcast",
     "selfroot",
     size_t(1) << 20,
     {{"MYCOLL_ALGO", "ring"}, {"MYCOLL_GPU_RING_BYTES", "1"}, {"MISMATCH_DEFERS", "1"}}},
    {"DirectAllToAllDatatype",
     "alltoall",
     "datatype",
     65537,
     {{"MYCOLL_ALGO", "direct"},
      {"MYCOLL_GPU_DIRECT_BYTES", "1"},
      {"MYCOLL_GPU_LL_COLL_BYTES", "0"}}},
    {"PlanTreeOp", "allreduce", "op", 65537, {{"MYCOLL_ALGO", "tree"}}},
    // The plan kernel's ranks that only send defer too: a tree broadcast's
    // root (rank 1), a tree reduce's leaves, every rank as its own root.
    {"PlanBroadcastCountRoot1",
     "broadcast",
     "count",
     65537,
     {{"MYCOLL_ALGO", "tree"}, {"MISMATCH_ROOT", "1"}, {"MISMATCH_DEFERS", "1"}}},
    {"PlanReduceCount",
     "reduce",
     "count",
     65537,
     {{"MYCOLL_ALGO", "tree"}, {"MISMATCH_DEFERS", "any"}}},
    {"PlanBroadcastSelfRoot",
     "broadcast",
     "selfroot",
     65537,
     {{"MYCOLL_ALGO", "tree"}, {"MISMATCH_DEFERS", "any"}}},
    // GPU buffers through host transports: the call lines travel as the
    // GPU proxy's call frames (lib/engine/gpu_proxy.h).
    {"ProxiedPlanOp", "allreduce", "op", 65537, {{"MYCOLL_TRANSPORT", "shm"}}},
    {"ProxiedBroadcastRoot", "broadcast", "root", 1001, {{"MYCOLL_TRANSPORT", "shm"}}},
    {"ProxiedAllToAllCount", "alltoall", "count", 4097, {{"MYCOLL_TRANSPORT", "shm"}}},
};

class GpuMismatch : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(GpuMismatch, EveryRankReportsItNamingTheField) {
  SKIP_WITHOUT_GPU();
  const MismatchCase& c = kMismatchCases[std::get<1>(GetParam())];
  std::map<std::string, std::string> env = c.env;
  env["MISMATCH_COLL"] = c.coll;
  env["MISMATCH_FIELD"] = c.field;
  env["MISMATCH_COUNT"] = std::to_string(c.count);
  EXPECT_EQ(on_gpus(std::get<0>(GetParam()), env, mismatch_body), "") << c.name;
}

// MYCOLL_GPU_CALL_CHECK=0 takes the check out of every kernel (signature
// 0, the point-to-point path): results stay exact on every kernel the
// automatic rule picks at the quick matrix's sizes.
int call_check_off_body(mycollComm_t comm, const MemOps& mem) {
  return matrix(comm, "auto", mem, true);
}

TEST(GpuCallCheckOff, EveryElementMatchesReference) {
  SKIP_WITHOUT_GPU();
  EXPECT_EQ(on_gpus(3, {{"MYCOLL_GPU_CALL_CHECK", "0"}}, call_check_off_body), "");
}

// A GPU send and its receive of different sizes are an error, never a
// silently wrong buffer (kernels/prims/p2p_size.cuh). First a matching
// round (rank 0 sends P2P_FIRST floats to every other rank, each checks
// every element: no false alarm), then rank 0 sends P2P_SEND floats to rank
// 1, which receives P2P_RECV (P2P_PRE: a matching message of that many
// floats goes first in the same group). Rank 1 must report InvalidUsage
// naming rank 0 and both sizes long before MYCOLL_TIMEOUT; rank 0's kernel
// must end, with success (its data fit) or InvalidUsage naming rank 1;
// ranks 2.. are not in the pair and wait.
int p2p_size_body(mycollComm_t comm, const MemOps&) {
  int rank = -1, n = 0;
  mycollCommUserRank(comm, &rank);
  mycollCommCount(comm, &n);
  auto env = [](const char* v) { return size_t(std::strtoull(std::getenv(v), nullptr, 10)); };
  const size_t first = env("P2P_FIRST"), send = env("P2P_SEND"), recv = env("P2P_RECV"),
               pre = env("P2P_PRE");
  const size_t most = std::max({first, send, recv}) + pre;
  cudaStream_t s = rank_stream();
  auto st = reinterpret_cast<mycollStream_t>(s);
  float* buf = nullptr;
  cudaMalloc(&buf, most * sizeof(float));
  std::vector<float> h(most);
  for (size_t i = 0; i < most; ++i) h[i] = float(i % 4093) * 0.5f + float(rank);
  cudaMemcpyAsync(buf, h.data(), most * sizeof(float), cudaMemcpyHostToDevice, s);
  cudaStreamSynchronize(s);  // a plain cudaMemcpy's DMA may land after the call
  if (rank == 0) {
    mycollGroupStart();
    for (int r = 1; r < n; ++r) mycollSend(buf, first, mycollFloat32, r, comm, st);
    check(mycollGroupEnd() == mycollSuccess, "matching sends enqueued");
  } else {
    check(mycollRecv(buf, first, mycollFloat32, 0, comm, st) == mycollSuccess,
          "matching receive enqueued");
  }
  check(cudaStreamSynchronize(s) == cudaSuccess, "matching round ran");
  mycollResult_t async = mycollSuccess;
  mycollCommGetAsyncError(comm, &async);
  check(async == mycollSuccess, std::string("matching round raised no error, got ") +
                                    mycollGetErrorString(async) + ": " + mycollGetLastError(comm));
  if (rank != 0) {
    std::vector<float> got(first);
    cudaMemcpy(got.data(), buf, first * sizeof(float), cudaMemcpyDeviceToHost);
    size_t bad = 0;
    for (size_t i = 0; i < first; ++i) bad += got[i] != float(i % 4093) * 0.5f;
    check(bad == 0, std::to_string(bad) + " wrong elements in the matching round");
  }
  if (rank >= 2) {  // not in the pair: stay until the pair is done
    std::this_thread::sleep_for(std::chrono::seconds(8));
    std::fflush(nullptr);
    _exit(failures() ? 1 : 0);
  }
  const auto t0 = std::chrono::steady_clock::now();
  mycollGroupStart();
  if (rank == 0) {
    if (pre) mycollSend(buf, pre, mycollFloat32, 1, comm, st);
    mycollSend(buf + pre, send, mycollFloat32, 1, comm, st);
  } else {
    if (pre) mycollRecv(buf, pre, mycollFloat32, 0, comm, st);
    mycollRecv(buf + pre, recv, mycollFloat32, 0, comm, st);
  }
  check(mycollGroupEnd() == mycollSuccess, "mismatched pair enqueued");
  double dt = 0;
  const std::string sizes = "message bytes " + std::to_string((rank == 0 ? recv : send) * 4);
  if (rank == 1) {
    async = wait_async_error(comm, t0, std::chrono::milliseconds(5), &dt);
    check(async == mycollInvalidUsage,
          std::string("receiver reports InvalidUsage, got ") + mycollGetErrorString(async));
    check(dt < 15, "mismatch reported after " + std::to_string(dt) + " s");
    check(cudaStreamSynchronize(s) == cudaSuccess, "receiver's kernel ended");
  } else {
    check(cudaStreamSynchronize(s) == cudaSuccess, "sender's kernel ended");
    dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    check(dt < 15, "sender's kernel ended after " + std::to_string(dt) + " s");
    mycollCommGetAsyncError(comm, &async);
    // RemoteError: the receiver's report reached the sender (its peer watch).
    check(async == mycollSuccess || async == mycollInvalidUsage || async == mycollRemoteError,
          std::string("sender: success, InvalidUsage or RemoteError, got ") +
              mycollGetErrorString(async));
  }
  if (async != mycollSuccess) {
    const std::string why = mycollGetLastError(comm);
    const bool told = async == mycollRemoteError;  // the receiver's words
    const std::string peer = rank == 0 && !told ? "mismatch with rank 1," : "mismatch with rank 0,";
    const std::string named = told ? "message bytes " + std::to_string(send * 4) : sizes;
    check(why.find(peer) != std::string::npos && why.find(named) != std::string::npos,
          "reason '" + why + "' names the peer and its " + named);
  } else if (std::getenv("MYCOLL_TRANSPORT")) {
    // Through the GPU proxy a sender's kernel ends once its slots are in
    // the proxy's host FIFO, before they are on the wire: destroy (which
    // drains the proxy) before leaving, as a program does.
    mycollCommDestroy(comm);
  }
  std::fflush(nullptr);
  _exit(failures() ? 1 : 0);
}

struct P2pSizeCase {
  const char* name;
  size_t send, recv, pre;
  bool proxied;  // through the GPU proxy (MYCOLL_TRANSPORT=shm): the size lines as its frames
};

// LL sizes (one ll slice: MYCOLL_GPU_LL_BYTES 16 KiB; the LL kernel) and
// bandwidth sizes (the plan kernel's FIFOs), each side longer, a mismatch
// behind a matching message of the same pair in one group (LL behind LL:
// the LL kernel; LL behind a bandwidth message: the plan kernel's ll
// pass), and sizes on either side of the ll limit.
const P2pSizeCase kP2pSizeCases[] = {
    {"LlSendLonger", 2003, 1001, 0, false},
    {"LlRecvLonger", 1001, 2003, 0, false},
    {"FifoSendLonger", (size_t(1) << 20) + 12345, size_t(1) << 20, 0, false},
    {"FifoRecvLonger", size_t(1) << 20, (size_t(1) << 20) + 12345, 0, false},
    {"LlAfterMatching", 777, 999, 1001, false},
    // A bandwidth message first puts the group on the plan kernel: its ll pass.
    {"PlanLlAfterFifo", 999, 777, size_t(1) << 20, false},
    // Sizes on either side of the ll limit: the send and the receive wait on
    // different rings, and the receive finds the send on the other one
    // (sent_on_other_ring): the LL kernel's send to the plan kernel's FIFO
    // receive, the plan kernel's FIFO send to the LL kernel's receive, and
    // the same within the plan kernel (its ll pass against its FIFOs).
    {"StraddleSendLl", 1001, (size_t(1) << 20) + 12345, 0, false},
    {"StraddleRecvLl", (size_t(1) << 20) + 12345, 1001, 0, false},
    {"PlanStraddleSendLl", 999, size_t(1) << 20, size_t(1) << 20, false},
    {"PlanStraddleRecvLl", size_t(1) << 20, 999, size_t(1) << 20, false},
    // Through the GPU proxy every message takes the plan kernel's FIFOs.
    {"ProxiedSendLonger", 2003, 1001, 0, true},
    {"ProxiedRecvLonger", size_t(1) << 20, (size_t(1) << 20) + 12345, 0, true},
    {"ProxiedAfterMatching", 777, 999, 1001, true},
};

class GpuP2pSizeMismatch : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(GpuP2pSizeMismatch, ReceiverReportsItNamingBothSizes) {
  SKIP_WITHOUT_GPU();
  const P2pSizeCase& c = kP2pSizeCases[std::get<1>(GetParam())];
  std::map<std::string, std::string> env = {{"P2P_FIRST", "3001"},
                                            {"P2P_SEND", std::to_string(c.send)},
                                            {"P2P_RECV", std::to_string(c.recv)},
                                            {"P2P_PRE", std::to_string(c.pre)}};
  if (c.proxied) env["MYCOLL_TRANSPORT"] = "shm";
  EXPECT_EQ(on_gpus(std::get<0>(GetParam()), env, p2p_size_body), "") << c.name;
}

// A table of mismatch cases run at 2 and 3 ranks: parameters (ranks, case
// index), each test named <case>_<n>ranks.
template <typename Case, size_t N>
auto at_two_and_three_ranks(const Case (&)[N]) {
  return ::testing::Combine(::testing::Values(2, 3), ::testing::Range(0, int(N)));
}
template <typename Case, size_t N>
auto ranked_case_name(const Case (&cases)[N]) {
  return [&cases](const ::testing::TestParamInfo<std::tuple<int, int>>& i) {
    return std::string(cases[std::get<1>(i.param)].name) + "_" +
           std::to_string(std::get<0>(i.param)) + "ranks";
  };
}

INSTANTIATE_TEST_SUITE_P(Gpu, GpuP2pSizeMismatch, at_two_and_three_ranks(kP2pSizeCases),
                         ranked_case_name(kP2pSizeCases));

INSTANTIATE_TEST_SUITE_P(Gpu, GpuMismatch, at_two_and_three_ranks(kMismatchCases),
                         ranked_case_name(kMismatchCases));

}  // namespace
