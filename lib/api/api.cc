// C entry points: validate, call into the library, convert exceptions to
// result codes and record the reason for mycollGetLastError.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <thread>

#include "api/api_internal.h"
#include "base/error.h"
#include "base/log.h"
#include "comm/comm.h"
#include "comm/enqueue.h"
#include "comm/flight_recorder.h"
#include "comm/registry.h"
#include "engine/device_engine.h"

using namespace mycoll;

namespace {

thread_local std::string t_last_error;

// The subsystem an entry point's errors are logged under: communicator
// life cycle and queries under INIT, collectives, point-to-point and groups
// under COLL.
Subsys subsys_of(const char* fn) {
  static const char* const kInit[] = {"mycollComm", "mycollGetUniqueId", "mycollGetVersion"};
  for (const char* p : kInit)
    if (std::strncmp(fn, p, std::strlen(p)) == 0) return Subsys::Init;
  return Subsys::Coll;
}

void record(mycollComm* comm, const char* fn, mycollResult_t code, const char* what) {
  std::string msg = std::string(fn) + ": " + mycollGetErrorString(code) + ": " + what;
  if (std::strncmp(what, fn, std::strlen(fn)) == 0)
    msg = std::string(what) + " (" + mycollGetErrorString(code) + ")";
  t_last_error = msg;
  if (comm) {
    std::lock_guard<std::mutex> g(comm->err_mu);
    comm->last_error = msg;
  }
  log_warn(subsys_of(fn), "{}", msg);
}

// The communicator's log tag while the call runs (null or invalid comm: none).
const std::string* tag_of(mycollComm* comm) {
  return comm && comm->magic == mycollComm::kMagic ? &comm->log_tag : nullptr;
}

// Converts the exception being handled into its result code, recording the
// reason (on comm too when not null) and logging it at WARN.
mycollResult_t convert_current(mycollComm* comm, const char* fn) {
  try {
    throw;
  } catch (const Error& e) {
    record(comm, fn, e.code(), e.what());
    return e.code();
  } catch (const std::bad_alloc&) {
    record(comm, fn, mycollSystemError, "out of memory");
    return mycollSystemError;
  } catch (const std::exception& e) {
    record(comm, fn, mycollInternalError, e.what());
    return mycollInternalError;
  }
}

// Runs f, converting exceptions (the C boundary). With a communicator its
// log tag is current while f runs; without one (groups, version, ids)
// lines carry whatever tag is current, none from user code.
template <typename F>
mycollResult_t guarded(mycollComm* comm, const char* fn, F&& f) {
  if (!comm) {
    try {
      f();
      return mycollSuccess;
    } catch (...) {
      return convert_current(nullptr, fn);
    }
  }
  LogScope scope(tag_of(comm));
  try {
    f();
    return mycollSuccess;
  } catch (...) {
    return convert_current(comm, fn);
  }
}

// guarded for work that logs nothing unless it fails (queueing a call in a
// group): the communicator's log tag is made current only for the error.
template <typename F>
mycollResult_t guarded_quiet(mycollComm* comm, const char* fn, F&& f) {
  try {
    f();
    return mycollSuccess;
  } catch (...) {
    LogScope scope(tag_of(comm));
    return convert_current(comm, fn);
  }
}

// Runs f(comm) with the handle pinned (lib/comm/registry.h): a destroyed or
// foreign handle is an error before anything is touched, and the
// communicator cannot be freed under the call (abort from another thread
// waits for it). kExclusive: a second thread inside a call on the same
// communicator is InvalidUsage.
// Inside an open group that holds the communicator's pin (group_pinned,
// lib/comm/enqueue.h) f runs under that pin.
template <typename F>
mycollResult_t with_comm(mycollComm_t h, const char* fn, PinMode mode, F&& f) {
  if (mode == PinMode::kExclusive)
    if (mycollComm* held = group_pinned(open_group(), h))
      return guarded(held, fn, [&] { f(held); });
  CommPin pin;
  try {
    pin = pin_comm(h, mode, fn);
  } catch (...) {
    return convert_current(nullptr, fn);
  }
  return guarded(pin.get(), fn, [&] { f(pin.get()); });
}

// A call queued in an open group leaves its pin to the group (group_hold):
// the group's next calls on the communicator and its end skip pinning.
[[gnu::noinline]] mycollResult_t run_call_pinned(mycollComm_t comm, const char* fn,
                                                 const Call& call) {
  GroupState* g = open_group();
  // In a group the first failure is also mycollGroupEnd's (group_call_failed).
  auto in_group = [g](mycollResult_t r) {
    if (r != mycollSuccess) group_call_failed(g, r, t_last_error);
    return r;
  };
  if (mycollComm* held = g ? group_pinned(g, comm) : nullptr)
    return in_group(guarded_quiet(held, fn, [&] {
      validate_call(held, call, fn);
      group_queue(g, held, call);
    }));
  CommPin pin;
  try {
    pin = pin_comm(comm, PinMode::kExclusive, fn);
  } catch (...) {
    const mycollResult_t r = convert_current(nullptr, fn);
    return g ? in_group(r) : r;
  }
  mycollComm* c = pin.get();
  if (!g)
    return guarded(c, fn, [&] {
      if (submit_repeat(c, call)) return;
      validate_call(c, call, fn);
      submit_now(c, call);
    });
  const mycollResult_t r = in_group(guarded_quiet(c, fn, [&] {
    validate_call(c, call, fn);
    group_queue(g, c, call);
  }));
  if (r == mycollSuccess) group_hold(g, pin);
  return r;
}

// A collective of count 0 outside a group moves nothing: with its
// arguments right and the communicator live, usable and idle it returns
// here, unpinned (registry_idle_nranks reads the slot alone, so a destroy
// from another thread cannot free anything under it), in about a tenth of
// a pinned call's instructions. Anything else, a wrong argument included,
// takes the pinned path, which reports it as for any count. (Point-to-point
// calls of count 0 keep that path.)
inline mycollResult_t run_call(mycollComm_t comm, const char* fn, const Call& call) {
  if (call.count == 0 && call.coll != Coll::SendRecv && !open_group())
    if (const int n = registry_idle_nranks(comm); n > 0 && arg_fault(n, call) == ArgFault::kNone)
      return mycollSuccess;
  return run_call_pinned(comm, fn, call);
}

// Destroys every handle of a partly built set (InitAll failure).
void discard(mycollComm_t h) {
  if (h) registry_retire(pin_comm(h, PinMode::kShared, "discard"), 10.0);
}

}  // namespace

