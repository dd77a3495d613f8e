// Pre-multiplication pass of NCCL's PreMulSum on GPU buffers
// (kernels/colls/premul.cu): dst[i] = src[i] * scalar, every data type,
// computed as the Prod reduction functor does (kernels/reduce_ops.cuh).
// Plain C++ declarations so host code calls it without CUDA headers; built
// only when the build has CUDA (MYCOLL_HAVE_CUDA).
#pragma once

#include <cstddef>
#include <cstdint>

#include "mycoll.h"

namespace mycoll {

// Enqueues the pass on stream. The scalar is read by the kernel from
// scalar_dev (device-visible memory, read when the kernel runs) when it is
// not null, else taken from the low bytes of scalar_bits (one element of t,
// little endian). dst may equal src. Returns a cudaError_t (0 = success).
int launch_premul(mycollDataType_t t, void* dst, const void* src, size_t n, const void* scalar_dev,
                  uint64_t scalar_bits, mycollStream_t stream);

}  // namespace mycoll
