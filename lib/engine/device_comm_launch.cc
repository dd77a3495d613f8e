// Device communicator, per call: issue order across streams, the streams of
// ranks sharing a GPU, the selection table (lib/engine/device_select.h) and
// the launch of the kernel it picks. See device_comm_impl.h.
#if MYCOLL_HAVE_CUDA

#include "engine/device_comm_impl.h"

#include <algorithm>
#include <string>
#include <thread>

#include "algorithms/schedule.h"
#include "base/dtype.h"
#include "base/error.h"
#include "base/log.h"
#include "engine/host_wire.h"

namespace mycoll {
namespace devcomm {

mycollResult_t DeviceCommImpl::poll_error(std::string* reason) {
  volatile DevError& e = *h_error_;
  const int code = e.code;
  if (code == 0) return mycollSuccess;
  if (reason) {
    // The kernel sets `ready` right after the fields (a system-scope fence
    // apart): wait for it before reading them.
    for (int i = 0; i < 100000 && !e.ready; ++i) std::this_thread::yield();
    const int peer = e.peer, kind = e.kind;
    if (kind == kDevMismatch || kind == kDevMismatchPrev) {
      const uint64_t mine = e.mine, theirs = e.theirs;
      *reason = header_mismatch_message(
          gpu_call_header(theirs), gpu_call_header(mine), peer,
          "rank " + std::to_string(c_.rank) +
              (kind == kDevMismatchPrev
                   ? ": GPU collective before this one (this rank only sent in it and "
                     "finished its check in the next collective; counts compared modulo 2^32)"
                   : ": GPU collective (counts compared modulo 2^32)"));
    } else if (kind == kDevRecvSizeMismatch || kind == kDevSendSizeMismatch) {
      *reason =
          p2p_size_mismatch_message(c_.rank, peer, kind == kDevSendSizeMismatch, e.mine, e.theirs);
    } else {
      const char* what = kind == kDevSend ? "sending to" : "receiving from";
      *reason = std::string(code == mycollTimeout ? "GPU kernel timed out (MYCOLL_TIMEOUT) "
                                                  : "GPU kernel aborted ") +
                "on rank " + std::to_string(c_.rank) + " while " + what + " rank " +
                std::to_string(peer);
    }
  }
  return static_cast<mycollResult_t>(code);
}

// The stream must be one of this communicator's GPU: a kernel or event on
// another GPU's stream fails at launch, and in a group the ranks launched
// before it would wait for this one until MYCOLL_TIMEOUT. So the stream is
// checked before anything is launched (enqueue_device in lib/comm/enqueue.cc
// checks every stream of a group first). The stream checked last is
// remembered: a call on it costs one comparison.
void DeviceCommImpl::check_stream(mycollStream_t stream) {
  cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
  if (stream_checked_ && s == last_checked_stream_) return;
  OnDevice on(dev_);
  // The legacy and per-thread default streams are the current device's.
  // cudaStreamGetDevice is not permitted on a capturing stream (and would
  // invalidate the capture): there a stream of another GPU fails at the
  // launch, with CUDA's error; the stream is asked on its next eager call.
  const bool named = s != nullptr && s != cudaStreamLegacy && s != cudaStreamPerThread;
  if (named && stream_capturing(s)) {
    if (threads_on_gpu_ > 1) check_shared_stream(s);
    return;
  }
  if (named) {
    int d = -1;
    const cudaError_t e = cudaStreamGetDevice(s, &d);
    if (e != cudaSuccess) {
      cudaGetLastError();
      // Anything but a bad handle is CUDA failing in this process (a kernel
      // that faulted leaves every later call failing): no launch can follow.
      if (e != cudaErrorInvalidResourceHandle && e != cudaErrorInvalidValue)
        throw_error(mycollUnhandledCudaError,
                    launch_failed(nullptr, mycollUnhandledCudaError,
                                  std::string("cudaStreamGetDevice: ") + cudaGetErrorString(e)));
      throw_error(mycollInvalidArgument, "rank " + std::to_string(c_.rank) +
                                             ": the stream passed is not a usable CUDA stream "
                                             "(cudaStreamGetDevice: " +
                                             cudaGetErrorString(e) + ")");
    }
    if (d != dev_)
      throw_error(mycollInvalidArgument,
                  "rank " + std::to_string(c_.rank) + " is on GPU " + std::to_string(dev_) +
                      " but the stream passed belongs to GPU " + std::to_string(d) +
                      ": pass a stream created while GPU " + std::to_string(dev_) +
                      " was current (one stream cannot serve ranks on different GPUs)");
  }
  if (threads_on_gpu_ > 1) check_shared_stream(s);
  last_checked_stream_ = s;
  stream_checked_ = true;
}

void DeviceCommImpl::enqueue(std::vector<Task>& tasks, mycollStream_t stream) {
  check_stream(stream);
  enqueue_on(tasks, reinterpret_cast<cudaStream_t>(stream));
}

void DeviceCommImpl::enqueue_on(std::vector<Task>& tasks, cudaStream_t s) {
  std::string why;
  if (mycollResult_t e = poll_error(&why)) {
    c_.fail(e, why);
    throw_error(e, why);
  }
  OnDevice on(dev_);
  const Task* at = tasks.empty() ? nullptr : &tasks.front();
  try {
    const bool capturing = stream_capturing(s);
    // Programmatic launch of the LL and ring kernels (pdl_): eager calls
    // only (in a graph its edges measured no faster: docs/performance.md
    // "Session 30").
    launch_pdl_ = pdl_ && !capturing;
    if (order_recorded_ && s != last_stream_ && !capturing)
      cuda_check(cudaStreamWaitEvent(s, order_event_, 0), "cudaStreamWaitEvent (issue order)");
    for (Task& t : tasks) {
      at = &t;
      launch(t, s);
    }
    mark_issue_order(s, capturing);
  } catch (const Error& e) {
    throw_error(e.code(), launch_failed(at, e.code(), e.what()));
  } catch (const std::bad_alloc&) {
    throw_error(mycollSystemError, launch_failed(at, mycollSystemError, "out of memory"));
  }
}

// The call had taken its sequence number (and launching may have moved
// this rank's FIFO counters and LL epochs on), or CUDA fails in this
// process: no peer must wait for it.
std::string DeviceCommImpl::launch_failed(const Task* t, mycollResult_t code,
                                          const std::string& what) noexcept {
  std::string why = "launch failed";
  try {
    const std::string op = t ? fmt::format("op {} ({} of {} bytes)", t->seq, coll_name(t->coll),
                                           uint64_t(t->count) * dtype_size(t->dtype))
                             : std::string("the next operation");
    why = fmt::format("rank {} on GPU {}: {} could not be launched: {}", c_.rank, dev_, op, what);
    log_warn(Subsys::Gpu, "{}; failing the communicator so that its peers stop waiting", why);
    c_.fail(code, why);
  } catch (...) {  // out of memory: the flag below still stops this rank's kernels
  }
  *const_cast<volatile int32_t*>(h_abort_) = 1;
  return why;
}

void DeviceCommImpl::fork(mycollStream_t stream) {
  OnDevice on(dev_);
  if (!side_stream_) {
    RelaxedCapture relaxed;  // the first such group may come under capture
    cuda_check(cudaStreamCreateWithFlags(&side_stream_, cudaStreamNonBlocking),
               "cudaStreamCreate (side stream)");
    cuda_check(cudaEventCreateWithFlags(&fork_event_, cudaEventDisableTiming),
               "cudaEventCreate (fork)");
    cuda_check(cudaEventCreateWithFlags(&join_event_, cudaEventDisableTiming),
               "cudaEventCreate (join)");
  }
  cuda_check(cudaEventRecord(fork_event_, reinterpret_cast<cudaStream_t>(stream)),
             "cudaEventRecord (fork)");
}

void DeviceCommImpl::enqueue_beside(std::vector<Task>& tasks) {
  OnDevice on(dev_);
  cuda_check(cudaStreamWaitEvent(side_stream_, fork_event_, 0), "cudaStreamWaitEvent (fork)");
  enqueue_on(tasks, side_stream_);
  cuda_check(cudaEventRecord(join_event_, side_stream_), "cudaEventRecord (join)");
}

void DeviceCommImpl::join(mycollStream_t stream) {
  OnDevice on(dev_);
  cuda_check(cudaStreamWaitEvent(reinterpret_cast<cudaStream_t>(stream), join_event_, 0),
             "cudaStreamWaitEvent (join)");
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
void DeviceCommImpl::check_shared_stream(cudaStream_t s) {
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
bool DeviceCommImpl::stream_capturing(cudaStream_t s) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(s, &st) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return st != cudaStreamCaptureStatusNone;
}

void DeviceCommImpl::mark_issue_order(cudaStream_t s, bool capturing) {
  last_stream_ = s;
  order_recorded_ = false;
  if (capturing) return;
  if (!order_event_)
    cuda_check(cudaEventCreateWithFlags(&order_event_, cudaEventDisableTiming),
               "cudaEventCreate (issue order)");
  cuda_check(cudaEventRecord(order_event_, s), "cudaEventRecord (issue order)");
  order_recorded_ = true;
}

// The selection table's inputs for this call (lib/engine/device_select.h).
DevCall DeviceCommImpl::dev_call(const Task& t) const {
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
// the plan kernel serves then). The grid's residency budget counts the copy
// blocks and the call check's block (kernels/prims/call_check.cuh).
int DeviceCommImpl::direct_channels(const Task& t) const {
  return direct_kernel_channels(uint64_t(t.count) * dtype_size(t.dtype), c_.cfg.gpu_channel_bytes,
                                geom_.max_channels, c_.nranks, block_budget_, kDirectCopyBlocks + 1,
                                grid_capped() ? 0 : kDirectSpareSms);
}

namespace {

// The ring kernel's chains: the first rank (the broadcast root, the rank
// after the reduce root) receives nothing and sends to the next rank; -1
// for every other rank and collective.
int ring_sends_only_to(Coll c, int n, int r, int root) {
  if (c != Coll::Broadcast && c != Coll::Reduce) return -1;
  return (sched::ring_prim(c, n, r, root, 0, false).mode & sched::kR) != 0 ? -1 : (r + 1) % n;
}

}  // namespace

void DeviceCommImpl::launch(const Task& t, cudaStream_t s) {
  // A send/recv batch's kernel is chosen once per distinct batch (its
  // shape is the table's input), and cached with it.
  P2pEntry* pe = t.coll == Coll::SendRecv ? &p2p_entry(t, s) : nullptr;
  const DevChoice k = pe ? pe->choice : select_device_kernel(dev_call(t), limits_);
  // What every collective kernel checks against its peers' (0: no check:
  // point-to-point, or MYCOLL_GPU_CALL_CHECK=0).
  const uint64_t sig =
      t.coll == Coll::SendRecv || !c_.cfg.gpu_call_check
          ? 0
          : gpu_call_sig(collective_header(t.coll, t.dtype, t.op, t.root, t.count, 0, 0));
  // A rank that receives nothing in the call compares only the line of a
  // peer it sends to within the call, the others' in its next collective
  // kernel (kernels/prims/call_check.cuh); never with MYCOLL_GPU_CALL_CHECK=strict.
  const bool may_defer = sig != 0 && !c_.cfg.gpu_call_check_strict;
  const uint64_t block = uint64_t(t.count) * dtype_size(t.dtype);
  const int check = sig != 0 ? 1 : 0;  // the call check's block, where the kernel has one
  // The per-call INFO line: the selection, then the grid (thread blocks)
  // and how the data is split over it. Only called when `info`: nothing of
  // it is computed or formatted on a call that does not log.
  const bool info = log_enabled(LogLevel::Info, Subsys::Coll);
  auto say = [&](int blocks, const std::string& split) {
    log_info(Subsys::Coll, "op {} {} of {} bytes: {}, {} thread block(s){}{}", t.seq,
             coll_name(t.coll), block, describe(k), blocks, split,
             (k.kernel == DevKernel::LlColl || k.kernel == DevKernel::Ring) && launch_pdl_
                 ? " (programmatic launch)"
                 : "");
  };
  switch (k.kernel) {
    case DevKernel::Ring: {
      const int nch =
          device_channels(coll_whole_count(t.coll, block, c_.nranks), c_.cfg.gpu_channel_bytes,
                          channels_beside_check(geom_.max_channels));
      if (info)
        say(nch + check, fmt::format(" ({} channel(s){})", nch, check ? " + the call check" : ""));
      cuda_check(
          launch_ring(t.coll, t.input, t.output, block, t.dtype, t.op, t.root, d_comm_, c_.nranks,
                      nch, sig,
                      may_defer ? ring_sends_only_to(t.coll, c_.nranks, c_.rank, t.root) : -1,
                      launch_pdl_, s),
          "ring kernel launch");
      return;
    }
    case DevKernel::LlColl:
      if (info)
        say(ll_coll_grid(k.two_shot, block, c_.nranks, block_budget_), " (lines split among them)");
      cuda_check(launch_ll_coll(t.coll, k.two_shot, t.input, t.output, block, t.dtype, t.op, t.root,
                                d_comm_, c_.nranks, block_budget_, sig, launch_pdl_, s),
                 "LL kernel launch");
      return;
    case DevKernel::Direct: {
      // n - 1 streams (peers) at most on nch channels each, plus copy
      // blocks for this rank's own block where it is not in place already.
      const int n = c_.nranks, r = c_.rank, nch = direct_channels(t);
      const sched::DirectRank d = sched::direct_rank(t.coll, false, n, r, t.root);
      const char* in = static_cast<const char*>(t.input);
      const char* out = static_cast<const char*>(t.output);
      const int copy =
          d.copy && in + d.send_off(r, block) != out + d.recv_off(r, block) ? kDirectCopyBlocks : 0;
      if (info) {
        const int streams = direct_streams(t.coll, n, r, t.root), body = streams * nch + copy;
        say(body + (body > 0 ? check : 0),
            fmt::format(" ({} peer(s) x {} channel(s), {} copying this rank's block{})", streams,
                        nch, copy, check ? ", the call check" : ""));
      }
      cuda_check(launch_direct(t.coll, t.input, t.output, block, t.dtype, t.root, d_comm_, n, r,
                               nch, copy, sig, s),
                 "direct kernel launch");
      return;
    }
    case DevKernel::P2pLl: {
      P2pLlCommon c = p2p_common_;
      const P2pLlBatch& b = pe->batch;
      c.nkeys = int32_t(b.keys.size());
      if (info)
        say(c.nkeys,
            fmt::format(" (one per peer/channel/direction key, {} slice(s))", b.ptr.size()));
      cuda_check(launch_p2p_ll(c, b.keys.data(), b.ptr.data(), b.bytes.data(), b.msg.data(),
                               int(b.ptr.size()), b.threads, s),
                 "LL point-to-point kernel launch");
      return;
    }
    case DevKernel::Plan: break;
  }
  DevPlan& p = pe ? pe->plan : collective_plan(t, s);
  ensure_scratch(p.scratch_bytes);
  KernelArgs a{};
  a.ops = p.d_ops;
  a.chan_ops = p.d_chan;
  a.bufs[0] = const_cast<char*>(static_cast<const char*>(t.input));
  a.bufs[1] = static_cast<char*>(t.output);
  a.bufs[2] = static_cast<char*>(d_scratch_);
  a.comm = d_comm_;
  a.sig = sig;
  a.nranks = c_.nranks;
  a.p2p = t.coll == Coll::SendRecv;
  a.defer_to = may_defer ? p.sends_only_to : -1;
  if (info)
    say(p.nch + check, fmt::format(" ({} channel(s){})", p.nch, check ? " + the call check" : ""));
  cuda_check(launch_plan(a, coll_reduces(t.coll), t.dtype, t.op, p.nch, s), "plan kernel launch");
}

}  // namespace devcomm
}  // namespace mycoll

#endif  // MYCOLL_HAVE_CUDA
