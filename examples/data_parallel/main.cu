// data_parallel: data-parallel training of a small MLP, one GPU per rank,
// gradients averaged with mycoll. Shows what linking libmycoll into training
// code looks like; uses only the public C API (mycoll.h) and the CUDA runtime.
//
//   data_parallel [--np N] [--steps S] [--batch B] [--lr LR]
//                 [--print-every K] [--target-loss L] [--no-broadcast]
//
//   --np N      fork N local ranks, rank r on GPU r (default: every GPU)
//   under torchrun / mpirun / srun: one rank per process, mycollCommInitFromEnv
//
// Model: 64 -> 256 (ReLU) -> 10, softmax cross-entropy, plain SGD. Every
// parameter lives in ONE flat device buffer and every gradient in another of
// the same layout, so one mycollAllReduce(..., mycollAvg) per step averages
// them all. Data: 10 Gaussian blobs in 64 dimensions; rank r trains on its own
// shard (samples seeded by r).
//
// Exit status: 0 when the final loss fell below --target-loss and the
// replicas ended bitwise identical; 1 when either check failed; 2 on an error
// (a failed CUDA or mycoll call, a bad flag, no GPU or fewer than --np). With
// --skip-without-gpu a machine without (enough) GPUs prints "SKIP: ..." and
// exits 0 instead, as ring_allreduce_cuda and mycoll-perf do.
#include <cuda_runtime.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "launch.h"
#include "mycoll.h"

namespace {

using mycoll_launch::must;

// ---------------------------------------------------------------------------
// Model layout: one flat float buffer, [W1 | b1 | W2 | b2], row-major.
// W1 is kHidden x kIn, W2 is kClasses x kHidden. Gradients use the same layout.

constexpr int kIn = 64;
constexpr int kHidden = 256;
constexpr int kClasses = 10;
constexpr size_t kW1 = 0;
constexpr size_t kB1 = kW1 + size_t{kHidden} * kIn;
constexpr size_t kW2 = kB1 + kHidden;
constexpr size_t kB2 = kW2 + size_t{kClasses} * kHidden;
constexpr size_t kParams = kB2 + kClasses;  // 19210

constexpr int kShardMin = 16384;          // samples per rank (more when --batch is larger)
constexpr double kBlobSeparation = 0.45;  // class-mean scale, in units of the noise std
constexpr uint64_t kDataSeed = 0x5eed0001;
constexpr uint64_t kInitSeed = 0x5eed0002;
constexpr int kThreads = 256;

struct Options {
  int np = 0;  // 0: not given
  int steps = 300;
  int batch = 64;
  float lr = 0.1f;
  int print_every = 20;
  double target_loss = 0.5;
  bool broadcast = true;  // --no-broadcast: replicas start different (shows the check fails)
  bool skip_without_gpu = false;  // "SKIP: ..." and exit 0 instead of an error
};

// ---------------------------------------------------------------------------
// Errors. CUDA failures become exceptions; the launcher's run_rank() prints
// them, aborts the communicator (so peers fail fast instead of waiting) and
// makes the rank exit with status 2.

void cuda_must(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess)
    throw std::runtime_error(what + " failed: " + cudaGetErrorName(e) + ": " +
                             cudaGetErrorString(e));
}

// Call right after a kernel launch: catches bad launch configurations.
void launched(const char* kernel) {
  cuda_must(cudaGetLastError(), std::string("launching ") + kernel);
}

unsigned blocks_for(size_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

// ---------------------------------------------------------------------------
// Kernels. Naive on purpose: one thread per output element, loops over the
// reduced dimension in a fixed order. No atomics, so every kernel is
// deterministic, which the final "replicas identical" check relies on.
// Samples of a step are rows (start + b) % shard of the rank's shard.

__global__ void hidden_forward(const float* __restrict__ p, const float* __restrict__ x, int shard,
                               int start, int batch, float* __restrict__ h) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= batch * kHidden) return;
  const int b = i / kHidden, j = i % kHidden;
  const float* xr = x + static_cast<size_t>((start + b) % shard) * kIn;
  const float* w = p + kW1 + static_cast<size_t>(j) * kIn;
  float a = p[kB1 + j];
  for (int k = 0; k < kIn; ++k) a += w[k] * xr[k];
  h[i] = a > 0.f ? a : 0.f;  // ReLU; h > 0 doubles as the backward mask
}

