// Device communicator, setup and teardown: the inbox and its geometry, the
// peers' FIFOs (CUDA IPC or the GPU proxy's host-mapped memory), the ranks
// sharing a GPU, and the LL point-to-point context. See device_comm_impl.h.
#if MYCOLL_HAVE_CUDA

#include "engine/device_comm_impl.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include "base/error.h"
#include "base/log.h"
#include "topo/topo.h"

namespace mycoll {
namespace devcomm {
namespace {

// Every kernel loaded on `dev` (kernels/launch.h says why), once per device
// and process; other threads initialising on the same device wait until it
// is done. Called after the inbox and the other device allocations of the
// first communicator on `dev`: loaded first, the kernels' code (tens of MB)
// would move those allocations with every change of any kernel's size, and
// small calls measured 0.1-0.3 us slower or faster for code they never run
// (docs/performance.md, "Session 29").
void preload_kernels_once(int dev) {
  static std::mutex mu;
  static std::vector<int> done;
  std::lock_guard<std::mutex> g(mu);
  if (std::find(done.begin(), done.end(), dev) != done.end()) return;
  for (cudaError_t e : {preload_plan_kernels(), preload_ring_kernels(), preload_direct_kernels(),
                        preload_ll_coll_kernels(), preload_p2p_kernels(), preload_premul_kernels()})
    if (e != cudaSuccess)
      throw_error(mycollUnhandledCudaError, std::string("loading the GPU kernels on device ") +
                                                std::to_string(dev) + ": " + cudaGetErrorString(e));
  done.push_back(dev);
}

}  // namespace

void cuda_check(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) throw_error(mycollUnhandledCudaError, what + ": " + cudaGetErrorString(e));
}
// Per-call checks name a literal: no string is built unless it failed.
void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw_error(mycollUnhandledCudaError, std::string(what) + ": " + cudaGetErrorString(e));
}

