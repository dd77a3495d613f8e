#include "backend.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>

#ifdef MYCOLL_PERF_CUDA
#include <cuda_runtime.h>
#endif

namespace mycoll_perf {

void Backend::begin_capture() {
  throw std::runtime_error(std::string("-G: CUDA graphs need device memory, not ") + name());
}
void Backend::end_capture() { begin_capture(); }
void Backend::launch_graph() { begin_capture(); }

namespace {

class HostBackend : public Backend {
 public:
  const char* name() const override { return "host"; }
  void* alloc(size_t bytes) override {
    void* p = nullptr;
    if (posix_memalign(&p, 64, bytes) != 0 || !p)
      throw std::runtime_error("host backend: cannot allocate " + std::to_string(bytes) + " bytes");
    std::memset(p, 0, bytes);  // first touch now, not inside a timed loop
    return p;
  }
  void release(void* p) override { std::free(p); }
  void to_buffer(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void from_buffer(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  mycollStream_t stream() override { return nullptr; }
  void synchronize() override {}  // host collectives are complete on return
  bool mpi_can_access() const override { return true; }
};

#ifdef MYCOLL_PERF_CUDA

double sync_timeout_s() {
  const char* v = std::getenv("MYCOLL_PERF_SYNC_TIMEOUT");
  double s = v ? std::atof(v) : 0;
  return s > 0 ? s : 600.0;
}

// One GPU: its buffers, one non-blocking stream, at most one graph.
class CudaBackend : public Backend {
 public:
  explicit CudaBackend(int device) : dev_(device) {
    check(cudaSetDevice(dev_), "cudaSetDevice");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    cudaDeviceProp p;
    char bus[64];
    desc_ = "cuda:" + std::to_string(dev_);
    if (cudaGetDeviceProperties(&p, dev_) == cudaSuccess) {
      std::snprintf(bus, sizeof(bus), " [%04x:%02x:%02x.0] ", p.pciDomainID, p.pciBusID,
                    p.pciDeviceID);
      desc_ += bus + std::string(p.name, strnlen(p.name, sizeof(p.name)));
    }
    timeout_s_ = sync_timeout_s();
    // Buffers come from a pool of this backend alone, stream-ordered on
    // stream_: cudaMalloc/cudaMemset/cudaFree and cudaDeviceSynchronize wait
    // for every kernel on the device, and with ranks of this process sharing
    // the GPU (-t) those kernels wait for this rank: a deadlock. The default
    // pool is avoided too: it may make this stream wait for another rank's.
    cudaMemPoolProps props = {};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = dev_;
    check(cudaMemPoolCreate(&pool_, &props), "cudaMemPoolCreate");
  }
  ~CudaBackend() override {
    cudaSetDevice(dev_);
    drop_graph();
    if (stream_) cudaStreamSynchronize(stream_);
    if (pool_) cudaMemPoolDestroy(pool_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  const char* name() const override { return "cuda"; }
  std::string describe() const override { return desc_; }
  int device() const override { return dev_; }
  void make_current() override { check(cudaSetDevice(dev_), "cudaSetDevice"); }

  void* alloc(size_t bytes) override {
    make_current();
    void* p = nullptr;
    check(cudaMallocFromPoolAsync(&p, bytes ? bytes : 1, pool_, stream_),
          ("cudaMallocFromPoolAsync of " + std::to_string(bytes) + " bytes").c_str());
    check(cudaMemsetAsync(p, 0, bytes, stream_), "cudaMemsetAsync");
    synchronize();
    return p;
  }
  void release(void* p) override {
    cudaSetDevice(dev_);
    cudaFreeAsync(p, stream_);
  }
  void to_buffer(void* dst, const void* src, size_t bytes) override {
    make_current();
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync H2D");
    synchronize();
  }
  void from_buffer(void* dst, const void* src, size_t bytes) override {
    make_current();
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync D2H");
    synchronize();
  }
  mycollStream_t stream() override { return reinterpret_cast<mycollStream_t>(stream_); }

  // Polls like nccl-tests' testStreamSynchronize: a hung collective becomes
  // an error (the hook reports communicators' async errors) instead of a hang.
  void synchronize() override {
    const auto start = std::chrono::steady_clock::now();
    for (unsigned spin = 1;; ++spin) {
      cudaError_t e = cudaStreamQuery(stream_);
      if (e == cudaSuccess) return;
      if (e != cudaErrorNotReady) check(e, "stream work (cudaStreamQuery)");
      if (spin % 256 == 0) {
        if (wait_hook_) wait_hook_();
        double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (waited > timeout_s_)
          throw std::runtime_error(desc_ + ": stream work not complete after " +
                                   std::to_string(static_cast<int>(waited)) +
                                   " s (MYCOLL_PERF_SYNC_TIMEOUT): a collective hangs");
        if (spin > 100000) std::this_thread::yield();
      }
    }
  }
  bool mpi_can_access() const override { return false; }

  bool has_graphs() const override { return true; }
  void begin_capture() override {
    make_current();
    drop_graph();
    check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal),
          "cudaStreamBeginCapture");
  }
  void end_capture() override {
    make_current();
    check(cudaStreamEndCapture(stream_, &graph_), "cudaStreamEndCapture");
    check(cudaGraphInstantiate(&exec_, graph_, 0), "cudaGraphInstantiate");
  }
  void abandon_capture() override {
    cudaSetDevice(dev_);
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream_, &st) == cudaSuccess && st != cudaStreamCaptureStatusNone) {
      cudaGraph_t g = nullptr;
      cudaStreamEndCapture(stream_, &g);
      if (g) cudaGraphDestroy(g);
    }
    cudaGetLastError();  // the capture error is reported by the caller
    drop_graph();
  }
  void launch_graph() override {
    if (!exec_) throw std::runtime_error(desc_ + ": launch_graph without a captured graph");
    check(cudaGraphLaunch(exec_, stream_), "cudaGraphLaunch");
  }
  void drop_graph() override {
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
    exec_ = nullptr;
    graph_ = nullptr;
  }

 private:
  void check(cudaError_t e, const char* what) const {
    if (e == cudaSuccess) return;
    throw std::runtime_error("cuda:" + std::to_string(dev_) + ": " + what + " failed: " +
                             cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
  }

  int dev_;
  cudaStream_t stream_ = nullptr;
  cudaMemPool_t pool_ = nullptr;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  std::string desc_;
  double timeout_s_ = 600;
};

#endif  // MYCOLL_PERF_CUDA

}  // namespace

std::unique_ptr<Backend> make_host_backend() { return std::make_unique<HostBackend>(); }

std::unique_ptr<Backend> make_backend(const std::string& kind, int device) {
  if (kind == "host") return make_host_backend();
  if (kind == "cuda") {
#ifdef MYCOLL_PERF_CUDA
    return std::make_unique<CudaBackend>(device);
#else
    (void)device;
    throw std::runtime_error("mycoll-perf: --mem cuda needs a build with CUDA (MYCOLL_PERF_CUDA)");
#endif
  }
  throw std::runtime_error("mycoll-perf: --mem '" + kind + "' is not host or cuda");
}

}  // namespace mycoll_perf