__global__ void logits_forward(const float* __restrict__ p, const float* __restrict__ h, int batch,
                               float* __restrict__ z) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= batch * kClasses) return;
  const int b = i / kClasses, c = i % kClasses;
  const float* hr = h + static_cast<size_t>(b) * kHidden;
  const float* w = p + kW2 + static_cast<size_t>(c) * kHidden;
  float a = p[kB2 + c];
  for (int j = 0; j < kHidden; ++j) a += w[j] * hr[j];
  z[i] = a;
}

// One thread per sample: loss = logsumexp(z) - z[y]; dz = (softmax(z) - onehot(y)) / batch,
// the gradient of this rank's MEAN loss (the all-reduce then averages over ranks).
__global__ void softmax_xent(const float* __restrict__ z, const int* __restrict__ y, int shard,
                             int start, int batch, float* __restrict__ dz, float* __restrict__ loss,
                             float* __restrict__ correct) {
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= batch) return;
  const float* zr = z + static_cast<size_t>(b) * kClasses;
  const int label = y[(start + b) % shard];
  float m = zr[0];
  int argmax = 0;
  for (int c = 1; c < kClasses; ++c)
    if (zr[c] > m) {
      m = zr[c];
      argmax = c;
    }
  float se = 0.f;
  for (int c = 0; c < kClasses; ++c) se += expf(zr[c] - m);
  loss[b] = m + logf(se) - zr[label];
  correct[b] = argmax == label ? 1.f : 0.f;
  const float inv_batch = 1.f / static_cast<float>(batch);
  for (int c = 0; c < kClasses; ++c)
    dz[static_cast<size_t>(b) * kClasses + c] =
        (expf(zr[c] - m) / se - (c == label ? 1.f : 0.f)) * inv_batch;
}

// One block of kThreads: stats[0] += mean(loss), stats[1] += mean(correct).
// Accumulates on the device so the training loop never waits for the host.
__global__ void accumulate_stats(const float* __restrict__ loss, const float* __restrict__ correct,
                                 int batch, float* __restrict__ stats) {
  __shared__ float sl[kThreads], sc[kThreads];
  float l = 0.f, c = 0.f;
  for (int b = threadIdx.x; b < batch; b += kThreads) {
    l += loss[b];
    c += correct[b];
  }
  sl[threadIdx.x] = l;
  sc[threadIdx.x] = c;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (static_cast<int>(threadIdx.x) < s) {
      sl[threadIdx.x] += sl[threadIdx.x + s];
      sc[threadIdx.x] += sc[threadIdx.x + s];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    stats[0] += sl[0] / static_cast<float>(batch);
    stats[1] += sc[0] / static_cast<float>(batch);
  }
}

// dW2[c][j] = sum_b dz[b][c] * h[b][j];  db2[c] = sum_b dz[b][c].
__global__ void layer2_grads(const float* __restrict__ dz, const float* __restrict__ h, int batch,
                             float* __restrict__ g) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < kClasses * kHidden) {
    const int c = i / kHidden, j = i % kHidden;
    float a = 0.f;
    for (int b = 0; b < batch; ++b)
      a += dz[static_cast<size_t>(b) * kClasses + c] * h[static_cast<size_t>(b) * kHidden + j];
    g[kW2 + i] = a;
  } else if (i < kClasses * kHidden + kClasses) {
    const int c = i - kClasses * kHidden;
    float a = 0.f;
    for (int b = 0; b < batch; ++b) a += dz[static_cast<size_t>(b) * kClasses + c];
    g[kB2 + c] = a;
  }
}

