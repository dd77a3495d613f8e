// The LL point-to-point kernel (kernels/colls/p2p.cu): groups of sends and
// receives on GPU buffers whose every slice fits the ll limit, on 2, 3, 4, 8
// GPUs, one process per GPU. Every rank decides alone which kernel runs its
// batch, so besides the LL kernel against itself the tests mix it with the
// plan kernel on the peer (a rank whose batch also holds a large copy to
// itself runs the plan kernel) in both directions, in CUDA graphs too. Every
// byte of every output is compared with the pattern the sender wrote, which
// changes every iteration (a stale line would show); outputs are poisoned
// before each call. Plus the kernel's give-up paths: timeout while receiving
// and while waiting for credit, and abort.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "common/multiproc.h"
#include "engine/device_plan_build.h"
#include "gpu/gpu_util.h"

using namespace mycoll_test;

namespace {

// Byte i of the message with this seed.
__host__ __device__ inline uint8_t pattern(uint32_t seed, uint64_t i) {
  uint64_t x = (uint64_t(seed) << 32) ^ (i * 0x9E3779B97F4A7C15ull);
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  return uint8_t(x);
}

__global__ void fill_pattern(uint8_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    p[i] = pattern(seed, i);
}

// The m-th message from `from` to `to` in iteration it.
uint32_t seed_of(int from, int to, int m, int it) {
  return uint32_t(from) | uint32_t(to) << 4 | uint32_t(m) << 8 | uint32_t(it) << 14;
}

// The limits the tests run with, set explicitly. 16 channels: what 8 ranks
// sharing one 132-SM GPU may use (a larger MYCOLL_NCHANNELS is refused at
// init there), so the same split holds on every layout.
constexpr size_t kChannelBytes = 8192;
constexpr int kChannels = 16;
constexpr size_t kLlBytes = 16384;

std::map<std::string, std::string> test_env() {
  return {{"MYCOLL_TIMEOUT", "60"},
          {"MYCOLL_NCHANNELS", std::to_string(kChannels)},
          {"MYCOLL_GPU_CHANNEL_BYTES", std::to_string(kChannelBytes)},
          {"MYCOLL_GPU_LL_BYTES", std::to_string(kLlBytes)}};
}

// The largest message whose every slice fits the ll limit (the LL kernel
// serves it; one byte more goes to the plan kernel).
size_t largest_ll_message() {
  auto largest_slice = [](size_t bytes) {
    const int nch = mycoll::device_channels(bytes, kChannelBytes, kChannels);
    size_t m = 0;
    for (int c = 0; c < nch; ++c) {
      const mycoll::ByteRange r = mycoll::p2p_slice(bytes, nch, c);
      m = std::max(m, r.hi - r.lo);
    }
    return m;
  };
  size_t b = kLlBytes * kChannels + 64;
  while (largest_slice(b) > kLlBytes) --b;
  return b;
}

// One rank's side of a fixed pattern of messages: sizes(from, to) lists the
// messages from rank `from` to rank `to` in order; `self_bytes` > 0 adds a
// send to self paired with a receive (a copy: the batch then runs on the
// plan kernel) on the iterations that ask for it.
class Exchange {
 public:
  Exchange(int rank, int n, cudaStream_t s,
           const std::function<std::vector<size_t>(int, int)>& sizes, size_t self_bytes = 0)
      : rank_(rank), n_(n), s_(s), self_bytes_(self_bytes) {
    // Peers in a rank-dependent order (odd ranks ascending from rank + 1,
    // even ranks descending from rank - 1), sends and receives interleaved:
    // only the order per (peer, direction) has to agree between ranks.
    for (int k = 1; k < n; ++k) {
      const int peer = (rank + (rank % 2 ? k : n - k)) % n;
      const std::vector<size_t> out = sizes(rank, peer), in = sizes(peer, rank);
      for (size_t m = 0; m < std::max(out.size(), in.size()); ++m) {
        if (m < in.size()) add(false, peer, in[m], int(m));
        if (m < out.size()) add(true, peer, out[m], int(m));
      }
    }
    if (self_bytes_ > 0) {
      cudaMalloc(&self_src_, self_bytes_);
      cudaMalloc(&self_dst_, self_bytes_);
    }
  }
  ~Exchange() {
    for (Msg& m : msgs_) cudaFree(m.buf);
    if (self_src_) cudaFree(self_src_);
    if (self_dst_) cudaFree(self_dst_);
  }

