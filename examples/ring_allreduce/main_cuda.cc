// ring_allreduce_cuda: the hand-written ring all-reduce (ring.cc) on float32
// device buffers, one GPU per rank, everything enqueued on one CUDA stream
// per rank (send/recv through mycoll, the reduction of each received chunk
// by a small kernel: ring_cuda.cu). Checked element by element against
// mycollAllReduce and an exact reference.
//
//   ring_allreduce_cuda                    every local GPU, one forked process each
//   ring_allreduce_cuda --np 2 [--count N] GPUs 0 and 1
//   mpirun -np 8 -x MYCOLL_ADDR=127.0.0.1:29500 ring_allreduce_cuda   (local rank -> GPU)
//
// Exit status 0 when every rank printed OK ("SKIP: no GPU" and 0 with
// --skip-without-gpu on a machine without one).
#include <cuda_runtime.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "check.h"
#include "launch.h"
#include "ring.h"
#include "ring_cuda.h"

namespace {

using mycoll_launch::must;

constexpr double kSyncTimeoutS = 300;

// Set by select_device() in each rank's process before its communicator
// is created: the device it chose, or why it could not.
int g_device = -1;
std::string g_device_error;

void cuda_must(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string(what) + " failed: " + cudaGetErrorName(e) + " (" +
                             cudaGetErrorString(e) + ")");
}

// Waits for the stream's work, bounded: a hung collective becomes an error.
void sync_stream(cudaStream_t s) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    cudaError_t e = cudaStreamQuery(s);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) cuda_must(e, "the ring's stream work");
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >
        kSyncTimeoutS)
      throw std::runtime_error("stream work not complete after 300 s: a collective hangs");
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