extern "C" {

mycollResult_t mycollGetVersion(int* version) {
  return guarded(nullptr, "mycollGetVersion", [&] {
    check_arg(version != nullptr, "mycollGetVersion: version is NULL");
    *version = MYCOLL_VERSION_CODE;
  });
}

const char* mycollGetErrorString(mycollResult_t r) {
  switch (r) {
    case mycollSuccess: return "no error";
    case mycollUnhandledCudaError: return "unhandled cuda error";
    case mycollSystemError: return "unhandled system error";
    case mycollInternalError: return "internal error";
    case mycollInvalidArgument: return "invalid argument";
    case mycollInvalidUsage: return "invalid usage";
    case mycollRemoteError: return "remote process exited or there was a network error";
    case mycollInProgress: return "operation in progress";
    case mycollTimeout: return "operation timed out";
    default: return "unknown result code";
  }
}

const char* mycollGetLastError(mycollComm_t comm) {
  if (!comm) return t_last_error.c_str();
  CommPin pin;
  try {
    pin = pin_comm(comm, PinMode::kShared, "mycollGetLastError");
  } catch (const Error&) {
    return t_last_error.c_str();  // destroyed or not a communicator
  }
  std::lock_guard<std::mutex> g(pin->err_mu);
  thread_local std::string copy;
  copy = pin->last_error;
  return copy.c_str();
}

mycollResult_t mycollGetUniqueId(mycollUniqueId* id) {
  return guarded(nullptr, "mycollGetUniqueId", [&] {
    check_arg(id != nullptr, "mycollGetUniqueId: uniqueId is NULL");
    create_unique_id(id);
  });
}

static void init_rank(mycollComm_t* comm, int nranks, const UniqueIdData& id, int rank, int dev,
                      const char* fn, CancelFlag cancel = {}, const CommOptions& opts = {}) {
  check_arg(comm != nullptr, std::string(fn) + ": comm is NULL");
  *comm = nullptr;
  check_arg(nranks >= 1, std::string(fn) + ": nranks " + std::to_string(nranks) + " must be >= 1");
  check_arg(rank >= 0 && rank < nranks, std::string(fn) + ": rank " + std::to_string(rank) +
                                            " is out of range [0, " + std::to_string(nranks) + ")");
  *comm = registry_add(comm_create(id, nranks, rank, dev, nullptr, std::move(cancel), &opts));
}

// Binds to the calling thread's current CUDA device where GPUs exist (like
// NCCL), unless MYCOLL_HOST_COMM=1 asks for a host-only communicator.
static int init_device() {
  std::string host = env_get("MYCOLL_HOST_COMM");
  if (host == "1" || host == "true" || host == "yes") return -1;
  if (host != "0" && host != "false" && host != "no" && !host.empty())
    throw_error(mycollInvalidArgument, "MYCOLL_HOST_COMM='" + host + "' is not 0 or 1");
  return cuda_device_count() > 0 ? current_cuda_device() : -1;
}

mycollResult_t mycollCommInitRank(mycollComm_t* comm, int nranks, mycollUniqueId commId, int rank) {
  return comm_init_rank_cancellable(comm, nranks, commId, rank, {});
}

mycollResult_t mycollCommInitAll(mycollComm_t* comms, int ndev, const int* devlist) {
  return comm_init_all(comms, ndev, devlist, {});
}

static const char* getenv_any(std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (const char* v = std::getenv(n)) return v;
  return nullptr;
}

mycollResult_t mycollCommInitFromEnv(mycollComm_t* comm) {
  return guarded(nullptr, "mycollCommInitFromEnv", [&] {
    const char* fn = "mycollCommInitFromEnv";
    const char* rank_s =
        getenv_any({"MYCOLL_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID"});
    const char* size_s =
        getenv_any({"MYCOLL_NRANKS", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS"});
    if (!rank_s || !size_s)
      throw_error(
          mycollInvalidUsage,
          std::string(fn) +
              ": no rank/size in the environment (MYCOLL_RANK/MYCOLL_NRANKS, RANK/WORLD_SIZE, "
              "OMPI_COMM_WORLD_RANK/SIZE or SLURM_PROCID/NTASKS)");
    int rank = static_cast<int>(parse_int(rank_s, "rank variable"));
    int nranks = static_cast<int>(parse_int(size_s, "size variable"));
    std::string host;
    int port = 0;
    if (const char* a = std::getenv("MYCOLL_ADDR")) {
      std::string addr = a;
      size_t colon = addr.rfind(':');
      if (colon == std::string::npos)
        throw_error(mycollInvalidArgument,
                    std::string(fn) + ": MYCOLL_ADDR='" + addr + "' is not host:port");
      host = addr.substr(0, colon);
      if (host.size() > 2 && host.front() == '[' && host.back() == ']')
        host = host.substr(1, host.size() - 2);
      port = static_cast<int>(parse_int(addr.substr(colon + 1), "MYCOLL_ADDR port"));
    } else if (const char* m = std::getenv("MASTER_ADDR")) {
      host = m;
      const char* p = std::getenv("MASTER_PORT");
      if (!p)
        throw_error(mycollInvalidUsage,
                    std::string(fn) + ": MASTER_ADDR set but MASTER_PORT is not");
      port = static_cast<int>(parse_int(p, "MASTER_PORT"));
    } else {
      throw_error(mycollInvalidUsage, std::string(fn) +
                                          ": no rendezvous address (MYCOLL_ADDR=host:port or "
                                          "MASTER_ADDR/MASTER_PORT)");
    }
    check_arg(port > 0 && port < 65536,
              std::string(fn) + ": port " + std::to_string(port) + " out of range");
    check_arg(nranks >= 1 && rank >= 0 && rank < nranks,
              std::string(fn) + ": rank " + std::to_string(rank) + " of " + std::to_string(nranks) +
                  " is out of range");
    UniqueIdData id = unique_id_from_address(host, port);
    if (rank == 0) start_root_listener(id, nranks, timeout_from_env());
    init_rank(comm, nranks, id, rank, init_device(), fn);
  });
}

mycollResult_t mycollCommDestroy(mycollComm_t comm) {
  if (!comm) return mycollSuccess;  // like free(NULL)
  const char* fn = "mycollCommDestroy";
  CommPin pin;
  mycollResult_t r = guarded(nullptr, fn, [&] {
    if (mycollComm* held = group_pinned(open_group(), comm))  // this thread's open group holds it
      throw_error(mycollInvalidUsage,
                  std::string(fn) + ": " + std::to_string(held->queued.load()) +
                      " call(s) on this communicator wait in an open group (mycollGroupStart "
                      "without mycollGroupEnd); end the group first, or use mycollCommAbort");
    pin = pin_comm(comm, PinMode::kExclusive, fn);
  });
  if (r != mycollSuccess) return r;
  return guarded(pin.get(), fn, [&] {
    int queued = pin->queued.load();
    if (queued > 0)
      throw_error(mycollInvalidUsage,
                  std::string(fn) + ": " + std::to_string(queued) +
                      " call(s) on this communicator wait in an open group (mycollGroupStart "
                      "without mycollGroupEnd); end the group first, or use mycollCommAbort");
    if (!registry_retire(std::move(pin), 30.0))
      throw_error(mycollInvalidArgument, std::string(fn) +
                                             ": communicator is already being "
                                             "destroyed or aborted");
  });
}

// Safe from any thread at any moment: marks the communicator aborted and
// breaks every connection (so calls blocked on it, in a group or not, fail
// promptly), then frees it once they have left; returns within ~5 s even if
// one does not (the last call to leave frees it then).
mycollResult_t mycollCommAbort(mycollComm_t comm) {
  if (!comm) return mycollSuccess;
  const char* fn = "mycollCommAbort";
  // This thread's open group lets go of it: its queued calls fail at group
  // end as on any aborted communicator, and the drain below is not held up.
  group_drop(comm);
  CommPin pin;
  mycollResult_t r = guarded(nullptr, fn, [&] { pin = pin_comm(comm, PinMode::kShared, fn); });
  if (r != mycollSuccess) return r;
  return guarded(nullptr, fn, [&] {
    mycollComm* c = pin.get();
    if (c->flight && !c->flight_dumped.exchange(true)) {
      LogScope scope(&c->log_tag);
      try {
        log_warn(Subsys::Init, "flight recorder written to {}", flight_dump(*c, "abort"));
      } catch (const std::exception& e) {
        log_warn(Subsys::Init, "{}", e.what());
      }
    }
    c->interrupt();
    if (!registry_retire(std::move(pin), 4.5))
      throw_error(mycollInvalidArgument, std::string(fn) +
                                             ": communicator is already being "
                                             "destroyed or aborted");
  });
}

mycollResult_t mycollCommSplit(mycollComm_t comm, int color, int key, mycollComm_t* newcomm) {
  return comm_split(comm, color, key, newcomm, nullptr);
}

mycollResult_t mycollCommDump(mycollComm_t c0, const char* path) {
  return with_comm(c0, "mycollCommDump", PinMode::kShared, [&](mycollComm* comm) {
    if (!comm->flight)
      throw_error(mycollInvalidUsage,
                  "mycollCommDump: the flight recorder is off (set "
                  "MYCOLL_FLIGHT_RECORDER=N before creating the communicator)");
    std::string where = flight_dump(*comm, "request", path ? path : "");
    log_info(Subsys::Init, "flight recorder written to {}", where);
  });
}

mycollResult_t mycollCommCount(const mycollComm_t c0, int* count) {
  return with_comm(c0, "mycollCommCount", PinMode::kShared, [&](mycollComm* comm) {
    check_arg(count != nullptr, "mycollCommCount: count is NULL");
    *count = comm->nranks;
  });
}

mycollResult_t mycollCommUserRank(const mycollComm_t c0, int* rank) {
  return with_comm(c0, "mycollCommUserRank", PinMode::kShared, [&](mycollComm* comm) {
    check_arg(rank != nullptr, "mycollCommUserRank: rank is NULL");
    *rank = comm->rank;
  });
}

mycollResult_t mycollCommCuDevice(const mycollComm_t c0, int* device) {
  return with_comm(c0, "mycollCommCuDevice", PinMode::kShared, [&](mycollComm* comm) {
    check_arg(device != nullptr, "mycollCommCuDevice: device is NULL");
    *device = comm->cuda_device;
  });
}

mycollResult_t mycollCommGetAsyncError(mycollComm_t c0, mycollResult_t* asyncError) {
  return with_comm(c0, "mycollCommGetAsyncError", PinMode::kShared, [&](mycollComm* comm) {
    check_arg(asyncError != nullptr, "mycollCommGetAsyncError: asyncError is NULL");
    if (comm->device && comm->async_error.load() == mycollSuccess) {
      std::string why;
      if (mycollResult_t e = comm->device->poll_error(&why)) comm->fail(e, why);
    }
    *asyncError = static_cast<mycollResult_t>(comm->async_error.load());
    if (*asyncError != mycollSuccess) {  // mycollGetLastError(comm) names the cause
      std::lock_guard<std::mutex> g(comm->err_mu);
      if (comm->last_error.find(comm->async_reason) == std::string::npos)
        comm->last_error = comm->async_reason;
    }
  });
}

mycollResult_t mycollAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                               mycollDataType_t datatype, mycollRedOp_t op, mycollComm_t comm,
                               mycollStream_t stream) {
  Call c;
  c.coll = Coll::AllReduce;
  c.send = sendbuff, c.recv = recvbuff, c.count = count, c.dtype = datatype, c.op = op;
  c.stream = stream;
  return run_call(comm, "mycollAllReduce", c);
}

mycollResult_t mycollBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                               mycollDataType_t datatype, int root, mycollComm_t comm,
                               mycollStream_t stream) {
  Call c;
  c.coll = Coll::Broadcast;
  c.send = sendbuff, c.recv = recvbuff, c.count = count, c.dtype = datatype, c.root = root;
  c.stream = stream;
  return run_call(comm, "mycollBroadcast", c);
}

mycollResult_t mycollReduce(const void* sendbuff, void* recvbuff, size_t count,
                            mycollDataType_t datatype, mycollRedOp_t op, int root,
                            mycollComm_t comm, mycollStream_t stream) {
  Call c;
  c.coll = Coll::Reduce;
  c.send = sendbuff, c.recv = recvbuff, c.count = count, c.dtype = datatype, c.op = op;
  c.root = root, c.stream = stream;
  return run_call(comm, "mycollReduce", c);
}

mycollResult_t mycollAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                               mycollDataType_t datatype, mycollComm_t comm,
                               mycollStream_t stream) {
  Call c;
  c.coll = Coll::AllGather;
  c.send = sendbuff, c.recv = recvbuff, c.count = sendcount, c.dtype = datatype;
  c.stream = stream;
  return run_call(comm, "mycollAllGather", c);
}