DeviceCommImpl::DeviceCommImpl(mycollComm& c) : c_(c), dev_(c.cuda_device) {
  cuda_check(cudaSetDevice(dev_), "cudaSetDevice(" + std::to_string(dev_) + ")");
  const Config& cfg = c.cfg;
  geom_.nranks = c.nranks;
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
  // proxy count then) and whether the LL kernel's all-reduce runs
  // (only where every peer is reachable over NVLink/PCIe).
  std::vector<int32_t> proxied(c.nranks, all_ipc ? 0 : 1);
  c.bootstrap->allgather(proxied.data(), sizeof(int32_t));
  any_proxy_ = std::find(proxied.begin(), proxied.end(), 1) != proxied.end();
  int32_t sms = 0;
  cuda_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev_),
             "cudaDeviceGetAttribute(multiprocessors)");
  agree_on_grids(c, sms);
  share_gpu(c);
  plan_channels_ =
      std::min(geom_.max_channels, any_proxy_ ? kProxyChannels : cfg.gpu_plan_channels);
  plan_channels_ = channels_beside_check(plan_channels_);
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
  dc.set_offsets();
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
             "direct algorithm (MYCOLL_GPU_ONESHOT_BYTES)",
             c.rank, dev_, geom_.os_bytes);
  if (geom_.ts_bytes > 0)
    log_info(Subsys::Gpu,
             "rank {} GPU {}: two-shot all-reduce enabled for messages <= {} bytes with the "
             "twoshot algorithm (MYCOLL_GPU_TWOSHOT_BYTES)",
             c.rank, dev_, geom_.ts_bytes);
  if (!any_proxy_ && c.nranks >= 2 && cfg.gpu_direct_bytes > 0)
    log_info(Subsys::Gpu,
             "rank {} GPU {}: direct kernel for all-to-all / scatter / gather of >= {} bytes "
             "(MYCOLL_GPU_DIRECT_BYTES), grid within {} SMs",
             c.rank, dev_, cfg.gpu_direct_bytes, min_sms_);
  if (geom_.lc_bytes > 0)
    log_info(Subsys::Gpu,
             "rank {} GPU {}: LL all-gather / reduce-scatter / all-to-all (direct algorithm) "
             "and broadcast / reduce (automatic algorithm, <= {} / {} bytes) enabled for "
             "messages <= {} bytes (MYCOLL_GPU_LL_COLL_BYTES)",
             c.rank, dev_, kLlBroadcastBytes, kLlReduceBytes, geom_.lc_bytes);
  if (geom_.mb_region_bytes() > 0)
    log_info(Subsys::Gpu,
             "rank {} GPU {}: mailbox of the one-shot, two-shot and LL kernels: {} KiB of inbox "
             "({} bytes per sender and parity, one launch epoch)",
             c.rank, dev_, geom_.mb_region_bytes() >> 10, geom_.mb_slot_bytes());
  limits_.nranks = c.nranks;
  limits_.any_proxy = any_proxy_;
  limits_.ring_bytes = cfg.gpu_ring_bytes;
  limits_.direct_bytes = cfg.gpu_direct_bytes;
  limits_.oneshot_bytes = uint64_t(std::max(geom_.os_bytes, 0));
  limits_.twoshot_bytes = uint64_t(std::max(geom_.ts_bytes, 0));
  limits_.ll_coll_bytes = uint64_t(std::max(geom_.lc_bytes, 0));
  limits_.ll_bcast_bytes = kLlBroadcastBytes;
  limits_.ll_reduce_bytes = kLlReduceBytes;
  if (c.nranks >= 2 && ring_kernel_from(Coll::AllReduce, limits_) > 0)
    log_info(Subsys::Gpu,
             "rank {} GPU {}: fused ring kernel for ring all-reduce / all-gather / "
             "reduce-scatter of >= {} bytes (MYCOLL_GPU_RING_BYTES), broadcast / reduce of "
             ">= {} / {} bytes",
             c.rank, dev_, ring_kernel_from(Coll::AllReduce, limits_),
             ring_kernel_from(Coll::Broadcast, limits_), ring_kernel_from(Coll::Reduce, limits_));
  // Then a barrier: no rank returns from init, so none launches a kernel,
  // before every rank of the communicator has its kernels loaded.
  preload_kernels_once(dev_);
  // Programmatic launch of the LL and ring kernels (MYCOLL_GPU_PDL): only
  // where no GPU has two ranks (a scheduled successor waiting for its
  // predecessor holds resources a peer's kernel may need to start) and the
  // loaded kernels wait for their predecessor (sm_90 binaries, which one
  // build makes of every kernel).
  pdl_ = c.cfg.gpu_pdl && gpu_share_ == 1 && kernels_pdl_ready();
  c.bootstrap->barrier();
  start_watch();
}

// Peers may still write counters into this inbox after our last kernel
// ended, so it is freed only once they are done too: GPUs driven by this
// process are synchronised here; other processes meet in a barrier (meet(),
// which comm/retire.h runs apart from destroy, bounded by MYCOLL_TIMEOUT).
bool DeviceCommImpl::quiesce() noexcept {
  if (quiesced_) return must_meet_;
  quiesced_ = true;
  closing_.store(true);  // a failing proxy stops waiting for causes (proxy_failed)
  watch_.reset();        // peers close their links after the meeting: not a failure
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
  // close their connections (the meeting); the proxy keeps serving peers
  // until everyone is there.
  if (proxy_ && healthy && !proxy_->drain(c_.cfg.timeout_s))
    log_warn(Subsys::Gpu,
             "rank {}: GPU proxy could not hand every slot to its transport before "
             "destroy (MYCOLL_TIMEOUT)",
             c_.rank);
  must_meet_ = (other_process || proxy_) && healthy;
  return must_meet_;
}

void DeviceCommImpl::meet() noexcept {
  if (!must_meet_) return;
  must_meet_ = false;
  try {
    c_.bootstrap->barrier();
  } catch (...) {}
}