// Device buffer of n floats, freed on scope exit.
class DeviceFloats {
 public:
  explicit DeviceFloats(size_t n) : n_(n) {
    cuda_must(cudaMalloc(reinterpret_cast<void**>(&p_), (n ? n : 1) * sizeof(float)), "cudaMalloc");
  }
  ~DeviceFloats() { cudaFree(p_); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  float* get() const { return p_; }
  // On the stream the collectives use, waited for: a plain cudaMemcpy from
  // pageable memory may return before its DMA lands, and runs on the
  // legacy default stream, which a non-blocking stream does not wait for.
  void upload(const std::vector<float>& h, cudaStream_t s) {
    cuda_must(cudaMemcpyAsync(p_, h.data(), n_ * sizeof(float), cudaMemcpyHostToDevice, s),
              "cudaMemcpyAsync H2D");
    cuda_must(cudaStreamSynchronize(s), "cudaStreamSynchronize (upload)");
  }
  std::vector<float> download() const {
    std::vector<float> h(n_);
    cuda_must(cudaMemcpy(h.data(), p_, n_ * sizeof(float), cudaMemcpyDeviceToHost),
              "cudaMemcpy D2H");
    return h;
  }

 private:
  float* p_ = nullptr;
  size_t n_;
};

// before_init hook: rank r of a forked run uses GPU r % GPUs (ranks share
// GPUs round-robin when they outnumber them); under a launcher the local
// rank (LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, ...) modulo the GPUs picks it.
void select_device(int rank) {
  int have = 0;
  cudaError_t e = cudaGetDeviceCount(&have);
  if (e != cudaSuccess || have == 0) {
    g_device_error = std::string("no CUDA device: ") + cudaGetErrorString(e);
    return;
  }
  int dev = rank;
  if (dev < 0) dev = mycoll_launch::env_local_rank();
  if (dev < 0) dev = std::max(0, mycoll_launch::env_rank());
  dev %= have;
  e = cudaSetDevice(dev);
  if (e != cudaSuccess) {
    g_device_error = "cudaSetDevice(" + std::to_string(dev) + "): " + cudaGetErrorString(e);
    return;
  }
  g_device = dev;
}

int rank_main(mycollComm_t comm, int rank, int nranks, size_t count) {
  if (!g_device_error.empty()) throw std::runtime_error(g_device_error);
  int comm_dev = -2;
  must(mycollCommCuDevice(comm, &comm_dev), "mycollCommCuDevice", comm);
  if (comm_dev != g_device)
    throw std::runtime_error("communicator is on device " + std::to_string(comm_dev) +
                             ", this rank's buffers on " + std::to_string(g_device));
  cuda_must(cudaSetDevice(g_device), "cudaSetDevice");

  std::vector<float> input(count), poison(count, -1000.f);
  for (size_t i = 0; i < count; ++i) input[i] = ring_example::input_value(rank, i);
  cudaStream_t s = nullptr;
  cuda_must(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  struct StreamGuard {
    cudaStream_t s;
    ~StreamGuard() { cudaStreamDestroy(s); }
  } guard{s};
  DeviceFloats send(count), ring_out(count), in_place(count), lib_out(count);
  DeviceFloats scratch(count / nranks + 1);
  send.upload(input, s);
  in_place.upload(input, s);
  ring_out.upload(poison, s);
  lib_out.upload(poison, s);
  const ring_example::RingOps ops = ring_example::cuda_ring_ops();

  // Everything below is enqueued on s in this order; nothing waits until the sync.
  must(ring_example::ring_allreduce(send.get(), ring_out.get(), scratch.get(), count, comm, s, ops),
       "ring_allreduce (out of place)", comm);
  must(ring_example::ring_allreduce(in_place.get(), in_place.get(), scratch.get(), count, comm, s,
                                    ops),
       "ring_allreduce (in place)", comm);
  must(mycollAllReduce(send.get(), lib_out.get(), count, mycollFloat32, mycollSum, comm, s),
       "mycollAllReduce", comm);
  sync_stream(s);

  const size_t wrong = ring_example::verify(rank, nranks, send.download(), ring_out.download(),
                                            in_place.download(), lib_out.download());
  if (wrong == 0)
    std::printf("rank %d/%d: OK (%zu floats on GPU %d, ring == mycollAllReduce == exact)\n", rank,
                nranks, count, g_device);
  std::fflush(stdout);
  return wrong == 0 ? 0 : 1;
}

void usage(const char* prog) {
  std::fprintf(
      stderr,
      "usage: %s [--np N] [--count N] [--skip-without-gpu]\n"
      "  --np N      fork N local ranks, rank r on GPU r (default: one per local GPU;\n"
      "              under a launcher (MYCOLL_RANK/RANK/OMPI_COMM_WORLD_RANK/...) its\n"
      "              ranks, the local rank picking the GPU)\n"
      "  --count N   float32 elements per rank (default 1048579)\n"
      "  --skip-without-gpu  print 'SKIP: ...' and exit 0 when there are not enough GPUs\n",
      prog);
}

// Local GPUs, counted in a forked child: this process forks the ranks and
// must not have initialised CUDA before.
int count_gpus() {
  int n = 0;
  bool ok = mycoll_launch::run_in_child(
      [] {
        int c = 0;
        if (cudaGetDeviceCount(&c) != cudaSuccess) c = 0;
        return c > 250 ? 250 : c;
      },
      &n);
  return ok ? n : 0;
}

}  // namespace

int main(int argc, char** argv) {
  long long np = 0, count = 1048579;  // not a multiple of small rank counts
  bool skip = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    bool has_value = i + 1 < argc;
    if (a == "--np" && has_value) {
      if (!ring_example::parse_size(argv[++i], 1, &np)) {
        std::fprintf(stderr, "--np: '%s' is not a rank count >= 1\n", argv[i]);
        return 2;
      }
    } else if (a == "--count" && has_value) {
      if (!ring_example::parse_size(argv[++i], 0, &count)) {
        std::fprintf(stderr, "--count: '%s' is not an element count >= 0\n", argv[i]);
        return 2;
      }
    } else if (a == "--skip-without-gpu") {
      skip = true;
    } else {
      usage(argv[0]);
      return a == "-h" || a == "--help" ? 0 : 2;
    }
  }
  if (np > 0 || !mycoll_launch::launched_by_env()) {
    const int have = count_gpus();
    if (np == 0) np = have;
    if (have == 0) {
      if (skip) {
        std::printf("SKIP: no GPU\n");
        return 0;
      }
      std::fprintf(stderr, "ring_allreduce_cuda: no GPU\n");
      return 2;
    }
    if (np > have)
      std::printf(
          "ring_allreduce_cuda: %lld ranks on %d GPU(s), sharing them round-robin "
          "(timings then measure a shared GPU), %lld floats each\n",
          np, have, count);
    else
      std::printf("ring_allreduce_cuda: %lld ranks, one per GPU, %lld floats each\n", np, count);
    std::fflush(stdout);
  }
  const size_t n = static_cast<size_t>(count);
  return mycoll_launch::launch(
      static_cast<int>(np),
      [n](mycollComm_t comm, int rank, int nranks) { return rank_main(comm, rank, nranks, n); },
      30.0, select_device);
}
