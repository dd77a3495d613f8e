// Scoped settings of the calling thread's CUDA state, restored on every
// exit (an exception included). Internal to lib/.
//
// OnDevice: the communicator's GPU current while its work is issued (a
// kernel or event on another GPU's stream fails), whatever the caller's
// current device: one thread may drive the ranks of several GPUs.
//
// RelaxedCapture: CUDA graph capture and the library's own CUDA calls. A
// capture in global mode (CUDA's default, and PyTorch's) forbids
// "potentially unsafe" calls such as cudaMalloc in every thread of the
// process while it lasts (thread-local mode: in the capturing thread); such
// a call fails and invalidates the capture. What the library allocates on a
// call's way (a plan or scratch first needed under capture, a side stream,
// a memory pool) is not stream work and must not be captured, so it runs
// with the thread's mode relaxed for the guard's scope, as NCCL and MSCCL++
// do around theirs.
#pragma once
#if MYCOLL_HAVE_CUDA

#include <cuda_runtime.h>

#include <string>

#include "base/error.h"

namespace mycoll {

class OnDevice {
 public:
  explicit OnDevice(int dev) : dev_(dev) {
    cudaGetDevice(&prev_);
    if (prev_ == dev_) return;
    const cudaError_t e = cudaSetDevice(dev_);
    if (e != cudaSuccess)
      throw_error(mycollUnhandledCudaError,
                  "cudaSetDevice(" + std::to_string(dev_) + "): " + cudaGetErrorString(e));
  }
  ~OnDevice() {
    if (prev_ != dev_ && prev_ >= 0) cudaSetDevice(prev_);
  }
  OnDevice(const OnDevice&) = delete;
  OnDevice& operator=(const OnDevice&) = delete;

 private:
  int dev_;
  int prev_ = -1;
};

class RelaxedCapture {
 public:
  RelaxedCapture() { cudaThreadExchangeStreamCaptureMode(&mode_); }
  ~RelaxedCapture() { cudaThreadExchangeStreamCaptureMode(&mode_); }
  RelaxedCapture(const RelaxedCapture&) = delete;
  RelaxedCapture& operator=(const RelaxedCapture&) = delete;

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

}  // namespace mycoll

#endif  // MYCOLL_HAVE_CUDA
