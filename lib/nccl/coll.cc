// Collectives, point-to-point, groups, PreMulSum and ncclGroupSimulateEnd.
//
// Calls map one to one onto mycoll's. Inside ncclGroupStart/End the calls
// are checked at once (errors name the nccl function) and queued here; the
// outermost ncclGroupEnd replays them between mycollGroupStart/End, so
// ncclGroupSimulateEnd can estimate and drop a group without running it.
//
// PreMulSum (sum of scalar x input): the input is multiplied into scratch
// owned by the call (host: the communicator's buffer, grown, or one per
// grouped call; GPU: stream-ordered, from the library's own pool), then
// mycoll sums the scratch into the output, so in-place calls, reduce-scatter
// and reduce with a NULL non-root output all work unchanged.
#include <cstring>
#include <mutex>
#include <vector>

#include "base/dtype.h"
#include "base/log.h"
#include "comm/comm.h"
#include "comm/enqueue.h"
#include "engine/device_engine.h"
#include "engine/reduce.h"  // premul_host
#include "nccl/shim.h"

#if MYCOLL_HAVE_CUDA
#include <cuda_runtime.h>

#include "engine/cuda_scope.h"
#include "kernels/launch.h"
#endif

using namespace mycoll;
using namespace mycoll::nccl;

namespace {

enum class Kind {
  AllReduce,
  Broadcast,
  Reduce,
  AllGather,
  ReduceScatter,
  AllToAll,
  Gather,
  Scatter,
  Send,
  Recv
};

struct NcclCall {
  Kind kind;
  const char* fn;
  ncclComm* comm;
  const void* send;
  void* recv;
  size_t count;
  int dtype;  // as the caller passed them (enum_arg)
  int op;
  int root;
  int peer;
  cudaStream_t stream;
  PreMul pm;
};

Coll coll_of(Kind k) {
  switch (k) {
    case Kind::AllReduce: return Coll::AllReduce;
    case Kind::Broadcast: return Coll::Broadcast;
    case Kind::Reduce: return Coll::Reduce;
    case Kind::AllGather: return Coll::AllGather;
    case Kind::ReduceScatter: return Coll::ReduceScatter;
    case Kind::AllToAll: return Coll::AllToAll;
    case Kind::Gather: return Coll::Gather;
    case Kind::Scatter: return Coll::Scatter;
    case Kind::Send:
    case Kind::Recv: break;
  }
  return Coll::SendRecv;
}

bool reduces(Kind k) { return coll_reduces(coll_of(k)); }

#if MYCOLL_HAVE_CUDA
// PreMulSum scratch on GPUs comes from a pool of the library's own per
// device, never the device's default pool: the default pool lets an
// allocation on one stream reuse memory freed on another by making the first
// stream wait for the second (cudaMemPoolReuseAllowInternalDependencies);
// with collectives on both streams (FSDP's all-gather and reduce-scatter
// streams) that wait can close a cycle across ranks. Here reuse happens only
// once the free has completed, and freed memory stays in the pool.
// `dev` is the communicator's GPU, whose streams its calls take (the
// stream is not asked: CUDA forbids that on a capturing stream).
cudaMemPool_t premul_pool(int dev) {
  static std::mutex mu;
  static std::vector<std::pair<int, cudaMemPool_t>> pools;
  std::lock_guard<std::mutex> g(mu);
  for (auto& [d, p] : pools)
    if (d == dev) return p;
  RelaxedCapture relaxed;  // the first PreMulSum may come under graph capture
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = dev;
  cudaMemPool_t pool = nullptr;
  cudaError_t e = cudaMemPoolCreate(&pool, &props);
  if (e != cudaSuccess)
    throw_error(mycollUnhandledCudaError,
                std::string("PreMulSum scratch pool: cudaMemPoolCreate: ") + cudaGetErrorString(e));
  int no = 0;
  cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowInternalDependencies, &no);
  uint64_t keep = UINT64_MAX;
  cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
  pools.emplace_back(dev, pool);
  return pool;
}
#endif

// Scratch of PreMulSum calls, released once mycoll has consumed it.
struct Scratch {
  std::vector<std::vector<char>> host;
  std::vector<std::pair<void*, cudaStream_t>> dev;
  void release() {
#if MYCOLL_HAVE_CUDA
    for (auto& [p, s] : dev) cudaFreeAsync(p, s);
#endif
    dev.clear();
    host.clear();
  }
  ~Scratch() { release(); }
};