// dh[b][j] = (h[b][j] > 0) * sum_c dz[b][c] * W2[c][j].
__global__ void hidden_backward(const float* __restrict__ p, const float* __restrict__ dz,
                                const float* __restrict__ h, int batch, float* __restrict__ dh) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= batch * kHidden) return;
  const int b = i / kHidden, j = i % kHidden;
  float a = 0.f;
  if (h[i] > 0.f)
    for (int c = 0; c < kClasses; ++c)
      a +=
          dz[static_cast<size_t>(b) * kClasses + c] * p[kW2 + static_cast<size_t>(c) * kHidden + j];
  dh[i] = a;
}

// dW1[j][k] = sum_b dh[b][j] * x[b][k];  db1[j] = sum_b dh[b][j].
__global__ void layer1_grads(const float* __restrict__ dh, const float* __restrict__ x, int shard,
                             int start, int batch, float* __restrict__ g) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < kHidden * kIn) {
    const int j = i / kIn, k = i % kIn;
    float a = 0.f;
    for (int b = 0; b < batch; ++b)
      a += dh[static_cast<size_t>(b) * kHidden + j] *
           x[static_cast<size_t>((start + b) % shard) * kIn + k];
    g[kW1 + i] = a;
  } else if (i < kHidden * kIn + kHidden) {
    const int j = i - kHidden * kIn;
    float a = 0.f;
    for (int b = 0; b < batch; ++b) a += dh[static_cast<size_t>(b) * kHidden + j];
    g[kB1 + j] = a;
  }
}

__global__ void sgd_update(float* __restrict__ p, const float* __restrict__ g, size_t n, float lr) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) p[i] -= lr * g[i];
}

// ---------------------------------------------------------------------------
// Deterministic host-side randomness (splitmix64 + Box-Muller).

struct Rng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }  // (0, 1)
  double gauss() {
    const double u = uniform(), v = uniform();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586 * v);
  }
};

// Rank's shard: n samples; label uniform over the classes, x = mean[label] +
// N(0, I). The class means are the same on every rank; the samples are not.
void make_shard(int rank, int n, std::vector<float>* x, std::vector<int>* y) {
  Rng means_rng{kDataSeed};
  std::vector<double> mean(size_t{kClasses} * kIn);
  for (double& m : mean) m = kBlobSeparation * means_rng.gauss();
  Rng rng{kDataSeed ^ (0x100000001b3ull * static_cast<uint64_t>(rank + 1))};
  x->resize(static_cast<size_t>(n) * kIn);
  y->resize(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const int label = static_cast<int>(rng.next() % kClasses);
    (*y)[i] = label;
    for (int k = 0; k < kIn; ++k)
      (*x)[static_cast<size_t>(i) * kIn + k] =
          static_cast<float>(mean[static_cast<size_t>(label) * kIn + k] + rng.gauss());
  }
}

// He init for W1, small W2 (initial loss ~ ln 10 = 2.30), zero biases.
// Seeded by rank on purpose: rank 0's values are broadcast to all, as a real
// data-parallel job does, and the final checksum shows the broadcast worked.
std::vector<float> init_params(int rank) {
  Rng rng{kInitSeed + static_cast<uint64_t>(rank)};
  std::vector<float> p(kParams, 0.f);
  for (size_t i = 0; i < size_t{kHidden} * kIn; ++i)
    p[kW1 + i] = static_cast<float>(rng.gauss() * std::sqrt(2.0 / kIn));
  for (size_t i = 0; i < size_t{kClasses} * kHidden; ++i)
    p[kW2 + i] = static_cast<float>(rng.gauss() * 0.1 * std::sqrt(1.0 / kHidden));
  return p;
}

// FNV-1a over the bytes: equal replicas give equal hashes, and any flipped
// bit anywhere almost surely changes it.
uint64_t fnv1a(const void* data, size_t bytes) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

// ---------------------------------------------------------------------------
// Device state of one rank. Freed only by release() on the success path: on an
// error a collective may still be stuck in the stream waiting for a dead
// peer, and cudaFree would wait for it; process exit reclaims everything.

