// A collective captured in a CUDA graph and replayed: results follow the
// inputs of each replay; no host synchronisation inside the collective.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "common/multiproc.h"
#include "gpu/gpu_util.h"

using namespace mycoll_test;

namespace {

__global__ void fill(float* p, size_t n, float base) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    p[i] = base + float(i % 13);
}

// An all-reduce and an all-gather of 1M + 5 floats captured once, replayed 10
// times with new inputs, every element checked; returns the failures.
std::string capture_allreduce_allgather(std::map<std::string, std::string> env) {
  LaunchOptions opt;
  opt.nranks = 2;
  opt.env = std::move(env);
  opt.pre_init = [](int rank) { cudaSetDevice(gpu_of(rank)); };
  opt.timeout_s = 300;
  auto res = run_ranks(opt, [](mycollComm_t comm, int rank, int n, const mycollUniqueId&) {
    const size_t count = (1 << 20) + 5;
    float *in, *out, *gout;
    cudaMalloc(&in, count * sizeof(float));
    cudaMalloc(&out, count * sizeof(float));
    cudaMalloc(&gout, count * n * sizeof(float));
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    auto st = reinterpret_cast<mycollStream_t>(s);
    // Warm up once outside capture (plans and scratch are set up then).
    mycollAllReduce(in, out, count, mycollFloat32, mycollSum, comm, st);
    mycollAllGather(in, gout, count, mycollFloat32, comm, st);
    cudaStreamSynchronize(s);
    cudaGraph_t g;
    check(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess, "begin capture");
    check(mycollAllReduce(in, out, count, mycollFloat32, mycollSum, comm, st) == mycollSuccess,
          std::string("allreduce under capture: ") + mycollGetLastError(comm));
    check(mycollAllGather(in, gout, count, mycollFloat32, comm, st) == mycollSuccess,
          "allgather under capture");
    check(cudaStreamEndCapture(s, &g) == cudaSuccess, "end capture");
    cudaGraphExec_t ge;
    check(cudaGraphInstantiate(&ge, g, 0) == cudaSuccess, "instantiate");
    std::vector<float> h(count), hg(count * n);
    for (int it = 0; it < 10; ++it) {
      fill<<<64, 256, 0, s>>>(in, count, float(rank * 100 + it));
      check(cudaGraphLaunch(ge, s) == cudaSuccess, "graph launch");
      cudaStreamSynchronize(s);
      cudaMemcpy(h.data(), out, count * sizeof(float), cudaMemcpyDeviceToHost);
      cudaMemcpy(hg.data(), gout, count * n * sizeof(float), cudaMemcpyDeviceToHost);
      for (size_t i = 0; i < count; ++i) {
        float want = 0;
        for (int r = 0; r < n; ++r) want += float(r * 100 + it) + float(i % 13);
        if (!check(h[i] == want,
                   "replay " + std::to_string(it) + " allreduce element " + std::to_string(i)))
          break;
      }
      for (size_t i = 0; i < count * n; ++i)
        if (!check(hg[i] == float((i / count) * 100 + it) + float((i % count) % 13),
                   "replay " + std::to_string(it) + " allgather element " + std::to_string(i)))
          break;
    }
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    cudaFree(in);
    cudaFree(out);
    cudaFree(gout);
    cudaStreamDestroy(s);
    return 0;
  });
  return describe_failures(res);
}

TEST(GpuGraph, CaptureAndReplayAllReduceAndAllGather) {
  SKIP_WITHOUT_GPU();
  EXPECT_EQ(capture_allreduce_allgather({}), "");
}

// The same through the fused ring kernel (ring algorithm, 4 MiB messages).
TEST(GpuGraph, RingKernelReplays) {
  SKIP_WITHOUT_GPU();
  EXPECT_EQ(capture_allreduce_allgather({{"MYCOLL_ALGO", "ring"}, {"MYCOLL_GPU_RING_BYTES", "1M"}}),
            "");
}