struct GroupState {
  int depth = 0;
  std::vector<NcclCall> calls;
  std::vector<ncclComm*> inits;  // communicators whose init runs until the group ends
};
thread_local GroupState g_group;

Call to_mycoll(const NcclCall& c) {
  Call m;
  m.coll = coll_of(c.kind);
  m.send = c.send;
  m.recv = c.recv;
  m.count = c.count;
  m.dtype = static_cast<mycollDataType_t>(c.dtype);
  m.op = c.pm.active ? mycollSum : static_cast<mycollRedOp_t>(c.op);
  m.root = c.root;
  m.peer = c.peer;
  m.is_send = c.kind == Kind::Send;
  m.stream = reinterpret_cast<mycollStream_t>(c.stream);
  return m;
}

// The PreMulSum scalar as one element's bytes, for a host communicator.
uint64_t host_scalar(const PreMul& pm, size_t es) {
  if (!pm.on_device) return pm.bits;
  uint64_t bits = 0;
#if MYCOLL_HAVE_CUDA
  if (is_device_pointer(pm.scalar)) {
    cudaError_t e = cudaMemcpy(&bits, pm.scalar, es, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess)
      throw_error(mycollUnhandledCudaError,
                  std::string("reading the PreMulSum scalar: ") + cudaGetErrorString(e));
    return bits;
  }
#endif
  std::memcpy(&bits, pm.scalar, es);  // ncclScalarDevice on a host communicator: host memory
  return bits;
}

// Multiplies the call's input by its scalar into scratch; returns the scratch.
const void* premultiply(const NcclCall& c, mycollComm_t handle, Scratch& keep, bool own_buffer) {
  CommPin mc = pin_comm(handle, PinMode::kShared, "premultiply");
  const auto t = static_cast<mycollDataType_t>(c.dtype);
  const size_t es = dtype_size(t);
  // The input's elements (PreMulSum serves the reducing collectives).
  const size_t n = coll_input_blocked(coll_of(c.kind)) ? c.count * size_t(mc->nranks) : c.count;
  if (n == 0 || !c.send) return c.send;
  if (mc->cuda_device >= 0) {
#if MYCOLL_HAVE_CUDA
    OnDevice on(mc->cuda_device);  // the scaling kernel goes to the communicator's GPU
    void* p = nullptr;
    cudaError_t e = cudaMallocFromPoolAsync(&p, n * es, premul_pool(mc->cuda_device), c.stream);
    if (e == cudaSuccess) {
      keep.dev.emplace_back(p, c.stream);
      e = launch_premul(t, p, c.send, n, c.pm.on_device ? c.pm.scalar : nullptr, c.pm.bits,
                        c.stream);
    }
    if (e != cudaSuccess)
      throw_error(mycollUnhandledCudaError,
                  std::string(c.fn) + ": PreMulSum scaling pass: " + cudaGetErrorString(e));
    return p;
#else
    throw_error(mycollInvalidUsage, "PreMulSum on a GPU communicator needs a CUDA build");
#endif
  }
  if (c.stream) stream_synchronize(reinterpret_cast<mycollStream_t>(c.stream));
  const uint64_t scalar = host_scalar(c.pm, es);
  char* dst;
  if (own_buffer) {
    keep.host.emplace_back(n * es);
    dst = keep.host.back().data();
  } else {
    std::vector<char>& s = c.comm->host_scratch;
    if (s.size() < n * es) s.resize(n * es);
    dst = s.data();
  }
  premul_host(t, dst, c.send, n, &scalar);
  return dst;
}

// Runs one call through mycoll's C API (queued there when a mycoll group is open).
void run(const NcclCall& c, Scratch& keep, bool in_mycoll_group) {
  mycollComm_t mc = c.comm->mc.load();
  const auto t = static_cast<mycollDataType_t>(c.dtype);
  const auto s = reinterpret_cast<mycollStream_t>(c.stream);
  const mycollRedOp_t op = c.pm.active ? mycollSum : static_cast<mycollRedOp_t>(c.op);
  const void* send = c.pm.active ? premultiply(c, mc, keep, in_mycoll_group) : c.send;
  mycollResult_t r = mycollSuccess;
  switch (c.kind) {
    case Kind::AllReduce: r = mycollAllReduce(send, c.recv, c.count, t, op, mc, s); break;
    case Kind::Broadcast: r = mycollBroadcast(send, c.recv, c.count, t, c.root, mc, s); break;
    case Kind::Reduce: r = mycollReduce(send, c.recv, c.count, t, op, c.root, mc, s); break;
    case Kind::AllGather: r = mycollAllGather(send, c.recv, c.count, t, mc, s); break;
    case Kind::ReduceScatter: r = mycollReduceScatter(send, c.recv, c.count, t, op, mc, s); break;
    case Kind::AllToAll: r = mycollAllToAll(send, c.recv, c.count, t, mc, s); break;
    case Kind::Gather: r = mycollGather(send, c.recv, c.count, t, c.root, mc, s); break;
    case Kind::Scatter: r = mycollScatter(send, c.recv, c.count, t, c.root, mc, s); break;
    case Kind::Send: r = mycollSend(send, c.count, t, c.peer, mc, s); break;
    case Kind::Recv: r = mycollRecv(c.recv, c.count, t, c.peer, mc, s); break;
  }
  check_mycoll(r, mc, c.fn);
}