DeviceCommImpl::~DeviceCommImpl() {
  quiesce();
  meet();
  cudaSetDevice(dev_);  // maybe a thread of its own (comm/retire.h)
  if (proxy_) proxy_->closing();
  proxy_.reset();
  for (auto& [k, p] : plans_) free_plan(p);
  for (auto& p : p2p_plans_) free_plan(p.second.plan);
  if (d_scratch_) cudaFree(d_scratch_);
  for (void* p : retired_) cudaFree(p);
  if (init_stream_) cudaStreamDestroy(init_stream_);
  if (order_event_) cudaEventDestroy(order_event_);
  if (side_stream_) cudaStreamDestroy(side_stream_);
  if (upload_stream_) cudaStreamDestroy(upload_stream_);
  if (fork_event_) cudaEventDestroy(fork_event_);
  if (join_event_) cudaEventDestroy(join_event_);
  if (d_comm_) cudaFree(d_comm_);
  if (d_remote_) cudaFree(d_remote_);
  if (d_peers_) cudaFree(d_peers_);
  if (h_abort_) cudaFreeHost(h_abort_);
  for (char* h : proxy_regions_) cudaFreeHost(h);
  mesh_.reset();
  cudaGetLastError();
}

// What shapes the FIFOs and the grids must be alike on every rank: each
// brings its GPU's SMs, the channels it asks for (MYCOLL_NCHANNELS) and its
// block cap (CommOptions::max_blocks), and every rank takes the fewest of
// each. (The other settings that must be alike are refused at init when they
// differ: check_consistent_config, lib/comm/comm_init.cc.) Runs before the
// inbox is laid out.
void DeviceCommImpl::agree_on_grids(const mycollComm& c, int32_t sms) {
  struct Ask {
    int32_t sms, channels, max_blocks;
  };
  std::vector<Ask> all(c.nranks);
  all[c.rank] = Ask{sms, c.cfg.gpu_channels, c.opts.max_blocks};
  c.bootstrap->allgather(all.data(), sizeof(Ask));
  min_sms_ = sms;
  int channels = c.cfg.gpu_channels, fewest_at = c.rank;
  for (int r = 0; r < c.nranks; ++r) {
    min_sms_ = std::min(min_sms_, all[r].sms);
    if (all[r].channels < channels) channels = all[r].channels, fewest_at = r;
    block_cap_ = tighter_cap(block_cap_, all[r].max_blocks);
  }
  if (channels < c.cfg.gpu_channels)
    log_warn(Subsys::Init,
             "rank {}: MYCOLL_NCHANNELS differs between ranks (this rank {}, rank {} {}): "
             "every rank uses {}; set it alike everywhere",
             c.rank, c.cfg.gpu_channels, fewest_at, channels, channels);
  geom_.max_channels = block_cap_ > 0 ? std::min(channels, block_cap_) : channels;
}

// Ranks sharing a GPU (threads of one process, or processes): a kernel
// waits on its peers' kernels, so wherever they can run at once (threads,
// or processes under MPS) every rank's grid must fit the GPU beside the
// others'. Every grid is capped at the block budget (SMs / most ranks on
// one GPU, one block per SM), computed alike on every rank from the
// allgathered peers and SM counts. Processes without MPS time-slice the
// GPU instead: every wait tolerates that (it is bounded by MYCOLL_TIMEOUT
// in wall-clock time, not in spins). A block cap (ncclConfig_t.maxCTAs)
// lowers the budget further, on a GPU of its own too. Runs before the inbox
// is laid out.
void DeviceCommImpl::share_gpu(const mycollComm& c) {
  gpu_share_ = max_ranks_per_gpu(c.peers);
  const int shared_budget = shared_gpu_block_budget(min_sms_, gpu_share_);
  block_budget_ = block_cap_ > 0 ? std::min(shared_budget, std::max(2, block_cap_)) : shared_budget;
  const std::vector<int> mine = ranks_on_gpu(c.peers, c.rank);
  for (int r : mine) threads_on_gpu_ += c.peers[r].pid == c.peers[c.rank].pid;
  // MYCOLL_NCHANNELS is a demand where nothing lowered it; a cap is not.
  const bool demanded = c.cfg.gpu_channels_set && geom_.max_channels == c.cfg.gpu_channels;
  if (gpu_share_ > 1 && demanded && geom_.max_channels > shared_budget)
    throw_error(mycollInvalidUsage, "MYCOLL_NCHANNELS=" + std::to_string(c.cfg.gpu_channels) +
                                        " cannot work with " + std::to_string(gpu_share_) +
                                        " ranks sharing a GPU of " + std::to_string(min_sms_) +
                                        " SMs: their kernels must be resident together, "
                                        "so each may use at most " +
                                        std::to_string(shared_budget) +
                                        " channels; unset it or set it to at most that");
  geom_.max_channels = std::min(geom_.max_channels, block_budget_);
  if (block_cap_ > 0)
    log_info(Subsys::Init,
             "rank {} GPU {}: at most {} thread blocks per kernel (ncclConfig_t.maxCTAs, "
             "NCCL_MAX_CTAS or NCCL_MAX_NCHANNELS asked for {}; the smallest of any rank), "
             "at most {} channels",
             c.rank, dev_, block_budget_, block_cap_, geom_.max_channels);
  if (gpu_share_ > 1 && mine.size() > 1) {
    std::string list;
    for (int r : mine) list += (list.empty() ? "" : ",") + std::to_string(r);
    log_info(Subsys::Init,
             "ranks {} share GPU {} ({} of them in this process: their kernels run "
             "concurrently; other processes time-slice the GPU); every kernel's grid is capped "
             "at {} blocks ({} SMs / {} ranks on the busiest GPU), at most {} channels: a shared "
             "GPU is for correctness and development, not speed",
             list, dev_, threads_on_gpu_, shared_budget, min_sms_, gpu_share_, geom_.max_channels);
  }
}

