// Thin queries of the CUDA runtime that the host side needs everywhere
// (pointer kinds, device count). Without CUDA in the build they report no GPU.
#include <mutex>

#include "base/error.h"
#include "engine/device_engine.h"

#if MYCOLL_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace mycoll {

int cuda_device_count() {
#if MYCOLL_HAVE_CUDA
  static int n = [] {
    int c = 0;
    if (cudaGetDeviceCount(&c) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return c;
  }();
  return n;
#else
  return 0;
#endif
}

bool is_device_pointer(const void* p) {
#if MYCOLL_HAVE_CUDA
  if (cuda_device_count() == 0 || p == nullptr) return false;
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
#else
  (void)p;
  return false;
#endif
}

bool may_be_graph_allocation(const void* p, mycollStream_t stream) {
#if MYCOLL_HAVE_CUDA
  if (cuda_device_count() == 0 || p == nullptr) return false;
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(reinterpret_cast<cudaStream_t>(stream), &st) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  if (st != cudaStreamCaptureStatusActive) return false;
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return true;  // unknown to the driver
  }
  return a.type == cudaMemoryTypeUnregistered;
#else
  (void)p;
  (void)stream;
  return false;
#endif
}

uint64_t device_bus_id(int dev) {
#if MYCOLL_HAVE_CUDA
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, dev) != cudaSuccess) return 0;
  return (uint64_t(prop.pciDomainID) << 32) | (uint64_t(prop.pciBusID) << 8) |
         uint64_t(prop.pciDeviceID);
#else
  (void)dev;
  return 0;
#endif
}

int current_cuda_device() {
#if MYCOLL_HAVE_CUDA
  int d = -1;
  if (cudaGetDevice(&d) != cudaSuccess)
    throw_error(mycollUnhandledCudaError, "cudaGetDevice failed");
  return d;
#else
  throw_error(mycollInvalidUsage, "this build of mycoll has no CUDA support");
#endif
}

void stream_synchronize(mycollStream_t stream) {
#if MYCOLL_HAVE_CUDA
  cudaError_t e = cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(stream));
  if (e != cudaSuccess)
    throw_error(mycollUnhandledCudaError,
                std::string("cudaStreamSynchronize: ") + cudaGetErrorString(e));
#else
  (void)stream;
  throw_error(mycollInvalidUsage, "a CUDA stream was given but this build has no CUDA support");
#endif
}

}  // namespace mycoll
