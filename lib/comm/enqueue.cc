#include "comm/enqueue.h"

#include <algorithm>
#include <map>

#include "base/error.h"
#include "base/log.h"
#include "comm/comm.h"
#include "comm/flight_recorder.h"
#include "comm/registry.h"
#include "engine/device_engine.h"
#include "engine/host_engine.h"
#include "engine/host_fast.h"
#include "engine/reduce.h"

namespace mycoll {

struct GroupState;
namespace {

// The calling thread's group state once it started a group, else null. A
// plain pointer with the initial-exec TLS model (see log.cc's tag), so
// every API call reads it with one load. (A thread_local with a destructor,
// as the state itself, is reached through a guard the compiler keeps in the
// default model: a __tls_get_addr call per access from a shared library.)
thread_local GroupState* t_group [[gnu::tls_model("initial-exec")]] = nullptr;

}  // namespace

// Queued calls name their communicator by handle, so group end finds out
// (without touching freed memory) when one was destroyed or aborted since.
// The exclusive pin on the first communicator a call of the open group
// named is held until the group ends: the group's other calls on it skip
// pinning (the small point-to-point group's cost, issue 17), and no other
// thread can use the communicator in between (a communicator takes one
// call at a time, and a group is one call).
struct GroupState {
  int depth = 0;
  std::vector<std::pair<mycollComm_t, Call>> calls;
  CommPin held;
  // The first call of the open group that failed when queued (as NCCL's
  // group error: mycollGroupEnd then returns it and runs nothing).
  mycollResult_t error = mycollSuccess;
  std::string why;
  // Whether the group holds h's pin (the pinned communicator is alive).
  bool holds(mycollComm_t h) const { return h != nullptr && held.get() && held->handle == h; }
  // A thread that ends with a group open: its calls are dropped (the
  // communicators no longer count them as queued) and the pin goes.
  ~GroupState() {
    t_group = nullptr;  // thread-exit code that calls the API after this sees no group
    drop_calls();
  }
  // The queued calls leave without running.
  void drop_calls() {
    for (auto& [h, call] : calls) {
      (void)call;
      if (holds(h)) {
        held->queued.fetch_sub(1, std::memory_order_relaxed);
        continue;
      }
      try {
        CommPin p = pin_comm(h, PinMode::kShared, "thread exit");
        p->queued.fetch_sub(1, std::memory_order_relaxed);
      } catch (...) {
        // destroyed or aborted meanwhile: nothing counts it any more
      }
    }
    calls.clear();
  }
};
namespace {

// Owns the thread's group state (t_group points to it); reached once per
// thread, at its first mycollGroupStart, which registers its destructor.
thread_local GroupState g_group;

std::string rank_str(int r) { return std::to_string(r); }

bool needs_send(const mycollComm* c, const Call& call) {
  switch (call.coll) {
    case Coll::Broadcast:
    case Coll::Scatter: return c->rank == call.root;
    case Coll::SendRecv: return call.is_send;
    default: return true;
  }
}
bool needs_recv(const mycollComm* c, const Call& call) {
  switch (call.coll) {
    case Coll::Reduce:
    case Coll::Gather: return c->rank == call.root;
    case Coll::SendRecv: return !call.is_send;
    default: return true;
  }
}

bool in_place(const mycollComm* c, const Call& call) {
  const char* s = static_cast<const char*>(call.send);
  const char* r = static_cast<const char*>(call.recv);
  size_t blk = call.count * dtype_size(call.dtype);
  switch (call.coll) {
    case Coll::AllGather: return s == r + c->rank * blk;
    case Coll::ReduceScatter: return r == s + c->rank * blk;
    case Coll::Gather: return c->rank == call.root && s == r + call.root * blk;
    case Coll::Scatter: return c->rank == call.root && r == s + call.root * blk;
    default: return s == r;
  }
}

}  // namespace

int group_depth() { return t_group ? t_group->depth : 0; }

GroupState* open_group() {
  GroupState* g = t_group;
  return g && g->depth > 0 ? g : nullptr;
}

mycollComm* group_pinned(const GroupState* g, mycollComm_t h) {
  return g && g->holds(h) ? g->held.get() : nullptr;
}

void group_queue(GroupState* g, mycollComm* comm, const Call& call) {
  g->calls.emplace_back(comm->handle, call);
  comm->queued.fetch_add(1, std::memory_order_relaxed);
}

void group_hold(GroupState* g, CommPin& pin) {
  if (g && !g->held.get()) g->held = std::move(pin);
}

void group_call_failed(GroupState* g, mycollResult_t code, const std::string& why) {
  if (g && g->error == mycollSuccess) {
    g->error = code;
    g->why = why;
  }
}

void group_drop(mycollComm_t h) {
  if (GroupState* g = t_group; g && g->holds(h)) g->held.release();
}

// The group's pin on h, if it holds one (moved out: the caller owns it now).
static CommPin take_group_pin(GroupState& g, mycollComm_t h) {
  return g.holds(h) ? std::move(g.held) : CommPin();
}

// validate_call's message for what arg_fault found.
[[noreturn, gnu::noinline, gnu::cold]] static void throw_arg_fault(ArgFault f, int nranks,
                                                                   const Call& call,
                                                                   const char* fn) {
  switch (f) {
    case ArgFault::kDtype:
      throw_error(mycollInvalidArgument,
                  fmt::format("{}: datatype {} is not a mycollDataType_t (0..{})", fn,
                              int(call.dtype), int(mycollNumTypes) - 1));
    case ArgFault::kOp:
      throw_error(mycollInvalidArgument,
                  fmt::format("{}: op {} is not a mycollRedOp_t (0..4)", fn, int(call.op)));
    case ArgFault::kRoot:
      throw_error(mycollInvalidArgument,
                  fmt::format("{}: root {} is out of range [0, {})", fn, call.root, nranks));
    case ArgFault::kPeer:
      throw_error(mycollInvalidArgument,
                  fmt::format("{}: peer {} is out of range [0, {})", fn, call.peer, nranks));
    case ArgFault::kOverflow:
      throw_error(mycollInvalidArgument,
                  fmt::format("{}: count {} overflows the byte size", fn, call.count));
    default:
      throw_error(mycollInvalidArgument,
                  fmt::format("{}: count {} is larger than any buffer can be", fn, call.count));
  }
}

// Every message is built only when its check fails: this runs on each call.
void validate_call(mycollComm* comm, const Call& call, const char* fn) {
  check_arg(comm != nullptr, [&] { return fmt::format("{}: comm is NULL", fn); });
  check_arg(comm->magic == mycollComm::kMagic,
            [&] { return fmt::format("{}: comm is not a valid communicator (destroyed?)", fn); });
  comm->check_usable();
  const ArgFault fault = arg_fault(comm->nranks, call);
  if (fault != ArgFault::kNone) throw_arg_fault(fault, comm->nranks, call, fn);
  const size_t es = dtype_size(call.dtype);
  if (call.count == 0) return;
  if (needs_send(comm, call))
    check_arg(call.send != nullptr, [&] { return fmt::format("{}: sendbuff is NULL", fn); });
  if (needs_recv(comm, call))
    check_arg(call.recv != nullptr, [&] { return fmt::format("{}: recvbuff is NULL", fn); });
  if (call.coll != Coll::SendRecv && needs_send(comm, call) && needs_recv(comm, call)) {
    // Buffers may be the same (in place) or apart, never partly overlapping:
    // found here, before any data moves.
    const size_t blk = call.count * es, n = static_cast<size_t>(comm->nranks);
    size_t sb = blk, rb = blk;
    switch (call.coll) {
      case Coll::AllGather: rb = blk * n; break;
      case Coll::ReduceScatter: sb = blk * n; break;
      case Coll::AllToAll: sb = rb = blk * n; break;
      case Coll::Scatter: sb = blk * n; break;
      case Coll::Gather: rb = blk * n; break;
      default: break;
    }
    const auto s = reinterpret_cast<uintptr_t>(call.send),
               r = reinterpret_cast<uintptr_t>(call.recv);
    const bool overlap = s < r + rb && r < s + sb;
    check_arg(!overlap || in_place(comm, call), [&] {
      return fmt::format(
          "{}: sendbuff {} ({} bytes) and recvbuff {} ({} bytes) partly overlap "
          "(only the in-place layout is allowed)",
          fn, call.send, sb, call.recv, rb);
    });
  }
  if (cuda_device_count() > 0) {
    // The driver is asked about every buffer on every call, deliberately
    // without a cache keyed by address: a buffer freed and reallocated at
    // the same address can change kind (device <-> host) and nothing tells
    // us, and a wrong answer here means a kernel faulting on a host pointer
    // instead of this clear error. Only the repeat query of an in-place
    // buffer is skipped. Under CUDA graph capture a GPU communicator also
    // takes an address the driver does not know: memory allocated inside
    // the capture (cudaMallocAsync: PyTorch's cudaMallocAsync backend,
    // mycoll's own PreMulSum scratch) is mapped only when the graph is
    // launched, and the driver knows it only then.
    const bool want_dev = comm->cuda_device >= 0;
    auto check_kind = [&](const void* p) {
      bool dev = is_device_pointer(p);
      if (dev != want_dev && !(want_dev && may_be_graph_allocation(p, call.stream)))
        throw_error(mycollInvalidArgument,
                    fmt::format("{}: buffer {} is {} memory but the communicator is {}", fn, p,
                                dev ? "device" : "host",
                                want_dev ? "bound to GPU " + std::to_string(comm->cuda_device)
                                         : std::string("host-only")));
    };
    if (call.send) check_kind(call.send);
    if (call.recv && call.recv != call.send) check_kind(call.recv);
  }
}

// The whole message of a collective call in bytes (all n blocks of the
// blocked collectives): what the algorithm rule is keyed on.
static size_t message_bytes(const mycollComm* c, const Call& call) {
  return call.count * dtype_size(call.dtype) * (coll_is_blocked(call.coll) ? c->nranks : 1);
}

// The pipeline chunk of a call in elements (a broadcast's:
// Config::broadcast_chunk_bytes).
static size_t chunk_count(const mycollComm* c, const Call& call) {
  const size_t bytes =
      call.coll == Coll::Broadcast
          ? c->cfg.broadcast_chunk_bytes(message_bytes(c, call), c->broadcast_big_chunks)
          : c->cfg.chunk_bytes;
  return std::max<size_t>(1, bytes / dtype_size(call.dtype));
}

// The algorithm, chunk and plan of a host collective call, chosen and built.
// Out of line: the cache's hit path below stays small.
[[gnu::noinline]] static CachedPlan build_host_plan(mycollComm* c, const Call& call,
                                                    bool in_place) {
  CachedPlan e;
  e.algo = c->algo.choose(call.coll, c->nranks, message_bytes(c, call));
  e.chunk = chunk_count(c, call);
  CollArgs a;
  a.coll = call.coll;
  a.nranks = c->nranks;
  a.rank = c->rank;
  a.root = call.root;
  a.count = call.count;
  a.chunk = e.chunk;
  a.in_place = in_place;
  a.one_step = call.coll == Coll::AllToAll &&
               c->algo.alltoall_one_step(c->nranks, call.count * dtype_size(call.dtype));
  e.plan = std::make_shared<const Plan>(comm_build_plan(*c, e.algo, a));
  return e;
}

// What a host collective call's plan depends on.
static PlanKey plan_key(const Call& call, bool in_place) {
  return PlanKey{call.coll, call.dtype, in_place, call.root, call.count};
}
// The cached algorithm, chunk and plan of a host collective call (chosen
// and built on the first call with these arguments).
static CachedPlan& host_plan_entry(mycollComm* c, const Call& call, bool in_place) {
  return host_plan_cache(c).get(plan_key(call, in_place),
                                [&] { return build_host_plan(c, call, in_place); });
}

// steps: the host plan's step count (0 for device calls, whose kernel the
// device engine logs). The line out of line: the check stays in the
// caller, which runs it on every call.
[[gnu::noinline]] static void log_collective_line(mycollComm* c, const Call& call, bool in_place,
                                                  Algo algo, size_t steps) {
  log_info(Subsys::Coll, "op {} {} {} count {} {} {} root {} bytes {} algo {}{}", c->op_seq,
           coll_name(call.coll), redop_name(call.op), call.count, dtype_name(call.dtype),
           in_place ? "in-place" : "out-of-place", call.root, message_bytes(c, call),
           algo_name(algo),
           c->device    ? std::string(" (device)")
           : steps == 1 ? std::string(", 1 step")
                        : ", " + std::to_string(steps) + " steps");
}
static inline void log_collective(mycollComm* c, const Call& call, bool in_place, Algo algo,
                                  size_t steps) {
  if (log_enabled(LogLevel::Info, Subsys::Coll))
    log_collective_line(c, call, in_place, algo, steps);
}

// Fills *t (a default Task) for the call.
static void make_collective_task(mycollComm* c, const Call& call, Task* tp) {
  Task& t = *tp;
  t.coll = call.coll;
  t.dtype = call.dtype;
  t.op = call.op;
  t.input = call.send;
  t.output = call.recv;
  t.count = call.count;
  t.root = call.root;
  t.in_place = in_place(c, call);
  if (!c->device) {
    const CachedPlan& e = host_plan_entry(c, call, t.in_place);
    t.algo = e.algo;
    t.chunk = e.chunk;
    t.cached_plan = e.plan;
  } else {
    t.algo = c->device->choose_algo(c->algo, call.coll, message_bytes(c, call));
    t.chunk = chunk_count(c, call);
  }
  log_collective(c, call, t.in_place, t.algo, t.cached_plan ? t.cached_plan->steps.size() : 0);
  t.seq = c->op_seq++;
  t.coll_seq = c->coll_seq++;
  if (c->flight) c->flight->enqueued(t, t.seq, c->device != nullptr);
}

static Task make_collective_task(mycollComm* c, const Call& call) {
  LogScope scope(&c->log_tag);  // a group may span communicators
  Task t;
  make_collective_task(c, call, &t);
  return t;
}

// One task holding every send/recv of a group on one communicator, all in
// flight at once (deadlock-free whatever order ranks posted them in).
// Slices address memory absolutely: dtype Uint8, base pointers NULL,
// offsets = addresses. Sends to self are paired with receives from self.
static Task make_p2p_task(mycollComm* c, const std::vector<Call>& calls) {
  LogScope scope(&c->log_tag);  // a group may span communicators
  Task t;
  t.coll = Coll::SendRecv;
  t.algo = Algo::Direct;
  t.dtype = mycollUint8;
  Step step;
  std::vector<const Call*> self_sends, self_recvs;
  for (const Call* p = calls.data(); p != calls.data() + calls.size(); ++p) {
    const Call& call = *p;
    size_t bytes = call.count * dtype_size(call.dtype);
    if (bytes == 0) continue;
    if (call.peer == c->rank) {
      (call.is_send ? self_sends : self_recvs).push_back(p);
      continue;
    }
    Op op;
    op.peer = call.peer;
    if (call.is_send) {
      op.kind = OpKind::Send;
      op.src = Slice{Buf::Input, reinterpret_cast<uintptr_t>(call.send), bytes};
    } else {
      op.kind = OpKind::Recv;
      op.dst = Slice{Buf::Output, reinterpret_cast<uintptr_t>(call.recv), bytes};
    }
    step.ops.push_back(op);
    t.count += bytes;
  }
  if (self_sends.size() != self_recvs.size())
    throw_error(mycollInvalidUsage,
                "rank " + rank_str(c->rank) + ": " + std::to_string(self_sends.size()) +
                    " send(s) to self but " + std::to_string(self_recvs.size()) +
                    " receive(s) from self in one group; they must pair up");
  std::vector<Op> copies;
  for (size_t i = 0; i < self_sends.size(); ++i) {
    size_t sb = self_sends[i]->count * dtype_size(self_sends[i]->dtype);
    size_t rb = self_recvs[i]->count * dtype_size(self_recvs[i]->dtype);
    if (sb != rb)
      throw_error(mycollInvalidUsage, "rank " + rank_str(c->rank) + ": send to self of " +
                                          std::to_string(sb) + " bytes paired with a receive of " +
                                          std::to_string(rb) + " bytes");
    Op op;
    op.kind = OpKind::Copy;
    op.src = Slice{Buf::Input, reinterpret_cast<uintptr_t>(self_sends[i]->send), sb};
    op.dst = Slice{Buf::Output, reinterpret_cast<uintptr_t>(self_recvs[i]->recv), rb};
    copies.push_back(op);
  }
  step.ops.insert(step.ops.begin(), copies.begin(), copies.end());
  if (!step.ops.empty()) t.plan.steps.push_back(std::move(step));
  log_info(Subsys::Coll, "op {} p2p batch of {} call(s), {} bytes", c->op_seq, calls.size(),
           t.count);
  t.seq = c->op_seq++;
  if (c->flight) c->flight->enqueued(t, t.seq, c->device != nullptr);
  return t;
}

// enqueue_device's launches; tried[i]: work[i]'s launch was begun.
static void launch_group(std::vector<HostWork>& work, const std::vector<mycollStream_t>& streams,
                         std::vector<bool>& tried) {
  std::vector<bool> done(work.size(), false);
  for (size_t i = 0; i < work.size(); ++i) {
    if (done[i]) continue;
    std::vector<size_t> same{i};
    for (size_t j = i + 1; j < work.size(); ++j)
      if (!done[j] && streams[j] == streams[i] && work[j].comm->id == work[i].comm->id &&
          work[j].comm->device->device() == work[i].comm->device->device())
        same.push_back(j);
    for (size_t k : same) done[k] = true;
    if (same.size() == 1) {
      LogScope scope(&work[i].comm->log_tag);  // a group may span communicators
      tried[i] = true;
      work[i].comm->device->enqueue(work[i].tasks, streams[i]);
      continue;
    }
    if (log_enabled(LogLevel::Info, Subsys::Coll)) {
      LogScope scope(&work[i].comm->log_tag);
      log_info(Subsys::Coll,
               "{} ranks of this communicator on GPU {} name one stream in this group: each runs "
               "on a side stream forked from it and joined back",
               same.size(), work[i].comm->device->device());
    }
    for (size_t k : same) work[k].comm->device->fork(streams[k]);
    std::exception_ptr err;
    std::vector<size_t> forked;
    for (size_t k : same) {
      try {
        LogScope scope(&work[k].comm->log_tag);
        tried[k] = true;
        work[k].comm->device->enqueue_beside(work[k].tasks);
        forked.push_back(k);
      } catch (...) {
        err = std::current_exception();
        break;
      }
    }
    for (size_t k : forked) {
      try {
        work[k].comm->device->join(streams[k]);
      } catch (...) {
        if (!err) err = std::current_exception();
      }
    }
    if (err) std::rethrow_exception(err);
  }
}

// Enqueues the device work of a group in group order, each communicator's
// tasks on its stream, except where several ranks of one communicator
// (driven by this thread, on one GPU) name the same stream: on it each
// rank's kernel would wait behind another's that it waits for, so they run
// side by side, each on a side stream forked from that stream and joined
// back (DeviceComm::fork); their grids are sized to be resident together.
// Different communicators on one stream keep its order: kernels of two
// communicators need not fit the GPU together, and run concurrently they
// could start in another order in another process. The first failure stops
// the group's enqueues; side streams already forked are joined again before
// it is rethrown, and every communicator whose calls were not launched
// fails (no peer waits for them).
static void enqueue_device(std::vector<HostWork>& work,
                           const std::vector<mycollStream_t>& streams) {
  // Every stream first: a stream of the wrong GPU refused after another
  // rank's kernel was launched would leave that kernel waiting for this one.
  for (size_t i = 0; i < work.size(); ++i) {
    LogScope scope(&work[i].comm->log_tag);
    work[i].comm->device->check_stream(streams[i]);
  }
  // A launch that fails fails its communicator (DeviceComm::enqueue); the
  // calls of this group not tried yet fail theirs too (they have taken
  // their sequence numbers, and their peers' kernels would wait for them).
  std::vector<bool> tried(work.size(), false);
  try {
    launch_group(work, streams, tried);
  } catch (const Error& e) {
    for (size_t i = 0; i < work.size(); ++i)
      if (!tried[i] && !work[i].tasks.empty()) {
        LogScope scope(&work[i].comm->log_tag);
        work[i].comm->device->launch_failed(
            &work[i].tasks.front(), e.code(),
            std::string("another launch of its group failed first: ") + e.what());
      }
    throw;
  }
}

// Executes calls grouped by communicator: each communicator's point-to-point
// calls as one batch first, then its collectives in order.
static void execute(std::vector<std::pair<mycollComm*, Call>>& calls) {
  std::vector<mycollComm*> order;
  std::map<mycollComm*, std::vector<Call>> p2p, colls;
  for (auto& [c, call] : calls) {
    if (!p2p.count(c) && !colls.count(c)) order.push_back(c);
    (call.coll == Coll::SendRecv ? p2p[c] : colls[c]).push_back(call);
    (void)colls[c];
  }
  std::vector<HostWork> host, device;
  std::vector<mycollStream_t> device_streams;
  std::exception_ptr err;
  for (mycollComm* c : order) {
    HostWork w;
    w.comm = c;
    mycollStream_t stream = nullptr;
    try {
      if (!p2p[c].empty()) {
        w.tasks.push_back(make_p2p_task(c, p2p[c]));
        stream = p2p[c].front().stream;
      }
      for (const Call& call : colls[c]) {
        if (call.count == 0) continue;
        w.tasks.push_back(make_collective_task(c, call));
        stream = call.stream;
      }
    } catch (...) {
      if (!err) err = std::current_exception();
      continue;
    }
    if (w.tasks.empty()) continue;
    if (c->device) {
      device.push_back(std::move(w));
      device_streams.push_back(stream);
      continue;
    }
    if (stream) stream_synchronize(stream);
    host.push_back(std::move(w));
  }
  if (!device.empty()) enqueue_device(device, device_streams);
  if (!host.empty()) run_host(host);
  if (err) std::rethrow_exception(err);
}

// The last GPU collective this thread issued outside a group (its
// identity only: the communicator may be gone since).
struct LastDeviceCollective {
  uint64_t comm_id = 0;
  int rank = -1;
  mycollStream_t stream = nullptr;
  uint64_t coll_seq = 0;
  bool waits_for_all = false;  // its kernel receives from every other rank
};

// Per-thread call state: task lists reused by every call (cleared, never
// shrunk), so that a GPU collective outside a group allocates nothing once
// warm, and the last GPU collective issued outside a group.
struct CallScratch {
  std::vector<Task> tasks;
  std::vector<HostWork> host;
  LastDeviceCollective last_device;
};
thread_local CallScratch t_scratch;

// One thread driving several ranks of a communicator outside a group, on
// one stream: rank a's call k, then rank b's call k on that stream. a's
// kernel waits for b's, which the stream queues behind it, so neither
// would ever run to the end (until MYCOLL_TIMEOUT). Refused at b's call.
static void check_not_queued_behind_peer(const mycollComm* c, const Call& call,
                                         const LastDeviceCollective& l) {
  if (!l.waits_for_all || l.comm_id != c->id || l.rank == c->rank || l.stream != call.stream ||
      l.coll_seq != c->coll_seq)
    return;
  const std::string me =
      "rank " + std::to_string(c->rank) + "'s collective " + std::to_string(c->coll_seq);
  const std::string other = "rank " + std::to_string(l.rank) + "'s";
  throw_error(mycollInvalidUsage,
              me + " goes on the stream where this thread just issued " + other +
                  ", outside a group: that one waits for this one, which the stream would "
                  "queue behind it. Issue the ranks' calls in one group (mycollGroupStart / "
                  "mycollGroupEnd, ncclGroupStart / ncclGroupEnd; they may share a stream "
                  "there), or give each rank its own stream");
}

// A collective outside a group on a GPU communicator.
[[gnu::noinline]] static void execute_on_device(mycollComm* c, const Call& call) {
  CallScratch& scratch = t_scratch;
  check_not_queued_behind_peer(c, call, scratch.last_device);
  c->device->check_stream(call.stream);  // before the call takes a sequence number
  std::vector<Task>& tasks = scratch.tasks;
  tasks.clear();
  tasks.push_back(make_collective_task(c, call));
  c->device->enqueue(tasks, call.stream);
  const Coll k = call.coll;
  scratch.last_device = {c->id, c->rank, call.stream, tasks.back().coll_seq,
                         c->nranks > 1 && (k == Coll::AllReduce || k == Coll::AllGather ||
                                           k == Coll::ReduceScatter || k == Coll::AllToAll)};
}

// A host collective outside a group on the general loop.
[[gnu::noinline]] static void execute_on_host(mycollComm* c, const Call& call) {
  std::vector<HostWork>& host = t_scratch.host;
  host.resize(1);
  host[0].comm = c;
  host[0].tasks.clear();
  host[0].tasks.emplace_back();
  make_collective_task(c, call, &host[0].tasks.back());
  if (call.stream) stream_synchronize(call.stream);
  run_host(host);
  host[0].tasks.clear();  // the plan's memory; the list's capacity stays
}

// A host collective on its plan's small-message path (e.fast).
static void run_fast_entry(mycollComm* c, const Call& call, bool ip, const CachedPlan& e) {
  log_collective(c, call, ip, e.algo, e.plan->steps.size());
  FastCall fc;
  fc.input = call.send;
  fc.output = call.recv;
  fc.op = call.op;
  fc.coll_seq = c->coll_seq++;
  ++c->op_seq;
  if (call.stream) stream_synchronize(call.stream);
  run_fast(c, *e.fast, fc);
}

// The small-message path is off while the flight recorder or TRACE lines
// want the general loop's records.
static bool fast_path_allowed(const mycollComm* c) {
  return !c->flight && !log_enabled(LogLevel::Trace, Subsys::Coll);
}

// The common case: one collective outside a group (the API entry point set
// the communicator's log scope and checked the call). Same order of work as
// execute() for a single call: task, then stream, then the engine. A host
// collective whose messages all fit shm records takes the small-message
// path (host_fast.h), and is remembered for submit_repeat where no GPU is
// visible (with one, validate_call asks the driver about the buffers on
// every call, which a repeat must not skip).
static void execute_collective(mycollComm* c, const Call& call) {
  if (call.count == 0) return;
  if (c->device) return execute_on_device(c, call);
  const bool ip = in_place(c, call);
  CachedPlan& e = host_plan_entry(c, call, ip);
  if (fast_path_allowed(c)) {
    if (!e.fast_tried) {
      e.fast = compile_fast(c, *e.plan, call.coll, e.algo, call.dtype, call.count, call.root, ip);
      e.fast_tried = true;
    }
    if (e.fast) {
      run_fast_entry(c, call, ip, e);
      if (cuda_device_count() == 0) {
        RepeatCall& r = host_plan_cache(c).repeat;
        r.entry = &e;
        r.key = plan_key(call, ip);
        r.send = call.send, r.recv = call.recv, r.stream = call.stream, r.op = call.op;
      }
      return;
    }
  }
  execute_on_host(c, call);
}

bool submit_repeat(mycollComm* c, const Call& call) {
  if (c->device) return false;
  const RepeatCall& r = host_plan_cache(c).repeat;
  // Point-to-point calls never match: r.coll is a collective's.
  if (!r.entry || call.send != r.send || call.recv != r.recv || call.stream != r.stream ||
      call.op != r.op || !(plan_key(call, r.key.in_place) == r.key) || !fast_path_allowed(c))
    return false;
  c->check_usable();  // the one check whose answer can change between calls
  run_fast_entry(c, call, r.key.in_place, *r.entry);
  return true;
}

// A point-to-point batch of one host communicator on the small-message
// path (host_fast.h), when the flight recorder and TRACE lines are off and
// every message fits a record. Returns false, having done nothing, when it
// does not qualify. calls[i].coll must all be SendRecv.
template <typename GetCall>
static bool try_fast_p2p(mycollComm* c, size_t n, GetCall&& call_at) {
  if (c->device || c->flight || log_enabled(LogLevel::Trace, Subsys::Coll)) return false;
  std::vector<P2pMsg>& msgs = host_p2p_msgs(c);
  msgs.resize(n);
  size_t bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    const Call& call = call_at(i);
    P2pMsg& m = msgs[i];
    m.is_send = call.is_send;
    m.peer = call.peer;
    m.buf = call.is_send ? const_cast<void*>(call.send) : call.recv;
    m.bytes = call.count * dtype_size(call.dtype);
    bytes += m.bytes;
  }
  // Streams as the general path: the first call's (every call of a batch
  // names the same one or none on host communicators). Before the plan,
  // which takes the batch's message numbers: nothing may fail between them
  // and the run.
  if (mycollStream_t s = call_at(0).stream) stream_synchronize(s);
  const FastPlan* plan = prepare_fast_p2p(c, msgs.data(), msgs.size());
  if (!plan) return false;
  if (log_enabled(LogLevel::Info, Subsys::Coll))
    log_info(Subsys::Coll, "op {} p2p batch of {} call(s), {} bytes", c->op_seq, n, bytes);
  ++c->op_seq;
  run_fast_p2p(c, *plan);
  return true;
}

