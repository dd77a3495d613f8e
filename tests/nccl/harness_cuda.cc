#include "harness_cuda.h"

#if NTEST_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace ntest::cuda {

#if NTEST_HAVE_CUDA

namespace {
bool check(cudaError_t e, std::string* why) {
  if (e == cudaSuccess) return true;
  *why = std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
  return false;
}
}  // namespace

int device_count(std::string* why) {
  int n = 0;
  if (!check(cudaGetDeviceCount(&n), why)) return 0;
  if (n == 0) *why = "no CUDA GPU";
  return n;
}

bool new_stream(cudaStream_t* stream, std::string* why) {
  return check(cudaStreamCreateWithFlags(stream, cudaStreamNonBlocking), why);
}

bool use_device(int device, cudaStream_t* stream, std::string* why) {
  return check(cudaSetDevice(device), why) && new_stream(stream, why);
}

bool set_device(int device, std::string* why) { return check(cudaSetDevice(device), why); }

void release_stream(cudaStream_t stream) {
  if (stream) cudaStreamDestroy(stream);
}

void* alloc(size_t bytes, std::string* why) {
  void* p = nullptr;
  return check(cudaMalloc(&p, bytes), why) ? p : nullptr;
}

void release(void* p) {
  if (p) cudaFree(p);
}

// On the rank's stream, then waited for: a plain cudaMemcpy from pageable
// memory may return before its DMA lands, and runs on the legacy default
// stream, which a non-blocking stream's kernels do not wait for.
bool copy(void* dst, const void* src, size_t bytes, bool to_device, cudaStream_t stream,
          std::string* why) {
  return check(cudaMemcpyAsync(dst, src, bytes,
                               to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, stream),
               why) &&
         check(cudaStreamSynchronize(stream), why);
}

bool sync(cudaStream_t stream, std::string* why) {
  return check(cudaStreamSynchronize(stream), why);
}

bool begin_capture(cudaStream_t stream, std::string* why) {
  return check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), why);
}

void* alloc_async(size_t bytes, cudaStream_t stream, std::string* why) {
  void* p = nullptr;
  return check(cudaMallocAsync(&p, bytes, stream), why) ? p : nullptr;
}

bool free_async(void* p, cudaStream_t stream, std::string* why) {
  return check(cudaFreeAsync(p, stream), why);
}

bool copy_async(void* dst, const void* src, size_t bytes, cudaStream_t stream, std::string* why) {
  return check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream), why);
}

void* end_capture(cudaStream_t stream, std::string* why) {
  cudaGraph_t g = nullptr;
  if (!check(cudaStreamEndCapture(stream, &g), why)) return nullptr;
  cudaGraphExec_t exec = nullptr;
  const bool made = check(cudaGraphInstantiate(&exec, g, 0), why);
  cudaGraphDestroy(g);
  return made ? exec : nullptr;
}

bool launch_graph(void* graph, cudaStream_t stream, std::string* why) {
  return check(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), stream), why);
}

void release_graph(void* graph) {
  if (graph) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph));
}

#else  // built without CUDA

namespace {
// Every call of a build without CUDA fails with this reason.
bool no_cuda(std::string* why) {
  *why = "nccl_api_test was built without CUDA";
  return false;
}
}  // namespace

int device_count(std::string* why) {
  no_cuda(why);
  return 0;
}
bool use_device(int, cudaStream_t*, std::string* why) { return no_cuda(why); }
bool set_device(int, std::string* why) { return no_cuda(why); }
bool new_stream(cudaStream_t*, std::string* why) { return no_cuda(why); }
void release_stream(cudaStream_t) {}
void* alloc(size_t, std::string* why) {
  no_cuda(why);
  return nullptr;
}
void release(void*) {}
bool copy(void*, const void*, size_t, bool, cudaStream_t, std::string* why) { return no_cuda(why); }
bool sync(cudaStream_t, std::string* why) { return no_cuda(why); }
bool begin_capture(cudaStream_t, std::string* why) { return no_cuda(why); }
void* alloc_async(size_t, cudaStream_t, std::string* why) {
  no_cuda(why);
  return nullptr;
}
bool free_async(void*, cudaStream_t, std::string* why) { return no_cuda(why); }
bool copy_async(void*, const void*, size_t, cudaStream_t, std::string* why) { return no_cuda(why); }
void* end_capture(cudaStream_t, std::string* why) {
  no_cuda(why);
  return nullptr;
}
bool launch_graph(void*, cudaStream_t, std::string* why) { return no_cuda(why); }
void release_graph(void*) {}

#endif

}  // namespace ntest::cuda