struct DeviceState {
  cudaStream_t stream = nullptr;
  float* params = nullptr;        // kParams
  float* grads = nullptr;         // kParams, same layout
  float* x = nullptr;             // shard x kIn
  int* y = nullptr;               // shard
  float* h = nullptr;             // batch x kHidden (post-ReLU activations)
  float* dh = nullptr;            // batch x kHidden
  float* z = nullptr;             // batch x kClasses (logits)
  float* dz = nullptr;            // batch x kClasses
  float* loss = nullptr;          // batch
  float* correct = nullptr;       // batch
  float* stats = nullptr;         // 2: sums over the current window of (mean loss, accuracy)
  float* stats_avg = nullptr;     // 2: stats averaged over ranks
  uint64_t* checksum = nullptr;   // 1
  uint64_t* checksums = nullptr;  // nranks

  template <typename T>
  void alloc(T** p, size_t n, const char* name) {
    cuda_must(cudaMalloc(reinterpret_cast<void**>(p), n * sizeof(T)),
              "cudaMalloc(" + std::string(name) + ", " + std::to_string(n * sizeof(T)) + " bytes)");
  }

  void release() {
    for (void* p :
         {static_cast<void*>(params), static_cast<void*>(grads), static_cast<void*>(x),
          static_cast<void*>(y), static_cast<void*>(h), static_cast<void*>(dh),
          static_cast<void*>(z), static_cast<void*>(dz), static_cast<void*>(loss),
          static_cast<void*>(correct), static_cast<void*>(stats), static_cast<void*>(stats_avg),
          static_cast<void*>(checksum), static_cast<void*>(checksums)})
      if (p) cuda_must(cudaFree(p), "cudaFree");
    if (stream) cuda_must(cudaStreamDestroy(stream), "cudaStreamDestroy");
    *this = DeviceState{};
  }
};

// One training step, all on d.stream, no host synchronisation.
void train_step(DeviceState& d, mycollComm_t comm, int shard, int start, int batch, float lr) {
  cudaStream_t s = d.stream;
  // Forward.
  hidden_forward<<<blocks_for(static_cast<size_t>(batch) * kHidden), kThreads, 0, s>>>(
      d.params, d.x, shard, start, batch, d.h);
  launched("hidden_forward");
  logits_forward<<<blocks_for(static_cast<size_t>(batch) * kClasses), kThreads, 0, s>>>(
      d.params, d.h, batch, d.z);
  launched("logits_forward");
  softmax_xent<<<blocks_for(static_cast<size_t>(batch)), kThreads, 0, s>>>(
      d.z, d.y, shard, start, batch, d.dz, d.loss, d.correct);
  launched("softmax_xent");
  accumulate_stats<<<1, kThreads, 0, s>>>(d.loss, d.correct, batch, d.stats);
  launched("accumulate_stats");
  // Backward: every gradient element is written (not accumulated), so the
  // buffer needs no zeroing between steps.
  layer2_grads<<<blocks_for(size_t{kClasses} * kHidden + kClasses), kThreads, 0, s>>>(
      d.dz, d.h, batch, d.grads);
  launched("layer2_grads");
  hidden_backward<<<blocks_for(static_cast<size_t>(batch) * kHidden), kThreads, 0, s>>>(
      d.params, d.dz, d.h, batch, d.dh);
  launched("hidden_backward");
  layer1_grads<<<blocks_for(size_t{kHidden} * kIn + kHidden), kThreads, 0, s>>>(
      d.dh, d.x, shard, start, batch, d.grads);
  launched("layer1_grads");
  // The one collective of the step: average every gradient over the ranks,
  // in place, ordered on the same stream after backward and before the update.
  must(mycollAllReduce(d.grads, d.grads, kParams, mycollFloat32, mycollAvg, comm, s),
       "mycollAllReduce(gradients)", comm);
  sgd_update<<<blocks_for(kParams), kThreads, 0, s>>>(d.params, d.grads, kParams, lr);
  launched("sgd_update");
}