mycollResult_t mycollReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                   mycollDataType_t datatype, mycollRedOp_t op, mycollComm_t comm,
                                   mycollStream_t stream) {
  Call c;
  c.coll = Coll::ReduceScatter;
  c.send = sendbuff, c.recv = recvbuff, c.count = recvcount, c.dtype = datatype, c.op = op;
  c.stream = stream;
  return run_call(comm, "mycollReduceScatter", c);
}

mycollResult_t mycollAllToAll(const void* sendbuff, void* recvbuff, size_t count,
                              mycollDataType_t datatype, mycollComm_t comm, mycollStream_t stream) {
  Call c;
  c.coll = Coll::AllToAll;
  c.send = sendbuff, c.recv = recvbuff, c.count = count, c.dtype = datatype;
  c.stream = stream;
  return run_call(comm, "mycollAllToAll", c);
}

mycollResult_t mycollScatter(const void* sendbuff, void* recvbuff, size_t count,
                             mycollDataType_t datatype, int root, mycollComm_t comm,
                             mycollStream_t stream) {
  Call c;
  c.coll = Coll::Scatter;
  c.send = sendbuff, c.recv = recvbuff, c.count = count, c.dtype = datatype, c.root = root;
  c.stream = stream;
  return run_call(comm, "mycollScatter", c);
}