  // Fills the sends, poisons the receives of iteration it (on the stream).
  void prepare(int it, bool self) {
    const uint8_t poison = uint8_t(0x5a ^ it);
    for (Msg& m : msgs_) {
      if (m.send)
        fill_pattern<<<64, 256, 0, s_>>>(m.buf, m.bytes, seed_of(rank_, m.peer, m.idx, it));
      else
        cudaMemsetAsync(m.buf, poison, m.bytes, s_);
    }
    if (self) {
      fill_pattern<<<64, 256, 0, s_>>>(self_src_, self_bytes_, seed_of(rank_, rank_, 63, it));
      cudaMemsetAsync(self_dst_, poison, self_bytes_, s_);
    }
  }

  // The group call (also under capture).
  bool post(mycollComm_t comm, bool self, const std::string& what) {
    auto st = reinterpret_cast<mycollStream_t>(s_);
    bool ok = check(mycollGroupStart() == mycollSuccess, what + ": group start");
    for (Msg& m : msgs_) {
      mycollResult_t r = m.send ? mycollSend(m.buf, m.bytes, mycollUint8, m.peer, comm, st)
                                : mycollRecv(m.buf, m.bytes, mycollUint8, m.peer, comm, st);
      ok &= check(r == mycollSuccess, what + ": send/recv: " + mycollGetLastError(comm));
    }
    if (self) {
      ok &= check(mycollSend(self_src_, self_bytes_, mycollUint8, rank_, comm, st) == mycollSuccess,
                  what + ": send to self");
      ok &= check(mycollRecv(self_dst_, self_bytes_, mycollUint8, rank_, comm, st) == mycollSuccess,
                  what + ": recv from self");
    }
    ok &=
        check(mycollGroupEnd() == mycollSuccess, what + ": group end: " + mycollGetLastError(comm));
    return ok;
  }

  // Waits for the stream, then compares every received byte.
  bool verify(mycollComm_t comm, int it, bool self, const std::string& what) {
    if (!check(cudaStreamSynchronize(s_) == cudaSuccess, what + ": stream")) return false;
    mycollResult_t async = mycollSuccess;
    mycollCommGetAsyncError(comm, &async);
    if (!check(async == mycollSuccess, what + ": async error: " + mycollGetLastError(comm)))
      return false;
    for (Msg& m : msgs_)
      if (!m.send &&
          !compare(m.buf, m.bytes, seed_of(m.peer, rank_, m.idx, it),
                   what + ": message " + std::to_string(m.idx) + " (" + std::to_string(m.bytes) +
                       " B) from rank " + std::to_string(m.peer)))
        return false;
    if (self &&
        !compare(self_dst_, self_bytes_, seed_of(rank_, rank_, 63, it), what + ": self copy"))
      return false;
    return true;
  }

  // prepare + post + verify.
  bool round(mycollComm_t comm, int it, bool self, const std::string& what) {
    prepare(it, self);
    return post(comm, self, what) && verify(comm, it, self, what);
  }

 private:
  struct Msg {
    bool send;
    int peer;
    size_t bytes;
    int idx;
    uint8_t* buf;
  };

  void add(bool send, int peer, size_t bytes, int idx) {
    Msg m{send, peer, bytes, idx, nullptr};
    cudaMalloc(&m.buf, std::max<size_t>(bytes, 1));
    msgs_.push_back(m);
  }

  bool compare(const uint8_t* d, size_t bytes, uint32_t seed, const std::string& what) {
    host_.resize(bytes);
    cudaMemcpy(host_.data(), d, bytes, cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < bytes; ++i)
      if (host_[i] != pattern(seed, i))
        return check(false, what + ": byte " + std::to_string(i) + " is " +
                                std::to_string(host_[i]) + ", expected " +
                                std::to_string(pattern(seed, i)));
    return true;
  }