// Averages the window's stats over the ranks and brings them to the host
// (this is where the loop waits for the GPU: only when it reports), then
// resets the window. Returns {mean loss, mean accuracy} over window steps.
std::pair<double, double> read_window(DeviceState& d, mycollComm_t comm, int window) {
  must(mycollAllReduce(d.stats, d.stats_avg, 2, mycollFloat32, mycollAvg, comm, d.stream),
       "mycollAllReduce(loss)", comm);
  float host[2] = {0.f, 0.f};
  cuda_must(cudaMemcpyAsync(host, d.stats_avg, sizeof(host), cudaMemcpyDeviceToHost, d.stream),
            "cudaMemcpyAsync(stats)");
  cuda_must(cudaMemsetAsync(d.stats, 0, 2 * sizeof(float), d.stream), "cudaMemsetAsync(stats)");
  cuda_must(cudaStreamSynchronize(d.stream), "cudaStreamSynchronize");
  return {host[0] / window, host[1] / window};
}

int rank_main(mycollComm_t comm, int rank, int nranks, const Options& o, const char* how) {
  int dev = -1;
  cuda_must(cudaGetDevice(&dev), "cudaGetDevice");
  int comm_dev = -1;
  must(mycollCommCuDevice(comm, &comm_dev), "mycollCommCuDevice", comm);
  if (comm_dev != dev)
    throw std::runtime_error("communicator is bound to device " + std::to_string(comm_dev) +
                             " but this rank runs on device " + std::to_string(dev));
  cudaDeviceProp prop{};
  cuda_must(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
  const int shard = o.batch > kShardMin ? o.batch : kShardMin;
  if (rank == 0)
    std::printf(
        "data_parallel: %d ranks (%s), MLP %d-%d-%d (%zu parameters), batch %d per rank "
        "(%d global), lr %g, %d steps, %d samples per rank\n",
        nranks, how, kIn, kHidden, kClasses, kParams, o.batch, o.batch * nranks,
        static_cast<double>(o.lr), o.steps, shard);
  std::printf("rank %d: GPU %d (%s)\n", rank, dev, prop.name);
  std::fflush(stdout);

  DeviceState d;
  cuda_must(cudaStreamCreateWithFlags(&d.stream, cudaStreamNonBlocking), "cudaStreamCreate");
  const size_t b = static_cast<size_t>(o.batch);
  d.alloc(&d.params, kParams, "params");
  d.alloc(&d.grads, kParams, "grads");
  d.alloc(&d.x, static_cast<size_t>(shard) * kIn, "x");
  d.alloc(&d.y, static_cast<size_t>(shard), "y");
  d.alloc(&d.h, b * kHidden, "h");
  d.alloc(&d.dh, b * kHidden, "dh");
  d.alloc(&d.z, b * kClasses, "z");
  d.alloc(&d.dz, b * kClasses, "dz");
  d.alloc(&d.loss, b, "loss");
  d.alloc(&d.correct, b, "correct");
  d.alloc(&d.stats, 2, "stats");
  d.alloc(&d.stats_avg, 2, "stats_avg");
  d.alloc(&d.checksum, 1, "checksum");
  d.alloc(&d.checksums, static_cast<size_t>(nranks), "checksums");

  // Data and initial parameters: host -> device, then rank 0's parameters to
  // everybody. The copies go on the training stream and are waited for
  // before the host vectors die at the end of scope (a plain cudaMemcpy
  // from pageable memory may return before its DMA lands, and runs on the
  // legacy default stream, which this non-blocking stream does not wait for).
  {
    std::vector<float> x;
    std::vector<int> y;
    make_shard(rank, shard, &x, &y);
    cuda_must(
        cudaMemcpyAsync(d.x, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice, d.stream),
        "cudaMemcpyAsync(x)");
    cuda_must(
        cudaMemcpyAsync(d.y, y.data(), y.size() * sizeof(int), cudaMemcpyHostToDevice, d.stream),
        "cudaMemcpyAsync(y)");
    std::vector<float> p = init_params(rank);
    cuda_must(cudaMemcpyAsync(d.params, p.data(), kParams * sizeof(float), cudaMemcpyHostToDevice,
                              d.stream),
              "cudaMemcpyAsync(params)");
    cuda_must(cudaStreamSynchronize(d.stream), "cudaStreamSynchronize (inputs)");
  }
  cuda_must(cudaMemsetAsync(d.stats, 0, 2 * sizeof(float), d.stream), "cudaMemsetAsync(stats)");
  if (o.broadcast)
    must(mycollBroadcast(d.params, d.params, kParams, mycollFloat32, 0, comm, d.stream),
         "mycollBroadcast(initial parameters)", comm);

  // Training loop.
  const auto t0 = std::chrono::steady_clock::now();
  double final_loss = 0.0;
  int window = 0, window_start = 1;
  for (int step = 1; step <= o.steps; ++step) {
    const int start = static_cast<int>((static_cast<long long>(step - 1) * o.batch) % shard);
    train_step(d, comm, shard, start, o.batch, o.lr);
    ++window;
    if (step == 1 || step % o.print_every == 0 || step == o.steps) {
      auto [loss, acc] = read_window(d, comm, window);
      if (rank == 0) {
        std::printf("step %5d  loss %.4f  accuracy %.3f   (mean over ranks, steps %d-%d)\n", step,
                    loss, acc, window_start, step);
        std::fflush(stdout);
      }
      final_loss = loss;
      window = 0;
      window_start = step + 1;
    }
  }
  cuda_must(cudaStreamSynchronize(d.stream), "cudaStreamSynchronize");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  mycollResult_t async_err = mycollSuccess;
  must(mycollCommGetAsyncError(comm, &async_err), "mycollCommGetAsyncError", comm);
  must(async_err, "asynchronous error on the communicator", comm);

  // Replica check: hash this rank's parameters, gather every rank's hash.
  std::vector<float> params(kParams);
  cuda_must(cudaMemcpy(params.data(), d.params, kParams * sizeof(float), cudaMemcpyDeviceToHost),
            "cudaMemcpy(params to host)");
  const uint64_t mine = fnv1a(params.data(), kParams * sizeof(float));
  cuda_must(cudaMemcpyAsync(d.checksum, &mine, sizeof(mine), cudaMemcpyHostToDevice, d.stream),
            "cudaMemcpyAsync(checksum)");
  must(mycollAllGather(d.checksum, d.checksums, 1, mycollUint64, comm, d.stream),
       "mycollAllGather(checksums)", comm);
  std::vector<uint64_t> all(static_cast<size_t>(nranks), 0);
  cuda_must(cudaMemcpyAsync(all.data(), d.checksums, all.size() * sizeof(uint64_t),
                            cudaMemcpyDeviceToHost, d.stream),
            "cudaMemcpyAsync(checksums)");
  cuda_must(cudaStreamSynchronize(d.stream), "cudaStreamSynchronize");
  bool identical = all[static_cast<size_t>(rank)] == mine;  // also catches a broken gather
  for (uint64_t c : all) identical = identical && c == all[0];
  d.release();

  // Every rank saw the same averaged loss and the same checksums, so every
  // rank reaches the same verdict and exit status.
  const bool converged = std::isfinite(final_loss) && final_loss < o.target_loss;
  if (rank == 0) {
    std::printf("%d steps in %.3f s (%.3f ms/step)\n", o.steps, seconds, 1e3 * seconds / o.steps);
    std::printf("final loss %.4f, target < %g: %s\n", final_loss, o.target_loss,
                converged ? "reached" : "NOT reached");
    if (!identical)
      for (int r = 0; r < nranks; ++r)
        std::printf("  rank %d parameter checksum %016" PRIx64 "\n", r,
                    all[static_cast<size_t>(r)]);
    std::printf("replicas identical: %s (parameter checksum %016" PRIx64 ")\n",
                identical ? "yes" : "NO", mine);
    std::fflush(stdout);
  }
  return identical && converged ? 0 : 1;
}

// ---------------------------------------------------------------------------
// Process setup.

// Number of CUDA devices, asked in a forked child so that this process never
// initialises CUDA (a CUDA context does not survive fork()). Returns 0 when
// CUDA reports no device or no driver (reason in *why); -1 when the probe
// itself failed.
int probe_gpu_count(std::string* why) {
  int fds[2];
  if (pipe(fds) != 0) {
    *why = std::string("pipe: ") + std::strerror(errno);
    return -1;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) {
    *why = std::string("fork: ") + std::strerror(errno);
    close(fds[0]);
    close(fds[1]);
    return -1;
  }
  if (pid == 0) {
    close(fds[0]);
    int msg[2] = {0, 0};  // {count, cudaError_t}
    cudaError_t e = cudaGetDeviceCount(&msg[0]);
    if (e != cudaSuccess) msg[0] = 0;
    msg[1] = static_cast<int>(e);
    ssize_t w = write(fds[1], msg, sizeof(msg));
    _exit(w == static_cast<ssize_t>(sizeof(msg)) ? 0 : 1);
  }
  close(fds[1]);
  int msg[2] = {0, 0};
  size_t got = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (got < sizeof(msg)) {
    const long left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) break;
    pollfd pfd{fds[0], POLLIN, 0};
    const int pr = poll(&pfd, 1, static_cast<int>(left));
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) break;
    const ssize_t r = read(fds[0], reinterpret_cast<char*>(msg) + got, sizeof(msg) - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  close(fds[0]);
  if (got < sizeof(msg)) kill(pid, SIGKILL);  // our own probe child, stuck or dead
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  if (got < sizeof(msg)) {
    *why = "the GPU probe process gave no answer within 60 s (or died)";
    return -1;
  }
  const auto e = static_cast<cudaError_t>(msg[1]);
  if (e != cudaSuccess)
    *why = std::string("cudaGetDeviceCount: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
  return msg[0];
}

// The first of the named environment variables that holds a non-negative
// integer, or -1.
int env_int(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    const char* v = std::getenv(name);
    if (!v || !*v) continue;
    char* end = nullptr;
    errno = 0;
    const long n = std::strtol(v, &end, 10);
    if (errno == 0 && *end == '\0' && n >= 0 && n <= 1 << 20) return static_cast<int>(n);
  }
  return -1;
}

// Under a launcher: the GPU of this process, from the launcher's local rank,
// else the global rank modulo the number of GPUs.
int device_from_env(int ngpus) {
  int local = env_int({"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                       "SLURM_LOCALID", "MYCOLL_LOCAL_RANK"});
  if (local < 0) {
    const int global =
        env_int({"MYCOLL_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID"});
    local = global < 0 ? 0 : global % ngpus;
  }
  return local;
}

// Runs in each rank's process right before its communicator is created: the
// communicator binds to the current device. No way to return an error from
// here, so a failure ends the process (status 2) with a message.
void select_device(int dev, int rank) {
  const cudaError_t e = cudaSetDevice(dev);
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "rank %d: cudaSetDevice(%d) failed: %s: %s\n", rank, dev,
               cudaGetErrorName(e), cudaGetErrorString(e));
  std::fflush(stderr);
  _exit(2);
}

void usage(const char* prog) {
  std::fprintf(
      stderr,
      "usage: %s [--np N] [--steps S] [--batch B] [--lr LR] [--print-every K] "
      "[--target-loss L] [--no-broadcast] [--skip-without-gpu]\n"
      "  --np N           fork N local ranks, rank r on GPU r (default: all GPUs);\n"
      "                   leave out under torchrun/mpirun/srun (one rank per process)\n"
      "  --steps S        training steps (default 300)\n"
      "  --batch B        samples per rank per step (default 64)\n"
      "  --lr LR          SGD learning rate (default 0.1)\n"
      "  --print-every K  report the loss every K steps (default 20)\n"
      "  --target-loss L  fail (exit 1) unless the final loss is below L (default 0.5)\n"
      "  --no-broadcast   skip broadcasting rank 0's initial parameters: with 2+ ranks the\n"
      "                   replicas then differ and the final check fails (exit 1)\n"
      "  --skip-without-gpu  print 'SKIP: ...' and exit 0 when there are not enough GPUs\n"
      "                   (default: an error, exit 2)\n",
      prog);
}

bool parse_number(const char* s, double lo, double hi, double* out) {
  if (!s || !*s) return false;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s, &end);
  if (errno != 0 || *end != '\0' || !std::isfinite(v) || v < lo || v > hi) return false;
  *out = v;
  return true;
}

bool parse_args(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      usage(argv[0]);
      std::exit(0);
    }
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    double x = 0;
    auto integer = [&](double lo, double hi, int* dst) {
      if (!parse_number(v, lo, hi, &x) || x != std::floor(x)) return false;
      *dst = static_cast<int>(x);
      return true;
    };
    bool ok = false;
    if (a == "--np") {
      ok = integer(1, 1024, &o->np);
    } else if (a == "--steps") {
      ok = integer(1, 1e8, &o->steps);
    } else if (a == "--batch") {
      ok = integer(1, 65536, &o->batch);
    } else if (a == "--print-every") {
      ok = integer(1, 1e8, &o->print_every);
    } else if (a == "--lr") {
      ok = parse_number(v, 1e-12, 1e6, &x);
      o->lr = static_cast<float>(x);
    } else if (a == "--no-broadcast") {
      o->broadcast = false;
      continue;  // takes no value
    } else if (a == "--skip-without-gpu") {
      o->skip_without_gpu = true;
      continue;
    } else if (a == "--target-loss") {
      ok = parse_number(v, 0, 1e9, &o->target_loss);
    } else {
      std::fprintf(stderr, "%s: unknown argument '%s'\n", argv[0], argv[i]);
      usage(argv[0]);
      return false;
    }
    if (!ok) {
      std::fprintf(stderr, "%s: bad value '%s' for %s\n", argv[0], v ? v : "(missing)", a.c_str());
      usage(argv[0]);
      return false;
    }
    ++i;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse_args(argc, argv, &o)) return 2;
  const bool under_launcher = mycoll_launch::launched_by_env();
  if (under_launcher && o.np > 0) {
    std::fprintf(stderr,
                 "%s: --np forks local ranks itself; leave it out under a launcher "
                 "(rank variables such as RANK or OMPI_COMM_WORLD_RANK are set)\n",
                 argv[0]);
    return 2;
  }

  // Before any CUDA call in this process: the ranks are forked from it.
  std::string why;
  const int ngpus = probe_gpu_count(&why);
  if (ngpus < 0) {
    std::fprintf(stderr, "%s: could not count the GPUs: %s\n", argv[0], why.c_str());
    return 2;
  }
  if (ngpus == 0) {
    const std::string what = why.empty() ? "no GPU" : "no GPU (" + why + ")";
    if (o.skip_without_gpu) {
      std::printf("SKIP: %s\n", what.c_str());
      return 0;
    }
    std::fprintf(stderr, "%s: %s\n", argv[0], what.c_str());
    return 2;
  }

  auto body = [&o, under_launcher](mycollComm_t comm, int rank, int nranks) {
    return rank_main(comm, rank, nranks, o, under_launcher ? "launcher" : "forked");
  };
  if (under_launcher) {
    const int dev = device_from_env(ngpus) % ngpus;  // round-robin when ranks outnumber GPUs
    return mycoll_launch::launch(0, body, 30.0, [dev](int rank) { select_device(dev, rank); });
  }
  const int np = o.np > 0 ? o.np : ngpus;
  if (np > ngpus)
    std::printf(
        "%d ranks on %d GPU(s): ranks share GPUs round-robin (step times then measure a "
        "shared GPU)\n",
        np, ngpus);
  return mycoll_launch::launch(np, body, 30.0,
                               [ngpus](int rank) { select_device(rank % ngpus, rank); });
}
