// Device communicator, what it keeps for its life: collective plans and
// point-to-point batches flattened for the plan kernel (resident in device
// memory: CUDA graphs may replay them), and the scratch buffer. See
// device_comm_impl.h.
#if MYCOLL_HAVE_CUDA

#include "engine/device_comm_impl.h"

#include <algorithm>
#include <cstring>

#include "base/dtype.h"
#include "base/error.h"

namespace mycoll {
namespace devcomm {

int DeviceCommImpl::channels_for(size_t bytes) const {
  return device_channels(bytes, c_.cfg.gpu_channel_bytes, plan_channels_);
}

void DeviceCommImpl::free_plan(DevPlan& p) {
  if (p.d_ops) cudaFree(p.d_ops);
  if (p.d_chan) cudaFree(p.d_chan);
  if (p.h_pinned) cudaFreeHost(p.h_pinned);
}

// A plan first needed under CUDA graph capture (no warm-up call before it)
// is allocated with the capture mode relaxed and copied outside the graph,
// on a stream of the communicator's own, before the call returns: a copy
// captured into the graph would run only at its launches, so an eager call
// of the same shape before the first launch would read an empty plan.
// Otherwise the copy is ordered on the call's stream, before its kernel.
void DeviceCommImpl::upload(DevPlan& p, const std::vector<DevOp>& ops,
                            const std::vector<uint32_t>& chan, cudaStream_t s) {
  RelaxedCapture relaxed;
  const bool capturing = stream_capturing(s);
  size_t ob = ops.size() * sizeof(DevOp), cb = chan.size() * sizeof(uint32_t);
  cuda_check(cudaMalloc(&p.d_ops, std::max<size_t>(ob, 32)), "cudaMalloc plan");
  cuda_check(cudaMalloc(&p.d_chan, cb), "cudaMalloc plan");
  cuda_check(cudaHostAlloc(&p.h_pinned, ob + cb + 16, cudaHostAllocDefault), "cudaHostAlloc plan");
  char* h = static_cast<char*>(p.h_pinned);
  std::memcpy(h, ops.data(), ob);
  std::memcpy(h + ob, chan.data(), cb);
  if (capturing && !upload_stream_)
    cuda_check(cudaStreamCreateWithFlags(&upload_stream_, cudaStreamNonBlocking),
               "cudaStreamCreate (plan upload under capture)");
  cudaStream_t to = capturing ? upload_stream_ : s;
  cuda_check(cudaMemcpyAsync(p.d_ops, h, ob, cudaMemcpyHostToDevice, to), "upload plan");
  cuda_check(cudaMemcpyAsync(p.d_chan, h + ob, cb, cudaMemcpyHostToDevice, to), "upload plan");
  if (capturing) cuda_check(cudaStreamSynchronize(to), "upload plan (under capture)");
}

// Builds (or finds) the per-channel plans of a collective.
DevPlan& DeviceCommImpl::collective_plan(const Task& t, cudaStream_t s) {
  const size_t es = dtype_size(t.dtype);
  const bool in_place = t.in_place;
  auto key = std::make_tuple(int(t.coll), int(t.algo), int(es), t.op == mycollAvg, t.count, t.root,
                             in_place);
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
  p.sends_only_to = built.sends_only_to;
  upload(p, built.ops, built.chan, s);
  return plans_.emplace(key, p).first->second;
}

// Point-to-point batch: every message split over channels by its own size
// (so both sides agree), cached by the batch's messages (kind, peer,
// addresses, sizes: they repeat in training). A repeat of the previous
// batch costs one comparison, no allocation. The selection table picks
// the kernel from the batch's shape (lib/engine/device_select.h, row
// p2p_ll): small messages with peers on cuda_ipc go to the LL
// point-to-point kernel (no upload), the others get a plan for the plan
// kernel.
P2pEntry& DeviceCommImpl::p2p_entry(const Task& t, cudaStream_t s) {
  p2p_key_.clear();
  for (const Step& st : t.plan.steps)
    for (const Op& op : st.ops)
      p2p_key_.insert(p2p_key_.end(), {uint64_t(op.kind), uint64_t(op.peer), op.src.offset,
                                       op.dst.offset, op.src.count, op.dst.count});
  if (last_p2p_ && p2p_key_ == *last_p2p_key_) return *last_p2p_;
  auto it = p2p_plans_.find(p2p_key_);
  if (it == p2p_plans_.end()) {
    P2pEntry e;
    const P2pCut cut = cut_p2p(t.plan, p2p_ctx_);
    DevCall call = dev_call(t);
    call.p2p = cut.shape;
    e.choice = select_device_kernel(call, limits_);
    if (e.choice.kernel == DevKernel::P2pLl) {
      layout_p2p_ll(cut, p2p_ctx_, &e.batch);
    } else {
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

// Scratch first needed under CUDA graph capture is allocated then (the
// capture mode relaxed): the graph keeps its address, and outgrown buffers
// live until destroy, so a graph's scratch stays valid however the
// communicator grows it later.
void DeviceCommImpl::ensure_scratch(size_t bytes) {
  if (bytes <= scratch_bytes_) return;
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
  RelaxedCapture relaxed;
  cuda_check(cudaMalloc(&d_scratch_, bytes), "cudaMalloc scratch");
  retired_bytes_last_ = bytes;
  scratch_bytes_ = bytes;
}

}  // namespace devcomm
}  // namespace mycoll

#endif  // MYCOLL_HAVE_CUDA
