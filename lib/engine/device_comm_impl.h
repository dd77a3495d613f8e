// Device engine (host side): the device communicator behind
// lib/engine/device_engine.h's DeviceComm when CUDA is built. Each call asks
// the selection table (device_select.h) for a kernel; the plan kernel runs
// plans flattened into per-channel DevOp lists cached in device memory.
// Peers that CUDA IPC cannot reach (other hosts, or a forced host transport)
// are served by the GPU proxy thread through FIFOs in host-mapped memory.
// Split by phase into files a reader can hold:
//   device_comm_setup.cc   init and destroy: the inbox, peers, proxy, GPU sharing
//   device_comm_cache.cc   plans and scratch kept for the communicator's life
//   device_comm_launch.cc  per call: issue order, the selection table, launches
// Internal to lib/engine.
#pragma once
#if MYCOLL_HAVE_CUDA

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "comm/comm.h"
#include "engine/cuda_scope.h"
#include "engine/device_engine.h"
#include "engine/device_plan_build.h"
#include "engine/device_select.h"
#include "engine/gpu_proxy.h"
#include "engine/peer_watch.h"
#include "kernels/device_plan.h"
#include "kernels/launch.h"
#include "transports/cuda_ipc/cuda_ipc.h"

namespace mycoll {
namespace devcomm {

// Low-latency ring per peer and channel: 8 slots of 16 KiB lines (8 KiB of
// data each).
inline constexpr int kLlSlots = 8;
inline constexpr uint64_t kLlSlotBytes = 16384;
// FIFOs with a peer behind a host transport, per channel and direction: 8
// slots of 64 KiB of pinned host memory, 512 KiB per channel in flight over
// the network. Communicators with such peers split collectives over at most
// kProxyChannels channels (the network, not the SMs, is the limit there, and
// fewer, larger transfers suit it): 8 MiB of pinned memory per such peer.
inline constexpr int kProxySlots = 8;
inline constexpr uint64_t kProxySlotBytes = 65536;
inline constexpr int kProxyChannels = 8;
// How often the peer watch looks at this rank's kernel error (it wakes at
// once for a peer's report or a closed link).
inline constexpr double kWatchPeriodSeconds = 0.02;
// The plan kernel runs on at most MYCOLL_GPU_PLAN_CHANNELS (32), the ring
// kernel on all MYCOLL_NCHANNELS: measured in docs/performance.md.
// Largest broadcast and reduce the LL-collective kernel runs (the table in
// lib/engine/device_select.h).
inline constexpr uint64_t kLlBroadcastBytes = 256 * 1024;
inline constexpr uint64_t kLlReduceBytes = 256 * 1024;
// The direct kernel: blocks copying this rank's own block alongside the
// exchange, and SMs it leaves to whatever else runs (docs/performance.md).
inline constexpr int kDirectCopyBlocks = 8;
inline constexpr int kDirectSpareSms = 4;

void cuda_check(cudaError_t e, const std::string& what);
// Per-call checks name a literal: no string is built unless it failed.
void cuda_check(cudaError_t e, const char* what);

// A plan flattened for the kernel, resident in device memory for the life
// of the communicator (CUDA graphs may replay it at any time).
struct DevPlan {
  DevOp* d_ops = nullptr;
  uint32_t* d_chan = nullptr;
  void* h_pinned = nullptr;  // source of the upload
  int nch = 1;
  size_t scratch_bytes = 0;
  int sends_only_to = -1;  // DevicePlan::sends_only_to
};

// A point-to-point batch: the LL point-to-point kernel's parameters when it
// serves the batch, else the plan kernel's plan.
struct P2pEntry {
  DevChoice choice;  // the selection table's answer for this batch
  P2pLlBatch batch;
  DevPlan plan;
};

class DeviceCommImpl : public DeviceComm {
 public:
  explicit DeviceCommImpl(mycollComm& c);
  ~DeviceCommImpl() override;

  std::string describe_peer(int r) const override { return mesh_->describe(r); }
  mycollResult_t poll_error(std::string* reason) override;
  void abort() override {
    closing_.store(true);
    *const_cast<volatile int32_t*>(h_abort_) = 1;
  }
  Algo choose_algo(const AlgoPolicy& policy, Coll c, uint64_t bytes) const override {
    return device_algo(policy, c, bytes, limits_);
  }
  void check_stream(mycollStream_t stream) override;
  void enqueue(std::vector<Task>& tasks, mycollStream_t stream) override;
  std::string launch_failed(const Task* t, mycollResult_t code,
                            const std::string& what) noexcept override;
  void fork(mycollStream_t stream) override;
  void enqueue_beside(std::vector<Task>& tasks) override;
  void join(mycollStream_t stream) override;
  int device() const override { return dev_; }
  bool quiesce() noexcept override;
  void meet() noexcept override;