// The one-shot all-reduce kernel (MYCOLL_ALGO=direct, 1000 floats, under
// MYCOLL_GPU_ONESHOT_BYTES) captured once and replayed 50 times with new
// inputs; every 7th replay is followed by an eager call of the same
// all-reduce, so graph replays and eager calls share the device-side epoch.
TEST(GpuGraph, OneShotAllReduceReplays) {
  SKIP_WITHOUT_GPU();
  LaunchOptions opt;
  opt.nranks = 4;  // round-robin over the GPUs present
  opt.env = {{"MYCOLL_ALGO", "direct"}, {"MYCOLL_TIMEOUT", "60"}};
  opt.pre_init = [](int rank) { cudaSetDevice(gpu_of(rank)); };
  opt.timeout_s = 300;
  auto res = run_ranks(opt, [](mycollComm_t comm, int rank, int n, const mycollUniqueId&) {
    const size_t count = 1000;
    float *in, *out;
    cudaMalloc(&in, count * sizeof(float));
    cudaMalloc(&out, count * sizeof(float));
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    auto st = reinterpret_cast<mycollStream_t>(s);
    std::vector<float> h(count);
    auto expect = [&](int it, const std::string& what) {
      cudaStreamSynchronize(s);
      cudaMemcpy(h.data(), out, count * sizeof(float), cudaMemcpyDeviceToHost);
      for (size_t i = 0; i < count; ++i) {
        float want = 0;
        for (int r = 0; r < n; ++r) want += float(r * 100 + it) + float(i % 13);
        if (!check(h[i] == want, what + " " + std::to_string(it) + " element " + std::to_string(i) +
                                     ": got " + std::to_string(h[i]) + " expected " +
                                     std::to_string(want)))
          return false;
      }
      return true;
    };
    cudaGraph_t g;
    check(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess, "begin capture");
    check(mycollAllReduce(in, out, count, mycollFloat32, mycollSum, comm, st) == mycollSuccess,
          std::string("allreduce under capture: ") + mycollGetLastError(comm));
    check(cudaStreamEndCapture(s, &g) == cudaSuccess, "end capture");
    cudaGraphExec_t ge;
    check(cudaGraphInstantiate(&ge, g, 0) == cudaSuccess, "instantiate");
    for (int it = 0; it < 50; ++it) {
      fill<<<8, 128, 0, s>>>(in, count, float(rank * 100 + it));
      cudaMemsetAsync(out, 0xff, count * sizeof(float), s);
      check(cudaGraphLaunch(ge, s) == cudaSuccess, "graph launch");
      if (!expect(it, "replay")) break;
      if (it % 7 == 3) {
        cudaMemsetAsync(out, 0xff, count * sizeof(float), s);
        check(mycollAllReduce(in, out, count, mycollFloat32, mycollSum, comm, st) == mycollSuccess,
              "eager allreduce");
        if (!expect(it, "eager call after replay")) break;
      }
    }
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    cudaFree(in);
    cudaFree(out);
    cudaStreamDestroy(s);
    return 0;
  });
  EXPECT_EQ(describe_failures(res), "");
}

