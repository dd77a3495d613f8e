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

}  // namespace ntest::cuda