 private:
  // Setup (device_comm_setup.cc).
  void agree_on_grids(const mycollComm& c, int32_t sms);
  void share_gpu(const mycollComm& c);
  void init_copy(void* dst, const void* src, size_t bytes);
  std::vector<DevPeer> make_peers(const std::vector<bool>& ipc);
  // A peer failed: this rank's proxy connection to it broke (the proxy
  // thread), or the peer watch heard of it (its thread); see stop_for_peer.
  void proxy_failed(mycollResult_t code, const std::string& why) { stop_for_peer(code, why); }
  void peer_failed(const Bootstrap::PeerTrouble& t);
  // cause: the rank whose link ended, where no report came (-1 none).
  void stop_for_peer(mycollResult_t code, const std::string& why, int cause = -1);
  void start_watch();
  void init_p2p_ll(const DevComm& dc, const std::vector<bool>& ipc);
  // Caches (device_comm_cache.cc).
  int channels_for(size_t bytes) const;
  // At most `want` channels for a kernel whose grid is its channels plus the
  // call check's block: where ranks share a GPU, the whole grid within the
  // block budget (alike on every rank).
  int channels_beside_check(int want) const {
    return grid_capped() ? std::max(1, std::min(want, block_budget_ - 1)) : want;
  }
  // Whether block_budget_ binds: ranks share a GPU, or a block cap is set.
  bool grid_capped() const { return gpu_share_ > 1 || block_cap_ > 0; }
  static void free_plan(DevPlan& p);
  void upload(DevPlan& p, const std::vector<DevOp>& ops, const std::vector<uint32_t>& chan,
              cudaStream_t s);
  DevPlan& collective_plan(const Task& t, cudaStream_t s);
  P2pEntry& p2p_entry(const Task& t, cudaStream_t s);
  void ensure_scratch(size_t bytes);
  // Per call (device_comm_launch.cc).
  void check_shared_stream(cudaStream_t s);
  void enqueue_on(std::vector<Task>& tasks, cudaStream_t s);
  static bool stream_capturing(cudaStream_t s);
  void mark_issue_order(cudaStream_t s, bool capturing);
  DevCall dev_call(const Task& t) const;
  int direct_channels(const Task& t) const;
  void launch(const Task& t, cudaStream_t s);

  mycollComm& c_;
  int dev_;
  FifoGeom geom_{};
  std::unique_ptr<CudaIpcMesh> mesh_;
  int32_t* h_abort_ = nullptr;
  // Aborted or being destroyed: the proxy's failure handler waits no more
  // for the failure's cause (proxy_failed), so abort and destroy stay quick.
  std::atomic<bool> closing_{false};
  bool quiesced_ = false;   // quiesce() ran
  bool must_meet_ = false;  // ... and said the ranks meet; meet() clears it
  DevError* h_error_ = nullptr;
  char** d_remote_ = nullptr;
  DevPeer* d_peers_ = nullptr;
  std::vector<char*> proxy_regions_;  // pinned host memory, one per proxy peer
  int proxy_peers_ = 0;
  int plan_channels_ = 1;    // most channels a plan-kernel collective is split over
  int p2p_channels_ = 1;     // most channels a point-to-point message is split over
  int min_sms_ = 0;          // fewest multiprocessors of any rank's GPU (direct kernel grid)
  int gpu_share_ = 1;        // most ranks on any one GPU of the communicator
  bool pdl_ = false;         // LL launches may be programmatic (setup: MYCOLL_GPU_PDL)
  bool launch_pdl_ = false;  // ... and this enqueue's are (not captured)
  int block_budget_ = 1;     // most thread blocks of one kernel (share_gpu)
  int block_cap_ = 0;        // CommOptions::max_blocks agreed by every rank (0: none)
  int threads_on_gpu_ = 0;   // ranks of this process on this GPU (this one included)
  cudaStream_t init_stream_ = nullptr;
  cudaStream_t last_stream_ = nullptr;  // the stream of the last operation (compared only)
  bool order_recorded_ = false;         // order_event_ marks the end of the last operation
  cudaEvent_t order_event_ = nullptr;
  // The side stream of groups whose ranks share a stream (fork()), and its
  // fork and join events; created at the first such group.
  cudaStream_t side_stream_ = nullptr;
  // Plans first needed under CUDA graph capture are uploaded on this
  // stream, outside the graph (upload); created then.
  cudaStream_t upload_stream_ = nullptr;
  cudaEvent_t fork_event_ = nullptr;
  cudaEvent_t join_event_ = nullptr;
  cudaStream_t last_checked_stream_ = nullptr;  // passed check_stream (when stream_checked_)
  bool stream_checked_ = false;
  bool warned_blocking_stream_ = false;
  bool any_proxy_ = false;  // some rank of the communicator has proxy peers
  DevLimits limits_;        // the selection table's fixed inputs (set at init)
  std::unique_ptr<GpuProxy> proxy_;
  std::unique_ptr<PeerWatch> watch_;  // joined first in the destructor
  DevComm* d_comm_ = nullptr;
  std::map<std::tuple<int, int, int, bool, size_t, int, bool>, DevPlan> plans_;
  std::map<std::vector<uint64_t>, P2pEntry> p2p_plans_;
  std::vector<uint64_t> p2p_key_;  // the current batch's key (reused)
  const std::vector<uint64_t>* last_p2p_key_ = nullptr;
  P2pEntry* last_p2p_ = nullptr;
  P2pLlContext p2p_ctx_;      // the LL point-to-point kernel: this rank's inboxes
  P2pLlCommon p2p_common_{};  // its parameters shared by every launch
  void* d_scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
  std::vector<void*> retired_;     // outgrown scratch buffers (ensure_scratch)
  size_t retired_bytes_last_ = 0;  // size of the current scratch allocation
};

}  // namespace devcomm
}  // namespace mycoll

#endif  // MYCOLL_HAVE_CUDA