// A copy during init on the private non-blocking stream: never an implicit
// synchronisation with the legacy default stream, which would wait for
// the kernels of ranks of this process that share the GPU and already
// finished their init (their kernels wait for this rank: a deadlock).
void DeviceCommImpl::init_copy(void* dst, const void* src, size_t bytes) {
  cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, init_stream_),
             "cudaMemcpyAsync (init)");
}

// Where the kernel finds its FIFOs with each peer; starts the proxy thread
// for peers behind host transports.
std::vector<DevPeer> DeviceCommImpl::make_peers(const std::vector<bool>& ipc) {
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
      const bool self = r == c_.rank;
      p.send_size = self ? nullptr : remote + geom_.size_off(c_.rank, 0);
      p.recv_size = self ? nullptr : local + geom_.size_off(r, 0);
      p.send_call = self ? nullptr : remote + geom_.call_hdr_off(c_.rank, 0);
      p.recv_call = self ? nullptr : local + geom_.call_hdr_off(r, 0);
      p.size_stride = geom_.size_pair_bytes();
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
    p.send_size = d + pl.tx_size();
    p.recv_size = d + pl.rx_size();
    p.send_call = d + pl.tx_call();
    p.recv_call = d + pl.rx_call();
    p.size_stride = pl.size_bytes();
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
    proxy_ = std::make_unique<GpuProxy>(c_.rank, pl, std::move(proxied),
                                        [this](int code, const std::string& why) {
                                          log_warn(Subsys::Gpu, "rank {}: {}", c_.rank, why);
                                          proxy_failed(static_cast<mycollResult_t>(code), why);
                                        });
  return peers;
}