ncclResult_t submit(NcclCall c) {
  return guarded(c.comm, c.fn, [&] {
    mycollComm_t mc = ready_comm(c.comm, c.fn);
    if (reduces(c.kind)) c.pm = resolve_op(c.comm, c.op, c.dtype, c.fn);
    if (g_group.depth > 0) {
      CommPin pinned = pin_comm(mc, PinMode::kShared, c.fn);  // the handle is a registry code
      validate_call(pinned.get(), to_mycoll(c), c.fn);
      g_group.calls.push_back(c);
      return ncclSuccess;
    }
    Scratch keep;
    run(c, keep, false);
    return ncclSuccess;
  });
}

// ncclGroupSimulateEnd's model, in microseconds: a ring's steps x a
// per-step latency plus the bytes each rank moves over one link's
// bandwidth (GPU communicators: NVLink-class numbers; host: shared memory).
double estimate_us(const NcclCall& c) {
  CommPin mc = pin_comm(c.comm->mc.load(), PinMode::kShared, "ncclGroupSimulateEnd");
  const double n = mc->nranks;
  const bool gpu = mc->cuda_device >= 0;
  const double alpha_us = gpu ? 6.0 : 8.0;
  const double bytes_per_us = gpu ? 100e3 : 5e3;  // 100 GB/s, 5 GB/s
  const double b = double(c.count) * double(dtype_size(static_cast<mycollDataType_t>(c.dtype)));
  double steps = n - 1, wire = 0;
  switch (c.kind) {
    case Kind::AllReduce: steps = 2 * (n - 1), wire = 2 * (n - 1) / n * b; break;
    case Kind::Broadcast:
    case Kind::Reduce: wire = b; break;
    case Kind::AllGather:
    case Kind::ReduceScatter:
    case Kind::AllToAll:
    case Kind::Gather:
    case Kind::Scatter: wire = (n - 1) * b; break;
    case Kind::Send:
    case Kind::Recv: steps = 1, wire = b; break;
  }
  if (n <= 1) steps = 0, wire = 0;
  return alpha_us * steps + wire / bytes_per_us;
}

NcclCall make(Kind k, const char* fn, ncclComm* comm, const void* send, void* recv, size_t count,
              const ncclDataType_t& dtype, const ncclRedOp_t& op, int root, int peer,
              cudaStream_t stream) {
  const int dt = enum_arg(dtype), o = enum_arg(op);
  return NcclCall{k, fn, comm, send, recv, count, dt, o, root, peer, stream, PreMul{}};
}

}  // namespace

namespace mycoll {
namespace nccl {

bool in_group() { return g_group.depth > 0; }

void group_add_init(ncclComm* comm) { g_group.inits.push_back(comm); }

PreMul resolve_op(ncclComm* comm, int op, int dtype, const char* fn) {
  if (op >= ncclSum && op < ncclNumOps) return PreMul{};
  std::lock_guard<std::mutex> g(comm->mu);
  const long idx = long(op) - long(ncclNumOps);
  if (idx < 0 || idx >= long(comm->premul_ops.size()) || !comm->premul_ops[idx].live)
    throw_error(mycollInvalidArgument,
                fmt::format("{}: op {} is neither a built-in ncclRedOp_t (0..4) nor a live "
                            "PreMulSum op of this communicator",
                            fn, op));
  const PreMulOp& p = comm->premul_ops[idx];
  if (p.dtype != dtype)
    throw_error(mycollInvalidArgument,
                fmt::format("{}: PreMulSum op {} was created for datatype {} but the call uses {}",
                            fn, op, int(p.dtype), dtype));
  return PreMul{true, p.dtype, p.on_device, p.scalar, p.bits};
}

}  // namespace nccl
}  // namespace mycoll

