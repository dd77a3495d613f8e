// Helpers for GPU tests: probing for GPUs without initialising CUDA in the
// test process (children are forked), device-memory MemOps.
#pragma once

#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
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

#define SKIP_WITHOUT_GPUS(k)                                                          \
  do {                                                                                \
    if (gpu_count() < (k))                                                            \
      GTEST_SKIP() << "needs " << (k) << " GPU(s), this machine has " << gpu_count(); \
  } while (0)

inline MemOps device_mem(cudaStream_t s) {
  MemOps m;
  m.stream = reinterpret_cast<mycollStream_t>(s);
  m.alloc = [](size_t n) {
    void* p = nullptr;
    if (cudaMalloc(&p, n ? n : 1) != cudaSuccess) return static_cast<void*>(nullptr);
    return p;
  };
  m.release = [](void* p) { cudaFree(p); };
  m.upload = [](void* d, const void* h, size_t n) { cudaMemcpy(d, h, n, cudaMemcpyHostToDevice); };
  m.download = [](void* h, const void* d, size_t n) { cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost); };
  m.sync = [s] { cudaStreamSynchronize(s); };
  return m;
}

}  // namespace mycoll_test