// A two-shot all-reduce (1 MiB + 12 bytes of floats) and a one-shot one
// (1000 floats), both by the automatic rule with the default limits, captured
// in one graph (no warm-up) and replayed 50 times with new inputs; both
// kernels advance the one device-side epoch they share, out-of-place and in
// place, and every output element is checked after each replay.
TEST(GpuGraph, TwoShotAndOneShotAllReduceReplays) {
  SKIP_WITHOUT_GPU();
  LaunchOptions opt;
  opt.nranks = 4;  // round-robin over the GPUs present
  opt.env = {{"MYCOLL_TIMEOUT", "60"}};
  opt.pre_init = [](int rank) {
    cudaSetDevice(gpu_of(rank));
    unsetenv("MYCOLL_ALGO");
    unsetenv("MYCOLL_GPU_ONESHOT_BYTES");
    unsetenv("MYCOLL_GPU_TWOSHOT_BYTES");
  };
  opt.timeout_s = 300;
  auto res = run_ranks(opt, [](mycollComm_t comm, int rank, int n, const mycollUniqueId&) {
    const size_t big = (size_t(1) << 18) + 3, small = 1000;  // floats
    float *in, *out, *io;
    cudaMalloc(&in, big * sizeof(float));
    cudaMalloc(&out, big * sizeof(float));
    cudaMalloc(&io, small * sizeof(float));
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    auto st = reinterpret_cast<mycollStream_t>(s);
    std::vector<float> h(big);
    auto expect = [&](const float* buf, size_t count, int it, const std::string& what) {
      cudaMemcpy(h.data(), buf, count * sizeof(float), cudaMemcpyDeviceToHost);
      for (size_t i = 0; i < count; ++i) {
        float want = 0;
        for (int r = 0; r < n; ++r) want += float(r * 100 + it) + float(i % 13);
        if (!check(h[i] == want, what + " replay " + std::to_string(it) + " element " +
                                     std::to_string(i) + ": got " + std::to_string(h[i]) +
                                     " expected " + std::to_string(want)))
          return false;
      }
      return true;
    };
    cudaGraph_t g;
    check(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess, "begin capture");
    check(mycollAllReduce(in, out, big, mycollFloat32, mycollSum, comm, st) == mycollSuccess,
          std::string("two-shot allreduce under capture: ") + mycollGetLastError(comm));
    check(mycollAllReduce(io, io, small, mycollFloat32, mycollSum, comm, st) == mycollSuccess,
          std::string("one-shot allreduce under capture: ") + mycollGetLastError(comm));
    check(cudaStreamEndCapture(s, &g) == cudaSuccess, "end capture");
    cudaGraphExec_t ge;
    check(cudaGraphInstantiate(&ge, g, 0) == cudaSuccess, "instantiate");
    for (int it = 0; it < 50; ++it) {
      fill<<<64, 256, 0, s>>>(in, big, float(rank * 100 + it));
      fill<<<8, 128, 0, s>>>(io, small, float(rank * 100 + it));
      cudaMemsetAsync(out, 0xff, big * sizeof(float), s);
      check(cudaGraphLaunch(ge, s) == cudaSuccess, "graph launch");
      cudaStreamSynchronize(s);
      if (!expect(out, big, it, "two-shot") || !expect(io, small, it, "one-shot")) break;
    }
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    cudaFree(in);
    cudaFree(out);
    cudaFree(io);
    cudaStreamDestroy(s);
    return 0;
  });
  EXPECT_EQ(describe_failures(res), "");
}

