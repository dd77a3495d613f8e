// Helpers for GPU tests: probing for GPUs without initialising CUDA in the
// test process (children are forked), device-memory MemOps.
#pragma once

#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include "common/coll_check.h"

namespace mycoll_test {

// Number of GPUs, probed in a forked child so this process never touches
// CUDA before forking ranks.
inline int gpu_count() {
  static int n = -1;
  if (n >= 0) return n;
  pid_t pid = fork();
  if (pid == 0) {
    int c = 0;
    if (cudaGetDeviceCount(&c) != cudaSuccess) c = 0;
    _exit(c > 100 ? 100 : c);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  n = WIFEXITED(st) ? WEXITSTATUS(st) : 0;
  return n;
}

// The GPU of a rank: ranks are placed round-robin over the GPUs present
// (the torchrun layout local_rank % gpus), so any number of ranks runs on
// one GPU; tests skip only where no GPU exists.
inline int gpu_of(int rank) { return gpu_count() > 0 ? rank % gpu_count() : 0; }

#define SKIP_WITHOUT_GPU()                                                     \
  do {                                                                         \
    if (gpu_count() < 1) GTEST_SKIP() << "needs a GPU, this machine has none"; \
  } while (0)

// For the few cases about distinct GPUs (peer access, NVLink paths).
#define SKIP_WITHOUT_DISTINCT_GPUS(k)                                                        \
  do {                                                                                       \
    if (gpu_count() < (k))                                                                   \
      GTEST_SKIP() << "needs " << (k) << " distinct GPUs, this machine has " << gpu_count(); \
  } while (0)

// Device buffers, every operation ordered on stream s (cudaMallocAsync,
// cudaMemcpyAsync, cudaFreeAsync): nothing synchronises the whole device or
// runs on the legacy default stream, which would wait for the kernels of
// other ranks sharing the GPU in this process (threads), kernels that wait
// for this rank. Tests create s with cudaStreamNonBlocking.
// The allocations come from a memory pool of this MemOps alone: the
// device's default pool may let one stream reuse memory another stream freed
// by making it wait for that stream (cudaMemPoolReuseAllowInternalDependencies),
// and a rank whose stream waits for another rank's collective deadlocks.
inline MemOps device_mem(cudaStream_t s) {
  MemOps m;
  m.stream = reinterpret_cast<mycollStream_t>(s);
  struct Pool {
    cudaMemPool_t pool = nullptr;
    explicit Pool(int dev) {
      cudaMemPoolProps props = {};
      props.allocType = cudaMemAllocationTypePinned;
      props.location.type = cudaMemLocationTypeDevice;
      props.location.id = dev;
      cudaMemPoolCreate(&pool, &props);
    }
    ~Pool() {
      if (pool) cudaMemPoolDestroy(pool);
    }
  };
  int dev = 0;
  cudaGetDevice(&dev);
  auto pool = std::make_shared<Pool>(dev);
  m.alloc = [s, pool](size_t n) {
    void* p = nullptr;
    if (cudaMallocFromPoolAsync(&p, n ? n : 1, pool->pool, s) != cudaSuccess)
      return static_cast<void*>(nullptr);
    return p;
  };
  m.release = [s, pool](void* p) { cudaFreeAsync(p, s); };
  m.upload = [s](void* d, const void* h, size_t n) {
    cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, s);
    cudaStreamSynchronize(s);
  };
  m.download = [s](void* h, const void* d, size_t n) {
    cudaMemcpyAsync(h, d, n, cudaMemcpyDeviceToHost, s);
    cudaStreamSynchronize(s);
  };
  m.sync = [s] { cudaStreamSynchronize(s); };
  return m;
}

// A stream for a rank's collectives (see device_mem).
inline cudaStream_t rank_stream() {
  cudaStream_t s = nullptr;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  return s;
}

// Launches a kernel that writes to an illegal address on s and waits for
// it: every later CUDA call of this process fails (tests/gpu/gpu_fault.cu).
// Returns the error the wait got.
cudaError_t fault_this_context(cudaStream_t s);

}  // namespace mycoll_test