void submit(mycollComm* comm, const Call& call) {
  if (GroupState* g = open_group()) return group_queue(g, comm, call);
  submit_now(comm, call);
}

void submit_now(mycollComm* comm, const Call& call) {
  if (call.coll != Coll::SendRecv) return execute_collective(comm, call);
  if (try_fast_p2p(comm, 1, [&](size_t) -> const Call& { return call; })) return;
  std::vector<std::pair<mycollComm*, Call>> one{{comm, call}};
  execute(one);
}

// A group whose calls are all point-to-point on one communicator, when
// try_fast_p2p takes it. Returns false, having changed nothing, otherwise.
static bool try_fast_p2p_group(GroupState& g) {
  std::vector<std::pair<mycollComm_t, Call>>& queued = g.calls;
  const mycollComm_t h = queued.front().first;
  for (const auto& q : queued)
    if (q.first != h || q.second.coll != Coll::SendRecv) return false;
  if (!g.holds(h)) return false;  // the general path pins (and reports)
  mycollComm* c = g.held.get();
  try {
    if (!try_fast_p2p(c, queued.size(), [&](size_t i) -> const Call& { return queued[i].second; }))
      return false;
  } catch (const Error& e) {
    c->queued.fetch_sub(static_cast<int>(queued.size()), std::memory_order_relaxed);
    queued.clear();
    std::lock_guard<std::mutex> lk(c->err_mu);
    c->last_error =
        std::string("mycollGroupEnd: ") + mycollGetErrorString(e.code()) + ": " + e.what();
    throw;
  }
  c->queued.fetch_sub(static_cast<int>(queued.size()), std::memory_order_relaxed);
  queued.clear();
  return true;
}