  int rank_, n_;
  cudaStream_t s_;
  size_t self_bytes_;
  std::vector<Msg> msgs_;
  uint8_t* self_src_ = nullptr;
  uint8_t* self_dst_ = nullptr;
  std::vector<uint8_t> host_;
};

using P2pBody = std::function<int(mycollComm_t, int rank, int n, cudaStream_t)>;

// One process per GPU, rank r on GPU r, body on a fresh stream.
std::string run_on_gpus(int ngpus, std::map<std::string, std::string> env, const P2pBody& body,
                        double timeout_s = 900) {
  LaunchOptions opt;
  opt.nranks = ngpus;
  opt.env = std::move(env);
  opt.pre_init = [](int rank) { cudaSetDevice(gpu_of(rank)); };
  opt.timeout_s = timeout_s;
  auto res = run_ranks(opt, [&](mycollComm_t comm, int rank, int n, const mycollUniqueId&) {
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    int rc = body(comm, rank, n, s);
    cudaStreamDestroy(s);
    return rc;
  });
  return describe_failures(res);
}

// Whether rank `rank` adds its copy to self (the plan kernel) in iteration
// it: a pseudo-random choice per rank and iteration, so every pair of ranks
// meets in all four combinations of kernels.
bool plan_kernel_turn(int rank, int it) {
  uint32_t x = uint32_t(it) * 2654435761u ^ uint32_t(rank) * 40503u;
  x ^= x >> 13;
  x *= 0x5bd1e995u;
  return (x >> 15) & 1;
}

class GpuP2pLl : public ::testing::TestWithParam<int> {};

// (a) Ring: send to r+1, receive from r-1, every size several hundred times
// (the largest LL size and one byte more, which runs the plan kernel).
TEST_P(GpuP2pLl, RingExchange) {
  const int ngpus = GetParam();
  SKIP_WITHOUT_GPU();
  const size_t most = largest_ll_message();
  EXPECT_EQ(
      run_on_gpus(ngpus, test_env(),
                  [most](mycollComm_t comm, int rank, int n, cudaStream_t s) {
                    for (size_t size : {size_t(1), size_t(7), size_t(1001), size_t(8192),
                                        size_t(8192 + 16), size_t(65536 + 3), most, most + 1}) {
                      Exchange x(rank, n, s, [size, n](int from, int to) {
                        return to == (from + 1) % n ? std::vector<size_t>{size}
                                                    : std::vector<size_t>{};
                      });
                      for (int it = 0; it < 300; ++it)
                        if (!x.round(comm, it, false,
                                     "ring " + std::to_string(size) + " B, iteration " +
                                         std::to_string(it)))
                          return 1;
                    }
                    return 0;
                  }),
      "");
}

// (a') Two ranks on 64 channels: 512 KiB-1 MiB cut into 64 slices each way
// is 128 keys, the LL kernel's largest parameter block (its largest batch
// where each rank has a GPU; ranks sharing one GPU have fewer blocks, and
// there the plan kernel runs it). One byte above 1 MiB runs the plan kernel.
TEST(GpuP2pLlWide, TwoRanksOnSixtyFourChannels) {
  SKIP_WITHOUT_GPU();
  std::map<std::string, std::string> env = test_env();
  env["MYCOLL_NCHANNELS"] = "64";
  EXPECT_EQ(run_on_gpus(2, env,
                        [](mycollComm_t comm, int rank, int n, cudaStream_t s) {
                          for (size_t size : {size_t(512) << 10, (size_t(512) << 10) + 48,
                                              size_t(1) << 20, (size_t(1) << 20) + 1}) {
                            Exchange x(rank, n, s, [size](int from, int to) {
                              return from != to ? std::vector<size_t>{size} : std::vector<size_t>{};
                            });
                            for (int it = 0; it < 50; ++it)
                              if (!x.round(comm, it, false,
                                           "64 channels, " + std::to_string(size) +
                                               " B, iteration " + std::to_string(it)))
                                return 1;
                          }
                          return 0;
                        }),
            "");
}

// (b) Every rank to every other rank in one group, sizes alternating per
// iteration (1 to 4 channels per message).
TEST_P(GpuP2pLl, AllPairsInOneGroup) {
  const int ngpus = GetParam();
  SKIP_WITHOUT_GPU();
  EXPECT_EQ(
      run_on_gpus(
          ngpus, test_env(),
          [](mycollComm_t comm, int rank, int n, cudaStream_t s) {
            std::vector<std::unique_ptr<Exchange>> xs;
            for (size_t size : {size_t(1), size_t(1001), size_t(8192 + 16), size_t(40000 + 5)})
              xs.push_back(std::make_unique<Exchange>(rank, n, s, [size](int from, int to) {
                // Sizes differ per pair too.
                return std::vector<size_t>{size + size_t(from * 3 + to)};
              }));
            for (int it = 0; it < 400; ++it)
              if (!xs[it % xs.size()]->round(comm, it, false,
                                             "all pairs, iteration " + std::to_string(it)))
                return 1;
            return 0;
          }),
      "");
}

// (c) Several messages to the same peer in one group: they must arrive in
// order; more than the ll ring holds on one channel, so senders wait for
// credit in the middle of the batch.
TEST_P(GpuP2pLl, SeveralMessagesToOnePeerKeepOrder) {
  const int ngpus = GetParam();
  SKIP_WITHOUT_GPU();
  EXPECT_EQ(
      run_on_gpus(ngpus, test_env(),
                  [](mycollComm_t comm, int rank, int n, cudaStream_t s) {
                    const std::vector<size_t> list = {3,     16000, 1001, 16000, 16000, 16,
                                                      16000, 16000, 7,    16000, 20000, 5};
                    Exchange x(rank, n, s, [&](int from, int to) {
                      if (to == (from + 1) % n) return list;
                      if (n > 2 && to == (from + n - 1) % n)
                        return std::vector<size_t>(list.rbegin(), list.rend());
                      return std::vector<size_t>{};
                    });
                    for (int it = 0; it < 300; ++it)
                      if (!x.round(comm, it, false, "ordering, iteration " + std::to_string(it)))
                        return 1;
                    return 0;
                  }),
      "");
}

// (d) Interop: ring and all-pairs small messages; on a pseudo-random half of
// the iterations a rank also copies 1 MiB to itself, which puts its batch on
// the plan kernel while its peers' batches may be all-small (LL kernel).
TEST_P(GpuP2pLl, InteroperatesWithThePlanKernel) {
  const int ngpus = GetParam();
  SKIP_WITHOUT_GPU();
  EXPECT_EQ(run_on_gpus(ngpus, test_env(),
                        [](mycollComm_t comm, int rank, int n, cudaStream_t s) {
                          Exchange x(
                              rank, n, s,
                              [n](int from, int to) {
                                std::vector<size_t> v = {1001 + size_t(from), 8192 + 16 + 7};
                                if (to == (from + 1) % n) v.push_back(40000 + 3);
                                return v;
                              },
                              (size_t(1) << 20) + 5);
                          for (int it = 0; it < 400; ++it)
                            if (!x.round(comm, it, plan_kernel_turn(rank, it),
                                         "interop, iteration " + std::to_string(it)))
                              return 1;
                          return 0;
                        }),
            "");
}

// (e) CUDA graphs: an all-small batch (LL kernel) and the same batch with a
// copy to self (plan kernel) captured once, before either ran, and replayed,
// interleaved with eager calls, each rank choosing per iteration; inputs
// change between replays (filled outside the graph).
TEST_P(GpuP2pLl, GraphReplaysInteroperate) {
  const int ngpus = GetParam();
  SKIP_WITHOUT_GPU();
  EXPECT_EQ(
      run_on_gpus(
          ngpus, test_env(),
          [](mycollComm_t comm, int rank, int n, cudaStream_t s) {
            Exchange x(
                rank, n, s,
                [n](int from, int to) {
                  std::vector<size_t> v = {777};
                  if (to == (from + 1) % n) v.push_back(20000 + 1);
                  return v;
                },
                (size_t(1) << 20) + 5);
            // Both batches are captured first, so the plan kernel's batch
            // is built and uploaded under capture; the eager rounds after
            // it, before any replay, find it complete.
            cudaGraphExec_t ge[2];
            for (int self = 0; self < 2; ++self) {
              cudaGraph_t g;
              if (!check(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess,
                         "begin capture"))
                return 1;
              const bool posted = x.post(comm, self, "capture");
              if (!check(cudaStreamEndCapture(s, &g) == cudaSuccess && posted, "end capture") ||
                  !check(cudaGraphInstantiate(&ge[self], g, 0) == cudaSuccess, "instantiate"))
                return 1;
              cudaGraphDestroy(g);
            }
            for (int it = 0; it < 2; ++it)
              if (!x.round(comm, it, it == 1, "eager, before any replay")) return 1;
            for (int it = 2; it < 300; ++it) {
              const bool self = plan_kernel_turn(rank, it);
              const std::string what = "graph, iteration " + std::to_string(it);
              x.prepare(it, self);
              if (it % 3 == 0) {
                if (!x.post(comm, self, what)) return 1;
              } else if (!check(cudaGraphLaunch(ge[self], s) == cudaSuccess,
                                what + ": graph launch")) {
                return 1;
              }
              if (!x.verify(comm, it, self, what)) return 1;
            }
            cudaGraphExecDestroy(ge[0]);
            cudaGraphExecDestroy(ge[1]);
            return 0;
          }),
      "");
}

INSTANTIATE_TEST_SUITE_P(Gpu, GpuP2pLl, ::testing::Values(2, 3, 4, 8),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return std::to_string(i.param) + "gpus";
                         });