// A peer failed: the proxy thread's connection broke or a peer broke its
// protocol (proxy_failed), or the peer watch heard a failure report or saw
// a rank's link end (peer_failed). A peer that failed first (a call
// mismatch its kernel found, say) sent its reason over the bootstrap before
// it closed its connections, and this rank's kernels may be about to find
// the same cause (the peer's call line arrived before it left): wait for
// the report as the host engine does, give the kernels as long again, then
// stop them. Their own finding is this rank's error; else this failure, the
// peers' report appended, and this rank's report says it was caused by
// theirs (their origins, or the rank whose link ended, `cause`, as its
// `also` waits with no waits of its own), so a rank following the waits
// (bootstrap/blame.h) goes on to the first failure instead of taking this
// one for it. Neither wait outlasts an abort or destroy of this
// communicator by more than a few milliseconds (closing_): the threads they
// join are these.
void DeviceCommImpl::stop_for_peer(mycollResult_t code, const std::string& why, int cause) {
  std::string theirs;
  for (int i = 0; c_.bootstrap && theirs.empty() && i < 50 && !closing_.load(); ++i)
    theirs = c_.bootstrap->remote_failure(0.02);
  std::string reason;
  mycollResult_t e = poll_error(&reason);
  for (int i = 0; e == mycollSuccess && !theirs.empty() && i < 1000 && !closing_.load(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    e = poll_error(&reason);
  }
  if (e != mycollSuccess) {
    c_.fail(e, reason);
  } else {
    Waits caused;
    if (!theirs.empty())
      caused.also = c_.bootstrap->report_origins();
    else if (cause >= 0)
      caused.also.push_back(cause);
    c_.fail(code,
            theirs.empty() || theirs == why
                ? why
                : why + "; first failure, reported by the peers: " + theirs,
            caused);
  }
  abort();  // running kernels give up promptly (after the cause is recorded)
}

// A report names the first failure; a rank that failed closes its links
// after sending one, so a link ends without a report only where a process
// ended (or its report is still on the way: stop_for_peer waits for it).
void DeviceCommImpl::peer_failed(const Bootstrap::PeerTrouble& t) {
  if (closing_.load()) return;  // aborted or being destroyed: nothing to report
  const std::string me = "rank " + std::to_string(c_.rank) + ": ";
  if (!t.reports.empty()) {
    log_warn(Subsys::Gpu, "rank {}: another rank failed ({}); stopping this rank's kernels",
             c_.rank, t.reports);
    stop_for_peer(mycollRemoteError, me + "GPU kernels stopped: another rank failed");
  } else {
    log_warn(Subsys::Gpu, "rank {}: rank {}'s bootstrap link {}; stopping this rank's kernels",
             c_.rank, t.closed, t.closed_why);
    stop_for_peer(mycollRemoteError,
                  me + "rank " + std::to_string(t.closed) + "'s bootstrap link " + t.closed_why +
                      " while the GPU communicator was in use",
                  t.closed);
  }
}

// The peer watch (lib/engine/peer_watch.h): ranks of other processes are
// watched for their links ending; reports come from every rank.
void DeviceCommImpl::start_watch() {
  if (c_.nranks < 2 || !c_.bootstrap) return;
  std::vector<bool> watched(c_.nranks, false);
  int n = 0;
  for (int r = 0; r < c_.nranks; ++r) {
    const PeerInfo& p = c_.peers[r];
    watched[r] = r != c_.rank && (p.pid != c_.peers[c_.rank].pid ||
                                  std::strcmp(p.host_id, c_.peers[c_.rank].host_id) != 0);
    n += watched[r];
  }
  watch_ = std::make_unique<PeerWatch>(
      *c_.bootstrap, std::move(watched),
      [this] {
        std::string why;
        if (mycollResult_t e = poll_error(&why)) c_.fail(e, why);
        return closing_.load() || c_.aborted.load() || c_.async_error.load() != mycollSuccess;
      },
      [this](const Bootstrap::PeerTrouble& t) { peer_failed(t); }, kWatchPeriodSeconds);
  log_info(Subsys::Gpu,
           "rank {}: peer watch: a failure of this rank's kernels is reported to every rank "
           "within {} ms; another rank's report{} stops this rank's kernels",
           c_.rank, int(kWatchPeriodSeconds * 1000),
           n ? ", or the end of one of the " + std::to_string(n) + " other processes' links," : "");
}

// What the LL point-to-point kernel needs to know, from the DevComm every
// kernel gets; logs whether it can serve any batch.
void DeviceCommImpl::init_p2p_ll(const DevComm& dc, const std::vector<bool>& ipc) {
  p2p_common_ = P2pLlCommon{};
  p2p_common_.abort = dc.abort;
  p2p_common_.error = dc.error;
  p2p_common_.timeout_ns = dc.timeout_ns;
  p2p_common_.ll_slots = uint32_t(geom_.ll_slots);
  p2p_common_.ll_slot_bytes = uint32_t(geom_.ll_slot_bytes);
  p2p_common_.fifo_slots = uint32_t(geom_.nslots);
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
  p2p_ll_limits(p2p_ctx_, &limits_);
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

}  // namespace devcomm

std::unique_ptr<DeviceComm> DeviceComm::create(mycollComm& comm) {
  return std::make_unique<devcomm::DeviceCommImpl>(comm);
}

}  // namespace mycoll

#endif  // MYCOLL_HAVE_CUDA