extern "C" {

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  return guarded(comm, "ncclRedOpCreatePreMulSum", [&] {
    const char* fn = "ncclRedOpCreatePreMulSum";
    const int dt = enum_arg(datatype), where = enum_arg(residence);
    ready_comm(comm, fn, false);
    check_arg(op != nullptr, std::string(fn) + ": op is NULL");
    check_arg(scalar != nullptr, std::string(fn) + ": scalar is NULL");
    check_arg(dt >= 0 && dt < ncclNumTypes,
              fmt::format("{}: datatype {} is not an ncclDataType_t (0..{})", fn, dt,
                          int(ncclNumTypes) - 1));
    check_arg(where == ncclScalarDevice || where == ncclScalarHostImmediate,
              fmt::format("{}: residence {} is not ncclScalarDevice (0) or "
                          "ncclScalarHostImmediate (1)",
                          fn, where));
    PreMulOp p;
    p.live = true;
    p.dtype = static_cast<ncclDataType_t>(dt);
    p.on_device = where == ncclScalarDevice;
    if (p.on_device)
      p.scalar = scalar;
    else
      std::memcpy(&p.bits, scalar, dtype_size(static_cast<mycollDataType_t>(dt)));
    std::lock_guard<std::mutex> g(comm->mu);
    size_t i = 0;
    while (i < comm->premul_ops.size() && comm->premul_ops[i].live) ++i;
    check_arg(i < size_t(ncclMaxRedOp - ncclNumOps), std::string(fn) + ": too many live ops");
    if (i == comm->premul_ops.size()) comm->premul_ops.emplace_back();
    comm->premul_ops[i] = p;
    *op = static_cast<ncclRedOp_t>(ncclNumOps + int(i));
    return ncclSuccess;
  });
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op_arg, ncclComm_t comm) {
  return guarded(comm, "ncclRedOpDestroy", [&] {
    const int op = enum_arg(op_arg);
    ready_comm(comm, "ncclRedOpDestroy", false);
    check_arg(op < 0 || op >= ncclNumOps,
              fmt::format("ncclRedOpDestroy: op {} is a built-in operation "
                          "(only PreMulSum ops are destroyed)",
                          op));
    std::lock_guard<std::mutex> g(comm->mu);
    const size_t i = size_t(op) - size_t(ncclNumOps);
    check_arg(op >= ncclNumOps && i < comm->premul_ops.size() && comm->premul_ops[i].live,
              fmt::format("ncclRedOpDestroy: op {} is not a live PreMulSum op of this "
                          "communicator",
                          op));
    comm->premul_ops[i].live = false;
    return ncclSuccess;
  });
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  return submit(make(Kind::AllReduce, "ncclAllReduce", comm, sendbuff, recvbuff, count, datatype,
                     op, 0, -1, stream));
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  return submit(make(Kind::Broadcast, "ncclBroadcast", comm, sendbuff, recvbuff, count, datatype,
                     ncclSum, root, -1, stream));
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  return submit(make(Kind::Broadcast, "ncclBcast", comm, buff, buff, count, datatype, ncclSum, root,
                     -1, stream));
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return submit(make(Kind::Reduce, "ncclReduce", comm, sendbuff, recvbuff, count, datatype, op,
                     root, -1, stream));
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return submit(make(Kind::AllGather, "ncclAllGather", comm, sendbuff, recvbuff, sendcount,
                     datatype, ncclSum, 0, -1, stream));
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  return submit(make(Kind::ReduceScatter, "ncclReduceScatter", comm, sendbuff, recvbuff, recvcount,
                     datatype, op, 0, -1, stream));
}

ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return submit(make(Kind::AllToAll, "ncclAlltoAll", comm, sendbuff, recvbuff, count, datatype,
                     ncclSum, 0, -1, stream));
}

ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  return submit(make(Kind::Gather, "ncclGather", comm, sendbuff, recvbuff, count, datatype, ncclSum,
                     root, -1, stream));
}

ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return submit(make(Kind::Scatter, "ncclScatter", comm, sendbuff, recvbuff, count, datatype,
                     ncclSum, root, -1, stream));
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return submit(make(Kind::Send, "ncclSend", comm, sendbuff, nullptr, count, datatype, ncclSum, 0,
                     peer, stream));
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return submit(make(Kind::Recv, "ncclRecv", comm, nullptr, recvbuff, count, datatype, ncclSum, 0,
                     peer, stream));
}

