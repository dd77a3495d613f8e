// The CUDA runtime calls of nccl_api_test's --mem cuda (harness_cuda.cc),
// kept apart from nccl.h (whose cudaStream_t may be mycoll's own
// declaration). In a build without CUDA every call fails with a reason.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <string>

namespace ntest::cuda {

// GPUs this process sees; 0 with why set when none (or no CUDA in the build).
int device_count(std::string* why);
// Makes device current for this thread and creates the rank's stream.
bool use_device(int device, cudaStream_t* stream, std::string* why);
// Makes device current for this thread.
bool set_device(int device, std::string* why);
bool new_stream(cudaStream_t* stream, std::string* why);
void release_stream(cudaStream_t stream);
void* alloc(size_t bytes, std::string* why);
void release(void* p);
// Copies on stream and waits for it.
bool copy(void* dst, const void* src, size_t bytes, bool to_device, cudaStream_t stream,
          std::string* why);
bool sync(cudaStream_t stream, std::string* why);
// CUDA graphs: capture on stream in global mode (CUDA's and PyTorch's
// default), end it and instantiate (the executable graph, nullptr on
// failure), launch, release.
bool begin_capture(cudaStream_t stream, std::string* why);
// Stream-ordered memory (cudaMallocAsync / cudaFreeAsync: inside a capture,
// graph allocations) and a device-to-device copy on stream, not waited for.
void* alloc_async(size_t bytes, cudaStream_t stream, std::string* why);
bool free_async(void* p, cudaStream_t stream, std::string* why);
bool copy_async(void* dst, const void* src, size_t bytes, cudaStream_t stream, std::string* why);
void* end_capture(cudaStream_t stream, std::string* why);
bool launch_graph(void* graph, cudaStream_t stream, std::string* why);
void release_graph(void* graph);

}  // namespace ntest::cuda
