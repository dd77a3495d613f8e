// A user kernel that faults: what a crashing application kernel leaves
// behind (a CUDA context in which every later call fails).
#include "gpu/gpu_util.h"

namespace {

__global__ void write_through(int* p) { *p = 1; }

}  // namespace

namespace mycoll_test {

cudaError_t fault_this_context(cudaStream_t s) {
  // Far outside any allocation: an illegal address, a sticky error.
  write_through<<<1, 1, 0, s>>>(reinterpret_cast<int*>(uintptr_t(1) << 46));
  return cudaStreamSynchronize(s);
}

}  // namespace mycoll_test
