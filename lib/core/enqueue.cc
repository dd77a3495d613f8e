#include "core/enqueue.h"

#include <algorithm>
#include <map>

#include "core/comm.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/device_engine.h"
#include "engine/host_engine.h"
#include "engine/reduce.h"

namespace mycoll {
namespace {

struct GroupState {
  int depth = 0;
  std::vector<std::pair<mycollComm*, Call>> calls;
};
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

bool is_blocked(Coll c) {
  return c == Coll::AllGather || c == Coll::ReduceScatter || c == Coll::AllToAll ||
         c == Coll::Scatter || c == Coll::Gather;
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

int group_depth() { return g_group.depth; }

void validate_call(mycollComm* comm, const Call& call, const char* fn) {
  std::string f = fn;
  check_arg(comm != nullptr, f + ": comm is NULL");
  check_arg(comm->magic == mycollComm::kMagic, f + ": comm is not a valid communicator (destroyed?)");
  comm->check_usable();
  check_arg(call.dtype >= 0 && call.dtype < mycollNumTypes,
            f + ": datatype " + std::to_string(call.dtype) + " is not a mycollDataType_t (0..9)");
  if (call.coll == Coll::AllReduce || call.coll == Coll::Reduce || call.coll == Coll::ReduceScatter)
    check_arg(call.op >= 0 && call.op < mycollNumOps,
              f + ": op " + std::to_string(call.op) + " is not a mycollRedOp_t (0..4)");
  if (call.coll == Coll::Broadcast || call.coll == Coll::Reduce || call.coll == Coll::Scatter ||
      call.coll == Coll::Gather)
    check_arg(call.root >= 0 && call.root < comm->nranks,
              f + ": root " + std::to_string(call.root) + " is out of range [0, " +
                  std::to_string(comm->nranks) + ")");
  if (call.coll == Coll::SendRecv)
    check_arg(call.peer >= 0 && call.peer < comm->nranks,
              f + ": peer " + std::to_string(call.peer) + " is out of range [0, " +
                  std::to_string(comm->nranks) + ")");
  const size_t es = dtype_size(call.dtype);
  size_t blocks = is_blocked(call.coll) ? static_cast<size_t>(comm->nranks) : 1;
  check_arg(call.count <= SIZE_MAX / es / blocks,
            f + ": count " + std::to_string(call.count) + " overflows the byte size");
  check_arg(call.count <= (size_t(1) << 56) / es / blocks,
            f + ": count " + std::to_string(call.count) + " is larger than any buffer can be");
  if (call.count == 0) return;
  if (needs_send(comm, call)) check_arg(call.send != nullptr, f + ": sendbuff is NULL");
  if (needs_recv(comm, call)) check_arg(call.recv != nullptr, f + ": recvbuff is NULL");
  if (cuda_device_count() > 0) {
    const bool want_dev = comm->cuda_device >= 0;
    for (const void* p : {call.send, static_cast<const void*>(call.recv)}) {
      if (!p) continue;
      bool dev = is_device_pointer(p);
      if (dev != want_dev)
        throw_error(mycollInvalidArgument,
                    f + ": buffer " + fmt::format("{}", p) + " is " + (dev ? "device" : "host") +
                        " memory but the communicator is " +
                        (want_dev ? "bound to GPU " + std::to_string(comm->cuda_device)
                                  : std::string("host-only")));
    }
  }
}

static Task make_collective_task(mycollComm* c, const Call& call) {
  Task t;
  t.coll = call.coll;
  t.dtype = call.dtype;
  t.op = call.op;
  t.input = call.send;
  t.output = call.recv;
  t.count = call.count;
  t.root = call.root;
  const size_t es = dtype_size(call.dtype);
  size_t bytes = call.count * es * (is_blocked(call.coll) ? c->nranks : 1);
  t.algo = c->algo.choose(call.coll, c->nranks, bytes);
  t.chunk = std::max<size_t>(1, c->cfg.chunk_bytes / es);
  t.in_place = in_place(c, call);
  if (!c->device) t.plan = comm_build_plan(*c, t.algo, t.args(c->nranks, c->rank));
  log_info(Subsys::Coll, "rank {} op {} {} {} count {} {} {} root {} bytes {} algo {}{}", c->rank,
           c->op_seq, coll_name(call.coll), redop_name(call.op), call.count,
           dtype_name(call.dtype), t.in_place ? "in-place" : "out-of-place", call.root, bytes,
           algo_name(t.algo), c->device ? " (device)" : "");
  ++c->op_seq;
  return t;
}

// One task holding every send/recv of a group on one communicator, all in
// flight at once (deadlock-free whatever order ranks posted them in).
// Slices address memory absolutely: dtype Uint8, base pointers NULL,
// offsets = addresses. Sends to self are paired with receives from self.
static Task make_p2p_task(mycollComm* c, const std::vector<Call>& calls) {
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
    throw_error(mycollInvalidUsage, "rank " + rank_str(c->rank) + ": " +
                                        std::to_string(self_sends.size()) + " send(s) to self but " +
                                        std::to_string(self_recvs.size()) +
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
  log_info(Subsys::Coll, "rank {} p2p batch of {} call(s), {} bytes", c->rank, calls.size(), t.count);
  return t;
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
  std::vector<HostWork> host;
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
      c->device->enqueue(w.tasks, stream);
      continue;
    }
    if (stream) stream_synchronize(stream);
    host.push_back(std::move(w));
  }
  if (!host.empty()) run_host(host);
  if (err) std::rethrow_exception(err);
}

void submit(mycollComm* comm, const Call& call) {
  if (g_group.depth > 0) {
    g_group.calls.emplace_back(comm, call);
    return;
  }
  std::vector<std::pair<mycollComm*, Call>> one{{comm, call}};
  execute(one);
}

void group_start() { ++g_group.depth; }

void group_end() {
  if (g_group.depth == 0)
    throw_error(mycollInvalidUsage, "mycollGroupEnd without a matching mycollGroupStart");
  if (--g_group.depth > 0) return;
  auto calls = std::move(g_group.calls);
  g_group.calls.clear();
  execute(calls);
}

}  // namespace mycoll
