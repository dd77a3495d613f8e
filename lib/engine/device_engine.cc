// Device engine (host side): turns plans into per-channel DevOp lists cached
// in device memory and launches the plan kernel on the user's stream. Peers
// that CUDA IPC cannot reach (other hosts, or a forced host transport) are
// served by the GPU proxy thread through FIFOs in host-mapped memory.
#if MYCOLL_HAVE_CUDA

#include "engine/device_engine.h"
#include "engine/device_select.h"
#include "engine/device_plan_build.h"
#include "engine/gpu_proxy.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <tuple>

#include "comm/comm.h"
#include "base/error.h"
#include "base/log.h"
#include "engine/reduce.h"
#include "kernels/device_plan.h"
#include "kernels/launch.h"
#include "topo/topo.h"
#include "transports/cuda_ipc/cuda_ipc.h"

namespace mycoll {
namespace {

// Every kernel loaded on `dev` before this rank's first exchange with its
// peers (kernels/launch.h says why), once per device and process; other
// threads initialising on the same device wait until it is done.
void preload_kernels_once(int dev) {
  static std::mutex mu;
  static std::vector<int> done;
  std::lock_guard<std::mutex> g(mu);
  if (std::find(done.begin(), done.end(), dev) != done.end()) return;
  for (cudaError_t e : {preload_plan_kernels(), preload_ring_kernels(), preload_direct_kernels(), preload_ll_coll_kernels(),
                        preload_oneshot_kernels(), preload_twoshot_kernels(),
                        preload_p2p_kernels()})
    if (e != cudaSuccess)
      throw_error(mycollUnhandledCudaError,
                  std::string("loading the GPU kernels on device ") + std::to_string(dev) + ": " +
                      cudaGetErrorString(e));
  done.push_back(dev);
}

// Low-latency ring per peer and channel: 8 slots of 16 KiB lines (8 KiB of
// data each).
constexpr int kLlSlots = 8;
constexpr uint64_t kLlSlotBytes = 16384;
// FIFOs with a peer behind a host transport, per channel and direction: 8
// slots of 64 KiB of pinned host memory, 512 KiB per channel in flight over
// the network. Communicators with such peers split collectives over at most
// kProxyChannels channels (the network, not the SMs, is the limit there, and
// fewer, larger transfers suit it): 8 MiB of pinned memory per such peer.
constexpr int kProxySlots = 8;
constexpr uint64_t kProxySlotBytes = 65536;
constexpr int kProxyChannels = 8;
// The plan kernel runs on at most MYCOLL_GPU_PLAN_CHANNELS (32), the ring
// kernel on all MYCOLL_NCHANNELS: measured in docs/performance.md.
// Largest broadcast and reduce the LL-collective kernel runs (the table in
// lib/engine/device_select.h).
constexpr uint64_t kLlBroadcastBytes = 256 * 1024;
constexpr uint64_t kLlReduceBytes = 256 * 1024;
// The direct kernel: blocks copying this rank's own block alongside the
// exchange, and SMs it leaves to whatever else runs (docs/performance.md).
constexpr int kDirectCopyBlocks = 8;
constexpr int kDirectSpareSms = 4;

void cuda_check(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess)
    throw_error(mycollUnhandledCudaError, what + ": " + cudaGetErrorString(e));
}
// Per-call checks name a literal: no string is built unless it failed.
void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw_error(mycollUnhandledCudaError, std::string(what) + ": " + cudaGetErrorString(e));
}


// A plan flattened for the kernel, resident in device memory for the life
// of the communicator (CUDA graphs may replay it at any time).
struct DevPlan {
  DevOp* d_ops = nullptr;
  uint32_t* d_chan = nullptr;
  void* h_pinned = nullptr;  // source of the upload (kept: a captured copy re-reads it)
  int nch = 1;
  size_t scratch_bytes = 0;
};

// A point-to-point batch: the LL point-to-point kernel's parameters when it
// serves the batch, else the plan kernel's plan.
struct P2pEntry {
  bool ll = false;
  P2pLlBatch batch;
  DevPlan plan;
};