mycollResult_t mycollGather(const void* sendbuff, void* recvbuff, size_t count,
                            mycollDataType_t datatype, int root, mycollComm_t comm,
                            mycollStream_t stream) {
  Call c;
  c.coll = Coll::Gather;
  c.send = sendbuff, c.recv = recvbuff, c.count = count, c.dtype = datatype, c.root = root;
  c.stream = stream;
  return run_call(comm, "mycollGather", c);
}

mycollResult_t mycollSend(const void* sendbuff, size_t count, mycollDataType_t datatype, int peer,
                          mycollComm_t comm, mycollStream_t stream) {
  Call c;
  c.coll = Coll::SendRecv;
  c.send = sendbuff, c.count = count, c.dtype = datatype, c.peer = peer, c.is_send = true;
  c.stream = stream;
  return run_call(comm, "mycollSend", c);
}

mycollResult_t mycollRecv(void* recvbuff, size_t count, mycollDataType_t datatype, int peer,
                          mycollComm_t comm, mycollStream_t stream) {
  Call c;
  c.coll = Coll::SendRecv;
  c.recv = recvbuff, c.count = count, c.dtype = datatype, c.peer = peer, c.is_send = false;
  c.stream = stream;
  return run_call(comm, "mycollRecv", c);
}

mycollResult_t mycollGroupStart(void) {
  return guarded(nullptr, "mycollGroupStart", [] { group_start(); });
}

