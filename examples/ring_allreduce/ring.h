// The textbook ring all-reduce, written with nothing but mycollSend/mycollRecv
// inside mycollGroupStart/End pairs. Memory-agnostic: the two local
// operations it needs (copy, add) are passed in, so the same ring drives host
// buffers (host_ring_ops() below) or device buffers on a CUDA stream (a
// CUDA version supplies kernels launched on `stream`).
#pragma once

#include <cstddef>

#include "mycoll.h"

namespace ring_example {

// Local work the ring needs between communication steps. Both run in stream
// order after the communication issued before them (host: immediately).
// Each returns mycollSuccess, or an error code (after printing why on
// stderr) when the work could not be issued, e.g. a failed kernel launch.
struct RingOps {
  // dst[0..n) = src[0..n)
  mycollResult_t (*copy)(float* dst, const float* src, size_t n, mycollStream_t stream);
  // dst[0..n) += src[0..n)
  mycollResult_t (*add)(float* dst, const float* src, size_t n, mycollStream_t stream);
};

// Host memory: plain loops, stream ignored.
RingOps host_ring_ops();

// Chunk c of a count-element buffer split into n nearly equal parts: the first
// count % n chunks have one element more. Every rank computes the same split.
struct Chunk {
  size_t offset = 0;
  size_t count = 0;
};
Chunk ring_chunk(size_t count, int n, int c);

// recvbuff[i] = sum over ranks of sendbuff[i], for i < count (float32 sum).
// sendbuff == recvbuff is allowed (in place). scratch holds at least
// ceil(count / nranks) floats in the same memory kind as the buffers.
// Returns the first failing mycoll call's or local operation's result
// (mycollSuccess otherwise). On device buffers everything is enqueued on
// stream in order and the call returns before the work is done: synchronize
// the stream before reading recvbuff.
mycollResult_t ring_allreduce(const float* sendbuff, float* recvbuff, float* scratch, size_t count,
                              mycollComm_t comm, mycollStream_t stream, const RingOps& ops);

}  // namespace ring_example