class DeviceCommImpl : public DeviceComm {
 public:
  explicit DeviceCommImpl(mycollComm& c) : c_(c), dev_(c.cuda_device) {
    cuda_check(cudaSetDevice(dev_), "cudaSetDevice(" + std::to_string(dev_) + ")");
    preload_kernels_once(dev_);
    const Config& cfg = c.cfg;
    geom_.nranks = c.nranks;
    geom_.max_channels = cfg.gpu_channels;
    geom_.nslots = cfg.gpu_slots;
    geom_.slot_bytes = cfg.gpu_slot_bytes;
    geom_.ll_slots = kLlSlots;
    geom_.ll_slot_bytes = kLlSlotBytes;
    std::vector<bool> use(c.nranks, false);
    bool all_ipc = true;
    for (int r = 0; r < c.nranks; ++r) {
      use[r] = c.transport_of[r] == "cuda_ipc";
      if (r != c.rank && !use[r]) all_ipc = false;
    }
    // Decisions every rank must take alike, from whether ANY rank has a peer
    // behind a host transport: the channels a collective is split over (the
    // proxy count then) and whether the one-shot and two-shot kernels run
    // (only where every peer is reachable over NVLink/PCIe).
    std::vector<int32_t> proxied(c.nranks, all_ipc ? 0 : 1);
    c.bootstrap->allgather(proxied.data(), sizeof(int32_t));
    any_proxy_ = std::find(proxied.begin(), proxied.end(), 1) != proxied.end();
    int32_t sms = 0;
    cuda_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev_),
               "cudaDeviceGetAttribute(multiprocessors)");
    std::vector<int32_t> all_sms(c.nranks, sms);
    c.bootstrap->allgather(all_sms.data(), sizeof(int32_t));
    min_sms_ = *std::min_element(all_sms.begin(), all_sms.end());
    share_gpu(c);
    plan_channels_ = std::min(geom_.max_channels, any_proxy_ ? kProxyChannels : cfg.gpu_plan_channels);
    // Point-to-point batches gain up to all of them (docs/performance.md).
    p2p_channels_ = any_proxy_ ? plan_channels_ : geom_.max_channels;
    const bool kernels_ok = !any_proxy_ && c.nranks >= 2;
    geom_.os_bytes = kernels_ok ? static_cast<int32_t>(cfg.gpu_oneshot_bytes) : 0;
    geom_.ts_bytes = kernels_ok ? static_cast<int32_t>(cfg.gpu_twoshot_bytes) : 0;
    geom_.lc_bytes = kernels_ok ? static_cast<int32_t>(cfg.gpu_ll_coll_bytes) : 0;
    cuda_check(cudaStreamCreateWithFlags(&init_stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    mesh_ = CudaIpcMesh::create(*c.bootstrap, c.peers, use, dev_, geom_.total_bytes(), init_stream_);

    void* p = nullptr;
    cuda_check(cudaHostAlloc(&p, 64, cudaHostAllocMapped | cudaHostAllocPortable), "cudaHostAlloc");
    std::memset(p, 0, 64);
    h_abort_ = static_cast<int32_t*>(p);
    h_error_ = reinterpret_cast<DevError*>(static_cast<char*>(p) + 16);
    std::vector<DevPeer> peers = make_peers(use);
    DevComm dc{};
    dc.geom = geom_;
    dc.rank = c.rank;
    dc.nranks = c.nranks;
    dc.timeout_ns = static_cast<uint64_t>(cfg.timeout_s * 1e9);
    // An ll message must fit the ll ring whole (the sender writes it in one pass).
    dc.ll_max_bytes = std::min<uint64_t>(cfg.gpu_ll_bytes, kLlSlots * (kLlSlotBytes / 2));
    dc.local = mesh_->local();
    cuda_check(cudaMalloc(&d_remote_, sizeof(char*) * c.nranks), "cudaMalloc");
    init_copy(d_remote_, mesh_->remote().data(), sizeof(char*) * c.nranks);
    dc.remote = d_remote_;
    cuda_check(cudaMalloc(&d_peers_, sizeof(DevPeer) * c.nranks), "cudaMalloc");
    init_copy(d_peers_, peers.data(), sizeof(DevPeer) * c.nranks);
    dc.peers = d_peers_;
    void* dp = nullptr;
    cuda_check(cudaHostGetDevicePointer(&dp, h_abort_, 0), "cudaHostGetDevicePointer");
    dc.abort = static_cast<volatile int32_t*>(dp);
    dc.error = reinterpret_cast<DevError*>(static_cast<char*>(dp) + 16);
    init_p2p_ll(dc, use);
    cuda_check(cudaMalloc(&d_comm_, sizeof(DevComm)), "cudaMalloc");
    init_copy(d_comm_, &dc, sizeof(dc));
    cuda_check(cudaStreamSynchronize(init_stream_), "cudaStreamSynchronize (init copies)");
    cudaStreamDestroy(init_stream_);
    init_stream_ = nullptr;
    log_info(Subsys::Gpu,
             "rank {} GPU {}: {} channels x {} slots x {} bytes per peer, messages <= {} bytes "
             "per channel in the low-latency ring, FIFO memory {} MiB{}",
             c.rank, dev_, geom_.max_channels, geom_.nslots, geom_.slot_bytes, cfg.gpu_ll_bytes,
             geom_.total_bytes() >> 20,
             proxy_ ? ", GPU proxy thread for " + std::to_string(proxy_peers_) + " peer(s)" : "");
    if (geom_.os_bytes > 0)
      log_info(Subsys::Gpu,
               "rank {} GPU {}: one-shot all-reduce enabled for messages <= {} bytes with the "
               "direct algorithm (MYCOLL_GPU_ONESHOT_BYTES), {} KiB of inbox",
               c.rank, dev_, geom_.os_bytes, geom_.os_region_bytes() >> 10);
    if (geom_.ts_bytes > 0)
      log_info(Subsys::Gpu,
               "rank {} GPU {}: two-shot all-reduce enabled for messages <= {} bytes with the "
               "twoshot algorithm (MYCOLL_GPU_TWOSHOT_BYTES), {} KiB of inbox",
               c.rank, dev_, geom_.ts_bytes, geom_.ts_region_bytes() >> 10);
    if (!any_proxy_ && c.nranks >= 2 && cfg.gpu_ring_bytes > 0)
      log_info(Subsys::Gpu,
               "rank {} GPU {}: fused ring kernel for ring all-reduce / all-gather / "
               "reduce-scatter / broadcast / reduce of >= {} bytes (MYCOLL_GPU_RING_BYTES)",
               c.rank, dev_, cfg.gpu_ring_bytes);
    if (!any_proxy_ && c.nranks >= 2 && cfg.gpu_direct_bytes > 0)
      log_info(Subsys::Gpu,
               "rank {} GPU {}: direct kernel for all-to-all / scatter / gather of >= {} bytes "
               "(MYCOLL_GPU_DIRECT_BYTES), grid within {} SMs",
               c.rank, dev_, cfg.gpu_direct_bytes, min_sms_);
    if (geom_.lc_bytes > 0)
      log_info(Subsys::Gpu,
               "rank {} GPU {}: LL all-gather / reduce-scatter / all-to-all (direct algorithm) "
               "and broadcast / reduce (automatic algorithm, <= {} / {} bytes) enabled for "
               "messages <= {} bytes (MYCOLL_GPU_LL_COLL_BYTES), {} KiB of inbox",
               c.rank, dev_, kLlBroadcastBytes, kLlReduceBytes, geom_.lc_bytes,
               geom_.lc_region_bytes() >> 10);
    limits_.nranks = c.nranks;
    limits_.any_proxy = any_proxy_;
    limits_.ring_bytes = cfg.gpu_ring_bytes;
    limits_.direct_bytes = cfg.gpu_direct_bytes;
    limits_.oneshot_bytes = uint64_t(std::max(geom_.os_bytes, 0));
    limits_.twoshot_bytes = uint64_t(std::max(geom_.ts_bytes, 0));
    limits_.ll_coll_bytes = uint64_t(std::max(geom_.lc_bytes, 0));
    limits_.ll_bcast_bytes = kLlBroadcastBytes;
    limits_.ll_reduce_bytes = kLlReduceBytes;
  }

  // Peers may still write counters into this inbox after our last kernel
  // ended, so it is freed only once they are done too: GPUs driven by this
  // process are synchronised here; other processes meet in a barrier
  // (destroy is then collective over those ranks, bounded by MYCOLL_TIMEOUT).
  ~DeviceCommImpl() override {
    bool other_process = false;
    for (int r = 0; r < c_.nranks; ++r) {
      if (r == c_.rank || c_.transport_of[r] != "cuda_ipc") continue;
      if (c_.peers[r].pid != c_.peers[c_.rank].pid) {
        other_process = true;
      } else if (c_.peers[r].cuda_device >= 0) {
        cudaSetDevice(c_.peers[r].cuda_device);
        cudaDeviceSynchronize();
      }
    }
    cudaSetDevice(dev_);
    cudaDeviceSynchronize();
    const bool healthy = !c_.aborted.load() && c_.async_error.load() == mycollSuccess;
    // Slots our kernels published must reach the wire before peers may
    // close their connections (the barrier below); the proxy keeps serving
    // peers until everyone is there.
    if (proxy_ && healthy && !proxy_->drain(c_.cfg.timeout_s))
      log_warn(Subsys::Gpu, "rank {}: GPU proxy could not hand every slot to its transport before "
               "destroy (MYCOLL_TIMEOUT)", c_.rank);
    try {
      if ((other_process || proxy_) && healthy) c_.bootstrap->barrier();
    } catch (...) {
    }
    if (proxy_) proxy_->closing();
    proxy_.reset();
    for (auto& [k, p] : plans_) free_plan(p);
    for (auto& p : p2p_plans_) free_plan(p.second.plan);
    if (d_scratch_) cudaFree(d_scratch_);
    for (void* p : retired_) cudaFree(p);
    if (init_stream_) cudaStreamDestroy(init_stream_);
    if (order_event_) cudaEventDestroy(order_event_);
    if (d_comm_) cudaFree(d_comm_);
    if (d_remote_) cudaFree(d_remote_);
    if (d_peers_) cudaFree(d_peers_);
    if (h_abort_) cudaFreeHost(h_abort_);
    for (char* h : proxy_regions_) cudaFreeHost(h);
    mesh_.reset();
    cudaGetLastError();
  }

  std::string describe_peer(int r) const override { return mesh_->describe(r); }

  mycollResult_t poll_error(std::string* reason) override {
    int code = const_cast<volatile int32_t&>(h_error_->code);
    if (code == 0) return mycollSuccess;
    if (reason) {
      const char* what = h_error_->kind == kDevSend ? "sending to" : "receiving from";
      *reason = std::string(code == mycollTimeout ? "GPU kernel timed out (MYCOLL_TIMEOUT) "
                                                  : "GPU kernel aborted ") +
                "on rank " + std::to_string(c_.rank) + " while " + what + " rank " +
                std::to_string(h_error_->peer);
    }
    return static_cast<mycollResult_t>(code);
  }

  void abort() override { *const_cast<volatile int32_t*>(h_abort_) = 1; }
  bool all_ranks_ipc() const override { return !any_proxy_; }

  void enqueue(std::vector<Task>& tasks, mycollStream_t stream) override {
    cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
    std::string why;
    if (mycollResult_t e = poll_error(&why)) {
      c_.fail(e, why);
      throw_error(e, why);
    }
    // Launches go to this communicator's GPU whatever the caller's current
    // device; cudaSetDevice only when it differs, and the caller's device is
    // restored on every exit (a failed launch included).
    int cur = -1;
    cudaGetDevice(&cur);
    struct RestoreDevice {
      int prev, dev;
      ~RestoreDevice() {
        if (prev != dev && prev >= 0) cudaSetDevice(prev);
      }
    } restore{cur, dev_};
    if (cur != dev_) cuda_check(cudaSetDevice(dev_), "cudaSetDevice");
    if (threads_on_gpu_ > 1 && s != last_checked_stream_) check_shared_stream(s);
    const bool capturing = stream_capturing(s);
    if (order_recorded_ && s != last_stream_ && !capturing)
      cuda_check(cudaStreamWaitEvent(s, order_event_, 0), "cudaStreamWaitEvent (issue order)");
    for (Task& t : tasks) launch(t, s);
    mark_issue_order(s, capturing);
  }

 private:
  // Ranks sharing a GPU (threads of one process, or processes): a kernel
  // waits on its peers' kernels, so wherever they can run at once (threads,
  // or processes under MPS) every rank's grid must fit the GPU beside the
  // others'. Every grid is capped at the block budget (SMs / most ranks on
  // one GPU, one block per SM), computed alike on every rank from the
  // allgathered peers and SM counts. Processes without MPS time-slice the
  // GPU instead: every wait tolerates that (it is bounded by MYCOLL_TIMEOUT
  // in wall-clock time, not in spins). Runs before the inbox is laid out.
  void share_gpu(const mycollComm& c) {
    gpu_share_ = max_ranks_per_gpu(c.peers);
    block_budget_ = shared_gpu_block_budget(min_sms_, gpu_share_);
    const std::vector<int> mine = ranks_on_gpu(c.peers, c.rank);
    for (int r : mine) threads_on_gpu_ += c.peers[r].pid == c.peers[c.rank].pid;
    if (gpu_share_ == 1) return;
    if (c.cfg.gpu_channels_set && c.cfg.gpu_channels > block_budget_)
      throw_error(mycollInvalidUsage,
                  "MYCOLL_NCHANNELS=" + std::to_string(c.cfg.gpu_channels) + " cannot work with " +
                      std::to_string(gpu_share_) + " ranks sharing a GPU of " +
                      std::to_string(min_sms_) + " SMs: their kernels must be resident together, "
                      "so each may use at most " + std::to_string(block_budget_) +
                      " channels; unset it or set it to at most that");
    geom_.max_channels = std::min(geom_.max_channels, block_budget_);
    if (mine.size() > 1) {
      std::string list;
      for (int r : mine) list += (list.empty() ? "" : ",") + std::to_string(r);
      log_info(Subsys::Init,
               "ranks {} share GPU {} ({} of them in this process: their kernels run "
               "concurrently; other processes time-slice the GPU); every kernel's grid is capped "
               "at {} blocks ({} SMs / {} ranks on the busiest GPU), at most {} channels: a shared "
               "GPU is for correctness and development, not speed",
               list, dev_, threads_on_gpu_, block_budget_, min_sms_, gpu_share_,
               geom_.max_channels);
    }
  }

  // A copy during init on the private non-blocking stream: never an implicit
  // synchronisation with the legacy default stream, which would wait for
  // the kernels of ranks of this process that share the GPU and already
  // finished their init (their kernels wait for this rank: a deadlock).
  void init_copy(void* dst, const void* src, size_t bytes) {
    cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, init_stream_),
               "cudaMemcpyAsync (init)");
  }

  // Ranks of this process share the GPU: their kernels must run at once. A
  // collective on the legacy default stream would wait for every other
  // rank's kernel on a blocking stream (and on stream 0 they would queue
  // behind each other): refused. On a blocking stream (cudaStreamCreate)
  // the collectives work, but any legacy-stream work of the application
  // (cudaMemcpy, cudaMemset, a kernel on stream 0, cudaFree,
  // cudaDeviceSynchronize) in one rank's thread while another rank's
  // collective is in flight waits for that collective, which waits for this
  // rank: warned once.
  void check_shared_stream(cudaStream_t s) {
    if (s == nullptr || s == cudaStreamLegacy)
      throw_error(mycollInvalidUsage,
                  "rank " + std::to_string(c_.rank) + ": " + std::to_string(threads_on_gpu_) +
                      " ranks of this process share GPU " + std::to_string(dev_) +
                      ": a collective on the legacy default stream (stream 0) serialises their "
                      "kernels, which wait for each other; pass a stream created with "
                      "cudaStreamNonBlocking (or cudaStreamPerThread)");
    unsigned flags = 0;
    if (cudaStreamGetFlags(s, &flags) == cudaSuccess && !(flags & cudaStreamNonBlocking) &&
        !warned_blocking_stream_) {
      warned_blocking_stream_ = true;
      log_warn(Subsys::Gpu,
               "rank {}: {} ranks of this process share GPU {} and this collective runs on a "
               "blocking stream: legacy-default-stream work in any rank's thread (cudaMemcpy, "
               "cudaMemset, stream-0 kernels, cudaFree, cudaDeviceSynchronize) while another "
               "rank's collective is in flight waits for it, and it waits for this rank; use "
               "cudaStreamNonBlocking streams and cudaMemcpyAsync",
               c_.rank, threads_on_gpu_, dev_);
    }
    cudaGetLastError();
    last_checked_stream_ = s;
  }

  // The operations of a communicator run one after the other in the order
  // they were issued, whatever streams they were issued on (as NCCL's do):
  // every kernel continues the FIFO counters and LL epochs its predecessor
  // left, so two in flight at once would interleave their messages (wrong
  // data or a wait that never ends). After every launch an event is recorded
  // on its stream; an operation issued on another stream first waits for
  // that event. The previous stream itself is never touched again (the
  // application may have destroyed it). Streams being captured into a CUDA
  // graph take no part: a graph runs where and when the application
  // launches it.
  static bool stream_capturing(cudaStream_t s) {
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(s, &st) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return st != cudaStreamCaptureStatusNone;
  }
  void mark_issue_order(cudaStream_t s, bool capturing) {
    last_stream_ = s;
    order_recorded_ = false;
    if (capturing) return;
    if (!order_event_)
      cuda_check(cudaEventCreateWithFlags(&order_event_, cudaEventDisableTiming),
                 "cudaEventCreate (issue order)");
    cuda_check(cudaEventRecord(order_event_, s), "cudaEventRecord (issue order)");
    order_recorded_ = true;
  }

  // Where the kernel finds its FIFOs with each peer; starts the proxy thread
  // for peers behind host transports.
  std::vector<DevPeer> make_peers(const std::vector<bool>& ipc) {
    const int n = c_.nranks;
    std::vector<DevPeer> peers(n);
    ProxyLayout pl;
    pl.nch = plan_channels_;
    pl.nslots = kProxySlots;
    pl.slot_bytes = kProxySlotBytes;
    std::vector<GpuProxy::Peer> proxied;
    char* local = mesh_->local();
    for (int r = 0; r < n; ++r) {
      DevPeer& p = peers[r];
      if (r == c_.rank || ipc[r]) {
        char* remote = r == c_.rank ? local : mesh_->remote()[r];
        p.send_data = remote + geom_.data_off(c_.rank, 0);
        p.send_head = remote + geom_.head_off(c_.rank, 0);
        p.send_tail = local + geom_.tail_off(r, 0);
        p.recv_data = local + geom_.data_off(r, 0);
        p.recv_head = local + geom_.head_off(r, 0);
        p.recv_tail = remote + geom_.tail_off(c_.rank, 0);
        p.send_len = nullptr;
        p.slot_bytes = geom_.slot_bytes;
        p.nslots = geom_.nslots;
        p.ll = 1;
        continue;
      }
      void* h = nullptr;
      cuda_check(cudaHostAlloc(&h, pl.total_bytes(), cudaHostAllocMapped | cudaHostAllocPortable),
                 "cudaHostAlloc GPU proxy FIFOs (" + std::to_string(pl.total_bytes()) + " bytes)");
      std::memset(h, 0, pl.total_bytes());
      proxy_regions_.push_back(static_cast<char*>(h));
      void* dv = nullptr;
      cuda_check(cudaHostGetDevicePointer(&dv, h, 0), "cudaHostGetDevicePointer");
      char* d = static_cast<char*>(dv);
      p.send_data = d + pl.tx_data();
      p.send_head = d + pl.tx_flags();
      p.send_tail = d + pl.tx_flags() + 128;
      p.recv_data = d + pl.rx_data();
      p.recv_head = d + pl.rx_flags();
      p.recv_tail = d + pl.rx_flags() + 128;
      p.send_len = reinterpret_cast<uint32_t*>(d + pl.tx_len());
      p.slot_bytes = pl.slot_bytes;
      p.nslots = pl.nslots;
      p.ll = 0;
      proxied.push_back(GpuProxy::Peer{r, c_.conns[r].get(), static_cast<char*>(h)});
      log_info(Subsys::Gpu,
               "rank {} GPU {}: rank {} through {} via the GPU proxy thread: no GPUDirect RDMA, "
               "GPU data staged through pinned host memory (host-mapped FIFOs, {} x {} KiB per "
               "channel and direction)",
               c_.rank, dev_, r, c_.conns[r]->describe(), pl.nslots, pl.slot_bytes >> 10);
    }
    proxy_peers_ = int(proxied.size());
    if (!proxied.empty())
      proxy_ = std::make_unique<GpuProxy>(
          c_.rank, pl, std::move(proxied), [this](int code, const std::string& why) {
            log_warn(Subsys::Gpu, "rank {}: {}", c_.rank, why);
            this->abort();  // running kernels give up promptly
            c_.fail(static_cast<mycollResult_t>(code), why);
          });
    return peers;
  }

  // What the LL point-to-point kernel needs to know, from the DevComm every
  // kernel gets; logs whether it can serve any batch.
  void init_p2p_ll(const DevComm& dc, const std::vector<bool>& ipc) {
    p2p_common_ = P2pLlCommon{};
    p2p_common_.abort = dc.abort;
    p2p_common_.error = dc.error;
    p2p_common_.timeout_ns = dc.timeout_ns;
    p2p_common_.ll_slots = uint32_t(geom_.ll_slots);
    p2p_common_.ll_slot_bytes = uint32_t(geom_.ll_slot_bytes);
    p2p_common_.rank = c_.rank;
    p2p_ctx_.geom = geom_;
    p2p_ctx_.rank = c_.rank;
    p2p_ctx_.local = mesh_->local();
    p2p_ctx_.remote = mesh_->remote();
    p2p_ctx_.ll = ipc;
    p2p_ctx_.ll_max = dc.ll_max_bytes;
    p2p_ctx_.channel_bytes = c_.cfg.gpu_channel_bytes;
    p2p_ctx_.max_channels = p2p_channels_;
    p2p_ctx_.max_keys = std::min(kP2pLlMaxKeys, block_budget_);
    int ll_peers = 0;
    for (int r = 0; r < c_.nranks; ++r) ll_peers += r != c_.rank && ipc[r];
    if (ll_peers > 0 && dc.ll_max_bytes > 0)
      log_info(Subsys::Gpu,
               "rank {} GPU {}: LL point-to-point kernel serves send/recv batches with the {} "
               "peer(s) on cuda_ipc whose every per-channel slice is <= {} bytes "
               "(MYCOLL_GPU_LL_BYTES, at most the ll ring), up to {} (peer, channel, direction) "
               "pairs and {} slices per batch; other batches run the plan kernel",
               c_.rank, dev_, ll_peers, dc.ll_max_bytes, kP2pLlMaxKeys, kP2pLlMaxSlices);
  }

  int channels_for(size_t bytes) const {
    return device_channels(bytes, c_.cfg.gpu_channel_bytes, plan_channels_);
  }

  static void free_plan(DevPlan& p) {
    if (p.d_ops) cudaFree(p.d_ops);
    if (p.d_chan) cudaFree(p.d_chan);
    if (p.h_pinned) cudaFreeHost(p.h_pinned);
  }

  void upload(DevPlan& p, const std::vector<DevOp>& ops, const std::vector<uint32_t>& chan,
              cudaStream_t s) {
    size_t ob = ops.size() * sizeof(DevOp), cb = chan.size() * sizeof(uint32_t);
    cuda_check(cudaMalloc(&p.d_ops, std::max<size_t>(ob, 32)), "cudaMalloc plan");
    cuda_check(cudaMalloc(&p.d_chan, cb), "cudaMalloc plan");
    cuda_check(cudaHostAlloc(&p.h_pinned, ob + cb + 16, cudaHostAllocDefault), "cudaHostAlloc plan");
    char* h = static_cast<char*>(p.h_pinned);
    std::memcpy(h, ops.data(), ob);
    std::memcpy(h + ob, chan.data(), cb);
    cuda_check(cudaMemcpyAsync(p.d_ops, h, ob, cudaMemcpyHostToDevice, s), "upload plan");
    cuda_check(cudaMemcpyAsync(p.d_chan, h + ob, cb, cudaMemcpyHostToDevice, s), "upload plan");
  }

  // Builds (or finds) the per-channel plans of a collective.
  DevPlan& collective_plan(const Task& t, cudaStream_t s) {
    const size_t es = dtype_size(t.dtype);
    const bool in_place = t.in_place;
    auto key = std::make_tuple(int(t.coll), int(t.algo), int(es), t.op == mycollAvg, t.count,
                               t.root, in_place);
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second;
    const size_t blocks = coll_is_blocked(t.coll) ? c_.nranks : 1;
    DeviceCollArgs a;
    a.coll = t.coll;
    a.algo = t.algo;
    a.es = es;
    a.avg = t.op == mycollAvg;
    a.count = t.count;
    a.root = t.root;
    a.in_place = in_place;
    a.nranks = c_.nranks;
    a.rank = c_.rank;
    a.nch = channels_for(t.count * blocks * es);
    a.max_step_ops = plan_kernel_max_step_ops();
    DevicePlan built = build_device_collective(
        a, [&](const CollArgs& ca) { return comm_build_plan(c_, t.algo, ca); });
    DevPlan p;
    p.nch = built.nch;
    p.scratch_bytes = built.scratch_bytes;
    upload(p, built.ops, built.chan, s);
    return plans_.emplace(key, p).first->second;
  }

  // Point-to-point batch: every message split over channels by its own size
  // (so both sides agree), cached by the batch's messages (kind, peer,
  // addresses, sizes: they repeat in training). A repeat of the previous
  // batch costs one comparison, no allocation. Batches of small messages
  // with peers on cuda_ipc go to the LL point-to-point kernel (no upload);
  // the others get a plan for the plan kernel. Each rank decides for its own
  // batch alone: both kernels move every slice alike (build_p2p_ll).
  P2pEntry& p2p_entry(const Task& t, cudaStream_t s) {
    p2p_key_.clear();
    for (const Step& st : t.plan.steps)
      for (const Op& op : st.ops)
        p2p_key_.insert(p2p_key_.end(), {uint64_t(op.kind), uint64_t(op.peer), op.src.offset,
                                         op.dst.offset, op.src.count, op.dst.count});
    if (last_p2p_ && p2p_key_ == *last_p2p_key_) return *last_p2p_;
    auto it = p2p_plans_.find(p2p_key_);
    if (it == p2p_plans_.end()) {
      P2pEntry e;
      e.ll = build_p2p_ll(t.plan, p2p_ctx_, &e.batch);
      if (!e.ll) {
        DevicePlan built = build_device_p2p(t.plan, c_.cfg.gpu_channel_bytes, p2p_channels_,
                                            plan_kernel_max_step_ops());
        e.plan.nch = built.nch;
        upload(e.plan, built.ops, built.chan, s);
      }
      it = p2p_plans_.emplace(p2p_key_, std::move(e)).first;
    }
    last_p2p_key_ = &it->first;
    last_p2p_ = &it->second;
    return it->second;
  }

  void ensure_scratch(size_t bytes, cudaStream_t s) {
    if (bytes <= scratch_bytes_) return;
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    cudaStreamIsCapturing(s, &cs);
    if (cs != cudaStreamCaptureStatusNone)
      throw_error(mycollInvalidUsage,
                  "this collective needs " + std::to_string(bytes) +
                      " bytes of GPU scratch, first allocated outside CUDA graph capture: run it "
                      "once before capturing");
    // The old buffer is retired, freed at destroy: cudaFree would
    // synchronise the whole device, waiting for the kernels of other ranks
    // sharing it (which may wait for this rank), and a stream-ordered free
    // into the shared default pool may make another stream's allocation wait
    // for this one. Growth at least doubles, so what is retired stays below
    // the final size.
    if (d_scratch_) retired_.push_back(d_scratch_);
    d_scratch_ = nullptr;
    scratch_bytes_ = 0;
    bytes = std::max(bytes, 2 * retired_bytes_last_);
    cuda_check(cudaMalloc(&d_scratch_, bytes), "cudaMalloc scratch");
    retired_bytes_last_ = bytes;
    scratch_bytes_ = bytes;
  }

  // The selection table's inputs for this call (lib/engine/device_select.h).
  DevCall dev_call(const Task& t) const {
    DevCall d;
    d.coll = t.coll;
    d.algo = t.algo;
    d.algo_forced = c_.algo.forced(t.coll);
    d.block_bytes = uint64_t(t.count) * dtype_size(t.dtype);
    d.direct_channels = t.coll == Coll::AllToAll || t.coll == Coll::Scatter || t.coll == Coll::Gather
                            ? direct_channels(t)
                            : 0;
    return d;
  }

  // Channels per peer of the direct kernel (0: its grid cannot be resident;
  // the plan kernel serves then).
  int direct_channels(const Task& t) const {
    return direct_kernel_channels(uint64_t(t.count) * dtype_size(t.dtype),
                                  c_.cfg.gpu_channel_bytes, geom_.max_channels, c_.nranks,
                                  block_budget_, kDirectCopyBlocks,
                                  gpu_share_ > 1 ? 0 : kDirectSpareSms);
  }

  // The direct kernel: n - 1 streams (peers) at most on direct_channels
  // each, plus copy blocks for this rank's own block where it is not in
  // place already.
  void launch_direct_kernel(const Task& t, cudaStream_t s) {
    const Coll kind = t.coll;
    const uint64_t block = uint64_t(t.count) * dtype_size(t.dtype);
    const int n = c_.nranks, r = c_.rank;
    const int nch = direct_channels(t);
    const char* in = static_cast<const char*>(t.input);
    const char* out = static_cast<const char*>(t.output);
    bool own = false;
    if (kind == Coll::AllToAll) own = in != out;
    else if (r == t.root)
      own = kind == Coll::Scatter ? in + uint64_t(r) * block != out
                                   : out + uint64_t(r) * block != in;
    cuda_check(launch_direct(kind, t.input, t.output, block, t.dtype, t.root, d_comm_, n, r, nch,
                             own ? kDirectCopyBlocks : 0, s),
               "direct kernel launch");
  }

  void launch(const Task& t, cudaStream_t s) {
    const DevChoice k = select_device_kernel(dev_call(t), limits_);
    if (log_enabled(LogLevel::Info, Subsys::Coll))
      log_info(Subsys::Coll, "op {} {} of {} bytes: {}", t.seq, coll_name(t.coll),
               uint64_t(t.count) * dtype_size(t.dtype), describe(k));
    const uint64_t block = uint64_t(t.count) * dtype_size(t.dtype);
    switch (k.kernel) {
      case DevKernel::Ring: {
        const int nch = device_channels(coll_whole_count(t.coll, block, c_.nranks),
                                        c_.cfg.gpu_channel_bytes, geom_.max_channels);
        cuda_check(launch_ring(t.coll, t.input, t.output, block, t.dtype, t.op, t.root, d_comm_,
                               c_.nranks, nch, s),
                   "ring kernel launch");
        return;
      }
      case DevKernel::LlColl:
        cuda_check(launch_ll_coll(t.coll, t.input, t.output, block, t.dtype, t.op, t.root, d_comm_,
                                  c_.nranks, block_budget_, s),
                   "LL collective kernel launch");
        return;
      case DevKernel::Direct: launch_direct_kernel(t, s); return;
      case DevKernel::OneShot:
        cuda_check(launch_oneshot(t.input, t.output, block, t.dtype, t.op, d_comm_, c_.nranks,
                                  block_budget_, s),
                   "one-shot kernel launch");
        return;
      case DevKernel::TwoShot:
        cuda_check(launch_twoshot(t.input, t.output, block, t.dtype, t.op, d_comm_, c_.nranks,
                                  block_budget_, s),
                   "two-shot kernel launch");
        return;
      case DevKernel::Plan: break;
    }
    DevPlan* pp = nullptr;
    if (t.coll == Coll::SendRecv) {
      P2pEntry& e = p2p_entry(t, s);
      if (e.ll) {
        P2pLlCommon c = p2p_common_;
        c.nkeys = int32_t(e.batch.keys.size());
        cuda_check(launch_p2p_ll(c, e.batch.keys.data(), e.batch.ptr.data(), e.batch.bytes.data(),
                                 int(e.batch.ptr.size()), e.batch.threads, s),
                   "LL point-to-point kernel launch");
        return;
      }
      pp = &e.plan;
    } else {
      pp = &collective_plan(t, s);
    }
    DevPlan& p = *pp;
    ensure_scratch(p.scratch_bytes, s);
    KernelArgs a{};
    a.ops = p.d_ops;
    a.chan_ops = p.d_chan;
    a.bufs[0] = const_cast<char*>(static_cast<const char*>(t.input));
    a.bufs[1] = static_cast<char*>(t.output);
    a.bufs[2] = static_cast<char*>(d_scratch_);
    a.comm = d_comm_;
    a.nranks = c_.nranks;
    cuda_check(launch_plan(a, coll_reduces(t.coll), t.dtype, t.op, p.nch, s), "plan kernel launch");
  }

  mycollComm& c_;
  int dev_;
  FifoGeom geom_{};
  std::unique_ptr<CudaIpcMesh> mesh_;
  int32_t* h_abort_ = nullptr;
  DevError* h_error_ = nullptr;
  char** d_remote_ = nullptr;
  DevPeer* d_peers_ = nullptr;
  std::vector<char*> proxy_regions_;  // pinned host memory, one per proxy peer
  int proxy_peers_ = 0;
  int plan_channels_ = 1;  // most channels a plan-kernel collective is split over
  int p2p_channels_ = 1;   // most channels a point-to-point message is split over
  int min_sms_ = 0;        // fewest multiprocessors of any rank's GPU (direct kernel grid)
  int gpu_share_ = 1;      // most ranks on any one GPU of the communicator
  int block_budget_ = 1;   // most thread blocks of one kernel (share_gpu)
  int threads_on_gpu_ = 0;  // ranks of this process on this GPU (this one included)
  cudaStream_t init_stream_ = nullptr;
  cudaStream_t last_stream_ = nullptr;  // the stream of the last operation (compared only)
  bool order_recorded_ = false;          // order_event_ marks the end of the last operation
  cudaEvent_t order_event_ = nullptr;
  cudaStream_t last_checked_stream_ = nullptr;
  bool warned_blocking_stream_ = false;
  bool any_proxy_ = false;  // some rank of the communicator has proxy peers
  DevLimits limits_;        // the selection table's fixed inputs (set at init)
  std::unique_ptr<GpuProxy> proxy_;
  DevComm* d_comm_ = nullptr;
  std::map<std::tuple<int, int, int, bool, size_t, int, bool>, DevPlan> plans_;
  std::map<std::vector<uint64_t>, P2pEntry> p2p_plans_;
  std::vector<uint64_t> p2p_key_;  // the current batch's key (reused)
  const std::vector<uint64_t>* last_p2p_key_ = nullptr;
  P2pEntry* last_p2p_ = nullptr;
  P2pLlContext p2p_ctx_;     // the LL point-to-point kernel: this rank's inboxes
  P2pLlCommon p2p_common_{};  // its parameters shared by every launch
  void* d_scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
  std::vector<void*> retired_;     // outgrown scratch buffers (ensure_scratch)
  size_t retired_bytes_last_ = 0;  // size of the current scratch allocation
};

}  // namespace

std::unique_ptr<DeviceComm> DeviceComm::create(mycollComm& comm) {
  return std::make_unique<DeviceCommImpl>(comm);
}

}  // namespace mycoll

#endif  // MYCOLL_HAVE_CUDA