mycollResult_t mycollGroupEnd(void) {
  return guarded(nullptr, "mycollGroupEnd", [] { group_end(); });
}

}  // extern "C"

// The NCCL shim's non-blocking init, split and init-all with options (api_internal.h).
namespace mycoll {
// mycollCommInitAll with options (api_internal.h).
mycollResult_t comm_init_all(mycollComm_t* comms, int ndev, const int* devlist,
                             const CommOptions& opts) {
  return guarded(nullptr, "mycollCommInitAll", [&] {
    check_arg(comms != nullptr, "mycollCommInitAll: comms is NULL");
    check_arg(ndev >= 1, "mycollCommInitAll: ndev " + std::to_string(ndev) + " must be >= 1");
    int have = cuda_device_count();
    if (have == 0)
      throw_error(mycollInvalidUsage,
                  "mycollCommInitAll: no CUDA device on this machine (it drives one GPU per rank; "
                  "use mycollCommInitRank for host communicators)");
    for (int i = 0; i < ndev; ++i) {
      int d = devlist ? devlist[i] : i;
      check_arg(d >= 0 && d < have, "mycollCommInitAll: device " + std::to_string(d) +
                                        " out of range (" + std::to_string(have) + " devices)");
    }
    mycollUniqueId uid;
    create_unique_id(&uid);
    UniqueIdData id = unpack_unique_id(uid);
    std::vector<std::thread> threads;
    std::vector<std::exception_ptr> errs(ndev);
    for (int i = 0; i < ndev; ++i) {
      comms[i] = nullptr;
      threads.emplace_back([&, i] {
        try {
          int d = devlist ? devlist[i] : i;
          comms[i] = registry_add(comm_create(id, ndev, i, d, nullptr, {}, &opts));
        } catch (...) {
          errs[i] = std::current_exception();
        }
      });
    }
    for (auto& t : threads) t.join();
    for (int i = 0; i < ndev; ++i) {
      if (errs[i]) {
        for (int j = 0; j < ndev; ++j) {
          discard(comms[j]);
          comms[j] = nullptr;
        }
        std::rethrow_exception(errs[i]);
      }
    }
  });
}

// mycollCommSplit with options for the child (api_internal.h).
mycollResult_t comm_split(mycollComm_t comm, int color, int key, mycollComm_t* newcomm,
                          const CommOptions* opts) {
  return with_comm(comm, "mycollCommSplit", PinMode::kExclusive, [&](mycollComm* parent) {
    check_arg(newcomm != nullptr, "mycollCommSplit: newcomm is NULL");
    mycollComm* comm = parent;
    comm->check_usable();
    *newcomm = nullptr;
    if (color < 0) color = MYCOLL_SPLIT_NOCOLOR;
    struct Entry {
      int color, key, rank;
    };
    std::vector<Entry> all(comm->nranks);
    all[comm->rank] = Entry{color, key, comm->rank};
    comm->bootstrap->allgather(all.data(), sizeof(Entry));
    std::vector<Entry> mine;
    for (const Entry& e : all)
      if (e.color == color && color != MYCOLL_SPLIT_NOCOLOR) mine.push_back(e);
    std::sort(mine.begin(), mine.end(), [](const Entry& a, const Entry& b) {
      return a.key != b.key ? a.key < b.key : a.rank < b.rank;
    });
    // The first member of each color starts a rendezvous and sends the id
    // to the others over the parent's bootstrap.
    mycollUniqueId uid;
    if (!mine.empty() && mine[0].rank == comm->rank) {
      create_unique_id(&uid);
      for (size_t i = 1; i < mine.size(); ++i)
        comm->bootstrap->send(mine[i].rank, &uid, sizeof(uid));
    } else if (!mine.empty()) {
      comm->bootstrap->recv(mine[0].rank, &uid, sizeof(uid));
    }
    if (mine.empty()) return;
    int newrank = 0;
    while (mine[newrank].rank != comm->rank) ++newrank;
    *newcomm = registry_add(comm_create(unpack_unique_id(uid), static_cast<int>(mine.size()),
                                        newrank, comm->cuda_device, comm, {}, opts));
  });
}

mycollResult_t comm_init_rank_cancellable(mycollComm_t* comm, int nranks, mycollUniqueId id,
                                          int rank, CancelFlag cancel, const CommOptions& opts) {
  return guarded(nullptr, "mycollCommInitRank", [&] {
    init_rank(comm, nranks, unpack_unique_id(id), rank, init_device(), "mycollCommInitRank",
              std::move(cancel), opts);
  });
}
}  // namespace mycoll