// Give-up paths of the LL kernel on 2 GPUs: a receive whose sender never
// sends and a sender that runs out of credit (its receiver never receives)
// time out with the peer and direction recorded; a receive stuck with a long
// timeout ends at mycollCommAbort. The stuck rank's peer stays alive (idle)
// meanwhile. Ranks leave with _exit: a broken communicator is not destroyed
// collectively.
enum class Stuck { Recv, Send, Abort };

void expect_gives_up(Stuck mode) {
  auto env = test_env();
  env["MYCOLL_TIMEOUT"] = mode == Stuck::Abort ? "120" : "3";
  const std::string err = run_on_gpus(
      2, env,
      [mode](mycollComm_t comm, int rank, int, cudaStream_t s) {
        const int stuck = mode == Stuck::Send ? 0 : 1;
        if (rank != stuck) {
          std::this_thread::sleep_for(std::chrono::seconds(12));
          std::fflush(nullptr);
          _exit(failures() ? 1 : 0);
        }
        auto st = reinterpret_cast<mycollStream_t>(s);
        uint8_t* buf = nullptr;
        cudaMalloc(&buf, 16 * 16000);
        const auto t0 = std::chrono::steady_clock::now();
        mycollGroupStart();
        if (mode == Stuck::Send) {
          // 16 slots of the 8-slot ring on one channel: the 5th waits for credit.
          for (int i = 0; i < 8; ++i) mycollSend(buf + i * 16000, 16000, mycollUint8, 1, comm, st);
        } else {
          mycollRecv(buf, 1001, mycollUint8, 0, comm, st);
        }
        check(mycollGroupEnd() == mycollSuccess, "group end");
        if (mode == Stuck::Abort) {
          std::this_thread::sleep_for(std::chrono::seconds(1));
          check(mycollCommAbort(comm) == mycollSuccess, "abort");
          const double dt =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          check(dt < 20, "abort returned after " + std::to_string(dt) + " s");
          check(cudaStreamSynchronize(s) == cudaSuccess, "kernel ended after abort");
        } else {
          mycollResult_t async = mycollSuccess;
          while (async == mycollSuccess &&
                 std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30)) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            mycollCommGetAsyncError(comm, &async);
          }
          const double dt =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          check(async == mycollTimeout,
                std::string("timeout reported, got ") + mycollGetErrorString(async));
          check(dt > 2 && dt < 20, "timed out after " + std::to_string(dt) + " s");
          // The reason comes back with the next call, which the broken communicator refuses.
          check(mycollAllReduce(buf, buf, 1, mycollUint8, mycollSum, comm, st) != mycollSuccess,
                "broken communicator refuses work");
          const std::string why = mycollGetLastError(comm);
          const std::string want =
              mode == Stuck::Send ? "while sending to rank 1" : "while receiving from rank 0";
          check(why.find(want) != std::string::npos, "reason '" + why + "' names " + want);
          check(cudaStreamSynchronize(s) == cudaSuccess, "kernel ended after the timeout");
        }
        std::fflush(nullptr);
        _exit(failures() ? 1 : 0);
        return 0;
      },
      120);
  EXPECT_EQ(err, "");
}

TEST(GpuP2pLlGiveUp, ReceiveTimesOut) {
  SKIP_WITHOUT_GPU();
  expect_gives_up(Stuck::Recv);
}
TEST(GpuP2pLlGiveUp, SenderWithoutCreditTimesOut) {
  SKIP_WITHOUT_GPU();
  expect_gives_up(Stuck::Send);
}
TEST(GpuP2pLlGiveUp, AbortEndsAWait) {
  SKIP_WITHOUT_GPU();
  expect_gives_up(Stuck::Abort);
}

}  // namespace