// All-gather, reduce-scatter, broadcast, reduce and all-to-all of `count`
// floats per block (automatic algorithms, `env` set) captured into one graph
// without a warm-up, called eagerly once before the graph's first launch,
// and replayed `replays` times with new inputs; every 7th replay is
// followed by eager calls of the same five, so graph replays and eager
// calls share the device-side epochs and FIFO counters. Every output
// checked (a reduce's non-roots: their output left untouched).
std::string replay_five(std::map<std::string, std::string> env, size_t count, int replays,
                        int nranks = 4) {
  LaunchOptions opt;
  opt.nranks = nranks;  // round-robin over the GPUs present
  opt.env = std::move(env);
  opt.env.emplace("MYCOLL_TIMEOUT", "60");
  opt.pre_init = [](int rank) { cudaSetDevice(gpu_of(rank)); };
  opt.timeout_s = 300;
  auto res = run_ranks(opt, [count, replays](mycollComm_t comm, int rank, int n,
                                             const mycollUniqueId&) {
    const int root = n - 1;  // broadcast
    const int rd_root = 0;   // reduce
    float *ag_in, *ag_out, *rs_in, *rs_out, *bc_in, *bc_out, *rd_in, *rd_out, *aa_in, *aa_out;
    cudaMalloc(&ag_in, count * sizeof(float));
    cudaMalloc(&ag_out, count * n * sizeof(float));
    cudaMalloc(&rs_in, count * n * sizeof(float));
    cudaMalloc(&rs_out, count * sizeof(float));
    cudaMalloc(&bc_in, count * sizeof(float));
    cudaMalloc(&bc_out, count * sizeof(float));
    cudaMalloc(&rd_in, count * sizeof(float));
    cudaMalloc(&rd_out, count * sizeof(float));
    cudaMalloc(&aa_in, count * n * sizeof(float));
    cudaMalloc(&aa_out, count * n * sizeof(float));
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    auto st = reinterpret_cast<mycollStream_t>(s);
    auto enqueue = [&](const std::string& what) {
      bool ok =
          check(mycollAllGather(ag_in, ag_out, count, mycollFloat32, comm, st) == mycollSuccess,
                "allgather " + what + ": " + mycollGetLastError(comm));
      ok = ok && check(mycollReduceScatter(rs_in, rs_out, count, mycollFloat32, mycollSum, comm,
                                           st) == mycollSuccess,
                       "reducescatter " + what + ": " + mycollGetLastError(comm));
      ok = ok && check(mycollBroadcast(bc_in, bc_out, count, mycollFloat32, root, comm, st) ==
                           mycollSuccess,
                       "broadcast " + what + ": " + mycollGetLastError(comm));
      ok = ok && check(mycollReduce(rd_in, rd_out, count, mycollFloat32, mycollSum, rd_root, comm,
                                    st) == mycollSuccess,
                       "reduce " + what + ": " + mycollGetLastError(comm));
      ok = ok &&
           check(mycollAllToAll(aa_in, aa_out, count, mycollFloat32, comm, st) == mycollSuccess,
                 "alltoall " + what + ": " + mycollGetLastError(comm));
      return ok;
    };
    auto prepare = [&](int it) {
      const float base = float(rank * 100 + it);
      fill<<<8, 128, 0, s>>>(ag_in, count, base);
      fill<<<8, 128, 0, s>>>(rs_in, count * n, base);
      fill<<<8, 128, 0, s>>>(bc_in, count, base);
      fill<<<8, 128, 0, s>>>(rd_in, count, base);
      fill<<<8, 128, 0, s>>>(aa_in, count * n, base);
      cudaMemsetAsync(ag_out, 0xff, count * n * sizeof(float), s);
      cudaMemsetAsync(rs_out, 0xff, count * sizeof(float), s);
      cudaMemsetAsync(bc_out, 0xff, count * sizeof(float), s);
      cudaMemsetAsync(rd_out, 0xff, count * sizeof(float), s);
      cudaMemsetAsync(aa_out, 0xff, count * n * sizeof(float), s);
    };
    std::vector<float> hag(count * n), hrs(count), hbc(count), hrd(count), haa(count * n);
    auto expect = [&](int it, const std::string& what) {
      cudaStreamSynchronize(s);
      cudaMemcpy(hag.data(), ag_out, hag.size() * sizeof(float), cudaMemcpyDeviceToHost);
      cudaMemcpy(hrs.data(), rs_out, hrs.size() * sizeof(float), cudaMemcpyDeviceToHost);
      cudaMemcpy(hbc.data(), bc_out, hbc.size() * sizeof(float), cudaMemcpyDeviceToHost);
      cudaMemcpy(hrd.data(), rd_out, hrd.size() * sizeof(float), cudaMemcpyDeviceToHost);
      cudaMemcpy(haa.data(), aa_out, haa.size() * sizeof(float), cudaMemcpyDeviceToHost);
      auto bad = [&](const char* coll, size_t i, float got, float want) {
        if (got == want) return false;  // (no message built per element)
        return !check(got == want, what + " " + std::to_string(it) + " " + coll + " element " +
                                       std::to_string(i) + ": got " + std::to_string(got) +
                                       " expected " + std::to_string(want));
      };
      for (size_t i = 0; i < hag.size(); ++i)
        if (bad("allgather", i, hag[i], float((i / count) * 100 + it) + float((i % count) % 13)))
          return false;
      for (size_t i = 0; i < count; ++i) {
        float want = 0;
        for (int r = 0; r < n; ++r) want += float(r * 100 + it) + float((rank * count + i) % 13);
        if (bad("reducescatter", i, hrs[i], want)) return false;
      }
      for (size_t i = 0; i < count; ++i)
        if (bad("broadcast", i, hbc[i], float(root * 100 + it) + float(i % 13))) return false;
      for (size_t i = 0; i < count; ++i) {
        if (rank != rd_root) {
          uint32_t bits;
          std::memcpy(&bits, &hrd[i], sizeof(bits));
          if (!check(bits == 0xffffffffu, what + " " + std::to_string(it) +
                                              " reduce: non-root output element " +
                                              std::to_string(i) + " was written"))
            return false;
          continue;
        }
        float want = 0;
        for (int r = 0; r < n; ++r) want += float(r * 100 + it) + float(i % 13);
        if (bad("reduce", i, hrd[i], want)) return false;
      }
      for (size_t i = 0; i < haa.size(); ++i)
        if (bad("alltoall", i, haa[i],
                float((i / count) * 100 + it) + float((rank * count + i % count) % 13)))
          return false;
      return true;
    };
    cudaGraph_t g;
    check(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess, "begin capture");
    enqueue("under capture");
    check(cudaStreamEndCapture(s, &g) == cudaSuccess, "end capture");
    cudaGraphExec_t ge;
    check(cudaGraphInstantiate(&ge, g, 0) == cudaSuccess, "instantiate");
    // Eager calls of the same five before the graph's first launch: whatever
    // the capture set up (plans, scratch) is complete outside the graph.
    prepare(1000);
    if (enqueue("eager, before the first replay")) expect(1000, "eager before the first replay");
    for (int it = 0; it < replays; ++it) {
      prepare(it);
      check(cudaGraphLaunch(ge, s) == cudaSuccess, "graph launch");
      if (!expect(it, "replay")) break;
      if (it % 7 == 3) {
        prepare(it);
        if (!enqueue("eager") || !expect(it, "eager calls after replay")) break;
      }
    }
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    for (float* p : {ag_in, ag_out, rs_in, rs_out, bc_in, bc_out, rd_in, rd_out, aa_in, aa_out})
      cudaFree(p);
    cudaStreamDestroy(s);
    return 0;
  });
  return describe_failures(res);
}