void group_start() {
  if (!t_group) t_group = &g_group;
  ++t_group->depth;
}

// Pins every communicator of the group exclusively (one destroyed, aborted
// or busy in another thread fails the whole group before anything moves),
// runs the calls, and on failure records the reason on every communicator
// of the group (mycollGetLastError(comm) then holds it).
void group_end() {
  if (!t_group || t_group->depth == 0)
    throw_error(mycollInvalidUsage, "mycollGroupEnd without a matching mycollGroupStart");
  GroupState& g = *t_group;
  if (--g.depth > 0) return;
  // The group's pin goes when this function returns, whatever happens.
  struct Drop {
    GroupState& g;
    ~Drop() { g.held.release(); }
  } drop{g};
  if (g.error != mycollSuccess) {
    const mycollResult_t code = g.error;
    const std::string msg = "mycollGroupEnd: a call of this group failed, so none of its " +
                            std::to_string(g.calls.size()) + " queued call(s) ran: " + g.why;
    g.error = mycollSuccess;
    g.why.clear();
    g.drop_calls();
    throw_error(code, msg);
  }
  if (!g.calls.empty() && try_fast_p2p_group(g)) return;
  auto queued = std::move(g.calls);
  g.calls.clear();
  std::vector<mycollComm_t> handles;
  std::vector<CommPin> pins;
  std::exception_ptr pin_error;
  for (auto& [h, call] : queued) {
    if (std::find(handles.begin(), handles.end(), h) != handles.end()) continue;
    handles.push_back(h);
    if (CommPin held = take_group_pin(g, h); held.get()) {
      pins.push_back(std::move(held));
      continue;
    }
    try {
      pins.push_back(pin_comm(h, PinMode::kExclusive, "mycollGroupEnd"));
    } catch (...) {
      if (!pin_error) pin_error = std::current_exception();
    }
  }
  std::vector<std::pair<mycollComm*, Call>> calls;
  for (auto& [h, call] : queued) {
    for (CommPin& p : pins) {
      if (p->handle != h) continue;
      p->queued.fetch_sub(1, std::memory_order_relaxed);
      calls.emplace_back(p.get(), call);
    }
  }
  try {
    if (pin_error) std::rethrow_exception(pin_error);
    execute(calls);
  } catch (const Error& e) {
    std::string msg =
        std::string("mycollGroupEnd: ") + mycollGetErrorString(e.code()) + ": " + e.what();
    for (CommPin& p : pins) {
      std::lock_guard<std::mutex> g(p->err_mu);
      p->last_error = msg;
    }
    throw;
  }
}

}  // namespace mycoll