ncclResult_t ncclGroupStart() {
  return guarded(nullptr, "ncclGroupStart", [] {
    ++g_group.depth;
    return ncclSuccess;
  });
}

ncclResult_t ncclGroupEnd() {
  return guarded(nullptr, "ncclGroupEnd", [] {
    if (g_group.depth == 0)
      throw_error(mycollInvalidUsage, "ncclGroupEnd without a matching ncclGroupStart");
    if (--g_group.depth > 0) return ncclSuccess;
    std::vector<NcclCall> calls = std::move(g_group.calls);
    std::vector<ncclComm*> inits = std::move(g_group.inits);
    g_group.calls.clear();
    g_group.inits.clear();
    // Communicators created in the group: blocking ones are ready when the
    // group ends (non-blocking ones are polled by the caller).
    std::exception_ptr init_error;
    for (ncclComm* c : inits) {
      if (!c->blocking) continue;
      try {
        wait_init(c);
      } catch (...) {
        if (!init_error) init_error = std::current_exception();
      }
    }
    if (calls.empty()) {
      if (init_error) std::rethrow_exception(init_error);
      return ncclSuccess;
    }
    Scratch keep;
    check_mycoll(mycollGroupStart(), nullptr, "ncclGroupEnd");
    // Every queued call reaches mycoll even if one fails; mycoll then runs
    // none of the group (as NCCL) and the first error is reported.
    std::exception_ptr first;
    for (const NcclCall& c : calls) {
      try {
        run(c, keep, true);
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    mycollResult_t r = mycollGroupEnd();
    if (init_error) std::rethrow_exception(init_error);
    if (first) std::rethrow_exception(first);
    check_mycoll(r, nullptr, "ncclGroupEnd");
    return ncclSuccess;
  });
}

ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  return guarded(nullptr, "ncclGroupSimulateEnd", [&] {
    const char* fn = "ncclGroupSimulateEnd";
    check_arg(simInfo != nullptr, std::string(fn) + ": simInfo is NULL");
    check_arg(simInfo->magic == kSimInfoMagic,
              fmt::format("{}: simInfo->magic is {:#x}, not {:#x}: initialise it with "
                          "NCCL_SIM_INFO_INITIALIZER",
                          fn, simInfo->magic, kSimInfoMagic));
    check_arg(simInfo->size >= offsetof(ncclSimInfo_t, estimatedTime) + sizeof(float),
              fmt::format("{}: simInfo->size {} is too small", fn, simInfo->size));
    if (g_group.depth == 0)
      throw_error(mycollInvalidUsage, "ncclGroupSimulateEnd without a matching ncclGroupStart");
    double us = 0;
    for (const NcclCall& c : g_group.calls) us += estimate_us(c);
    simInfo->estimatedTime = static_cast<float>(us);
    log_info(Subsys::Tuning, "{}: {} call(s), estimated {:.1f} us (not run)", fn,
             g_group.calls.size(), us);
    if (--g_group.depth == 0) {
      for (ncclComm* c : g_group.inits)
        if (c->blocking) wait_init(c);
      g_group.calls.clear();
      g_group.inits.clear();
    }
    return ncclSuccess;
  });
}

}  // extern "C"

MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclRedOpCreatePreMulSum,
                            (ncclRedOp_t*, void*, ncclDataType_t, ncclScalarResidence_t,
                             ncclComm_t));
MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t, ncclComm_t));
MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclAllReduce,
                            (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                             cudaStream_t));
MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclBroadcast,
                            (const void*, void*, size_t, ncclDataType_t, int, ncclComm_t,
                             cudaStream_t));
MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclBcast,
                            (void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t));
MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclReduce,
                            (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int,
                             ncclComm_t, cudaStream_t));
MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclAllGather,
                            (const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t));
MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclReduceScatter,
                            (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                             cudaStream_t));
MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclAlltoAll,
                            (const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t));
MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclGather,
                            (const void*, void*, size_t, ncclDataType_t, int, ncclComm_t,
                             cudaStream_t));
MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclScatter,
                            (const void*, void*, size_t, ncclDataType_t, int, ncclComm_t,
                             cudaStream_t));
MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclSend,
                            (const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t));
MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclRecv,
                            (void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t));
MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclGroupStart, ());
MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclGroupEnd, ());
MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t*));