// The LL-collective kernels: 1000 floats per block, under
// MYCOLL_GPU_LL_COLL_BYTES.
TEST(GpuGraph, LlCollectivesReplay) {
  SKIP_WITHOUT_GPU();
  EXPECT_EQ(replay_five({{"MYCOLL_GPU_LL_COLL_BYTES", "256K"}}, 1000, 30), "");
}

// The fused kernels: 1M + 3 floats per block, so all-gather and
// reduce-scatter run the ring kernel, broadcast and reduce its chains,
// all-to-all the direct kernel.
TEST(GpuGraph, FusedKernelsReplay) {
  SKIP_WITHOUT_GPU();
  EXPECT_EQ(replay_five({}, (size_t(1) << 20) + 3, 12), "");
}

// The plan kernel: the fused ring, direct and LL-collective kernels off, so
// every one of the five runs a plan, and the all-gather and reduce-scatter
// by recursive halving-doubling, the broadcast and reduce by the tree (rhd
// at 3 ranks folds a rank away, through scratch). Nothing ran before
// the capture, so each plan is uploaded and the scratch allocated while the
// stream captures (in global mode, which forbids cudaMalloc there). 100003
// floats per block, 3 ranks (on one GPU, all three share it).
TEST(GpuGraph, PlanKernelFirstUsedUnderCapture) {
  SKIP_WITHOUT_GPU();
  EXPECT_EQ(
      replay_five({{"MYCOLL_GPU_RING_BYTES", "0"},
                   {"MYCOLL_GPU_DIRECT_BYTES", "0"},
                   {"MYCOLL_GPU_LL_COLL_BYTES", "0"},
                   {"MYCOLL_ALGO", "allgather:rhd,reducescatter:rhd,broadcast:tree,reduce:tree"}},
                  100003, 12, 3),
      "");
}

}  // namespace
