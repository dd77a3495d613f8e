// Where the benchmark's buffers live and how it waits for a collective.
// Everything memory-specific goes through this interface, so the benchmark
// loop (bench.cc) is the same for host and device memory and needs no CUDA
// header.
//
// Host: malloc'ed buffers, stream NULL, collectives complete when the call
// returns, synchronize() is a no-op.
// Device (built with MYCOLL_PERF_CUDA): stream-ordered buffers from a private pool on one GPU, one
// non-blocking cudaStream_t passed to every collective, synchronize() polls
// the stream (bounded, like nccl-tests), to/from_buffer copy through that
// stream, and CUDA graphs of what was issued on the stream.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "mycoll.h"

namespace mycoll_perf {

class Backend {
 public:
  virtual ~Backend() = default;
  // "host" or "cuda", printed in the header.
  virtual const char* name() const = 0;
  // One line naming the memory: "host", "cuda:3 [0000:19:00.0] NVIDIA H200".
  virtual std::string describe() const { return name(); }
  // CUDA device of the buffers and stream; -1 for host memory.
  virtual int device() const { return -1; }
  // Makes this backend's device current on the calling thread (one thread may
  // drive several GPUs); no-op for host memory.
  virtual void make_current() {}
  // A buffer of `bytes` (>= 1) in this backend's memory, zeroed; throws
  // std::runtime_error on failure.
  virtual void* alloc(size_t bytes) = 0;
  virtual void release(void* p) = 0;
  // Copies between a host staging area and a backend buffer, complete on
  // return and ordered after everything issued on stream(). Used by data
  // initialisation, checking and the timing reductions; never inside a timed loop.
  virtual void to_buffer(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void from_buffer(void* host_dst, const void* src, size_t bytes) = 0;
  // Stream passed to every call (NULL for host memory).
  virtual mycollStream_t stream() = 0;
  // Returns when every call issued on stream() has completed. Device: throws
  // std::runtime_error on a CUDA error, when the wait hook throws, or after
  // MYCOLL_PERF_SYNC_TIMEOUT seconds (default 600).
  virtual void synchronize() = 0;
  // Whether MPI may read and write these buffers (host: yes; device: only a
  // CUDA-aware MPI, not assumed).
  virtual bool mpi_can_access() const = 0;

  // Called every few milliseconds while synchronize() waits; it throws to
  // give up (e.g. when a communicator reports an asynchronous error).
  void set_wait_hook(std::function<void()> hook) { wait_hook_ = std::move(hook); }

  // CUDA graphs (device memory only; host memory throws). begin_capture()
  // starts capturing stream() (thread-local mode), end_capture() ends it and
  // instantiates the graph, launch_graph() launches it on stream(),
  // drop_graph() frees it. abandon_capture() ends a capture after an error
  // and discards it (never throws).
  virtual bool has_graphs() const { return false; }
  virtual void begin_capture();
  virtual void end_capture();
  virtual void abandon_capture() {}
  virtual void launch_graph();
  virtual void drop_graph() {}

 protected:
  std::function<void()> wait_hook_;
};

// Host memory (64-byte aligned, first-touched at allocation).
std::unique_ptr<Backend> make_host_backend();

// "host" | "cuda" -> backend (cuda: buffers and a new stream on `device`).
// Throws std::runtime_error naming what is missing (e.g. built without CUDA).
std::unique_ptr<Backend> make_backend(const std::string& kind, int device);

// RAII owner of one backend buffer.
class Buffer {
 public:
  Buffer(Backend& b, size_t bytes) : backend_(&b), ptr_(b.alloc(bytes ? bytes : 1)), bytes_(bytes) {}
  ~Buffer() { backend_->release(ptr_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  char* data() const { return static_cast<char*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  Backend* backend_;
  void* ptr_;
  size_t bytes_;
};

}  // namespace mycoll_perf
