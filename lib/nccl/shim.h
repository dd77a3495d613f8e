// lib/nccl: NCCL's host API as thin translations onto mycoll (libnccl.so.2).
//
// An ncclComm_t is a small wrapper around a mycollComm: it adds what NCCL
// has and mycoll does not (the config, non-blocking init, PreMulSum ops,
// buffer registrations, finalize/revoke states). Every collective, split
// and error path is mycoll's own; this layer maps names, result codes and
// the few NCCL-only semantics. Files: env.cc (NCCL_* variables), comm.cc
// (init, split, shrink, finalize, destroy, abort, errors), coll.cc
// (collectives, groups, PreMulSum, ncclGroupSimulateEnd), misc.cc (memory,
// registration, the refused device API).
#pragma once

#include <nccl.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "comm/registry.h"
#include "mycoll.h"

namespace mycoll {
namespace nccl {

// The NCCL API version this library implements (ncclGetVersion).
constexpr int kNcclVersionCode = 22809;
constexpr unsigned kConfigMagic = 0xcafebeef;
constexpr unsigned kSimInfoMagic = 0x74685283;

// Maps NCCL_* variables onto MYCOLL_* ones (a MYCOLL_* already set wins)
// and logs, once, which were mapped and which are ignored. Runs once per
// process, at the first call of any nccl* function, before mycoll reads its
// configuration or creates its logger.
void apply_nccl_env();
// NCCL_COMM_ID ("host:port"), when set: the rendezvous address every rank
// derives its id from (rank 0 serves it). Empty when unset.
std::string nccl_comm_id();
// The block cap NCCL_MAX_CTAS and NCCL_MAX_NCHANNELS ask for: the smaller
// of those set to a positive integer, at most 64; 0: none. Read at every
// init.
int nccl_env_max_ctas();

// The int a C caller passed for an nccl.h enum parameter. nccl.h's enums
// have no fixed underlying type, so a value outside their enumerators (any
// int is a valid argument in C) is not one C++ may load as the enum: entry
// points take such parameters by reference and read their bytes here, then
// range-check the int.
template <typename E>
int enum_arg(const E& e) {
  static_assert(sizeof(E) == sizeof(int), "nccl.h enums are ints");
  int v;
  std::memcpy(&v, &e, sizeof(v));
  return v;
}

// A PreMulSum op created on a communicator (ncclRedOp_t = ncclNumOps + index).
struct PreMulOp {
  bool live = false;
  ncclDataType_t dtype = ncclFloat32;
  bool on_device = false;        // ncclScalarDevice: read when the collective runs
  const void* scalar = nullptr;  // ncclScalarDevice: the user's pointer
  uint64_t bits = 0;             // ncclScalarHostImmediate: the value, copied at creation
};

// What a PreMulSum collective needs of its op, resolved when it is called
// (NCCL allows destroying the op right after the call).
struct PreMul {
  bool active = false;
  ncclDataType_t dtype = ncclFloat32;
  bool on_device = false;
  const void* scalar = nullptr;
  uint64_t bits = 0;
};

// Non-blocking init (config->blocking = 0): a thread runs mycoll's init;
// ncclCommGetAsyncError reports ncclInProgress until it is done. Shared with
// the (detached) thread. ncclCommAbort of a pending init sets `cancel`
// (under mu), which ends a rendezvous still waiting within about 0.1 s;
// should the init succeed anyway, the thread sees the flag and aborts what
// it made.
struct InitJob {
  std::mutex mu;
  std::condition_variable cv;
  const std::shared_ptr<std::atomic<bool>> cancel = std::make_shared<std::atomic<bool>>(false);
  bool done = false;
  mycollResult_t result = mycollSuccess;
  std::string error;
  mycollComm_t comm = nullptr;
};

}  // namespace nccl
}  // namespace mycoll

struct ncclComm {
  static constexpr uint64_t kMagic = 0x6e63636c5368696dull;  // "ncclShim"
  uint64_t magic = kMagic;
  std::atomic<mycollComm_t> mc{nullptr};  // null until init has succeeded
  std::shared_ptr<mycoll::nccl::InitJob> job;
  int rank = 0, nranks = 0;
  bool blocking = true;
  std::string name;            // config->commName
  std::atomic<int> active{0};  // nccl calls in flight (abort waits for them)
  std::atomic<bool> finalized{false}, revoked{false};
  std::atomic<bool> async_logged{false};  // the async error was logged at WARN

  std::mutex mu;  // everything below
  std::string last_error;
  std::vector<mycoll::nccl::PreMulOp> premul_ops;
  std::set<void*> registrations;                // ncclCommRegister handles
  std::set<struct ncclWindow_vidmem*> windows;  // ncclCommWindowRegister
  std::vector<char> host_scratch;               // PreMulSum on host buffers, outside groups
};

// A registered window (ncclWindow_t).
struct ncclWindow_vidmem {
  ncclComm* comm;
  void* buff;
  size_t size;
  int flags;
};

namespace mycoll {
namespace nccl {

// mycoll result -> NCCL result: equal values 0..7; mycoll's timeout (a peer
// that stopped answering) is ncclRemoteError.
ncclResult_t to_nccl(mycollResult_t r);

// An error whose message mycoll already logged at WARN (not logged again).
class Forwarded : public Error {
 public:
  using Error::Error;
};
// Throws Forwarded with mycoll's message for comm (or this thread) unless r is success.
void check_mycoll(mycollResult_t r, mycollComm_t comm, const char* fn);

// Records a failure of fn: this thread's and comm's last error, a WARN line
// unless already logged.
void record_error(ncclComm* comm, const char* fn, const std::string& what, bool logged);

// Checks comm is a live wrapper (ncclInvalidArgument naming fn otherwise).
ncclComm* valid_comm(ncclComm* comm, const char* fn);
// valid_comm, then waits for a non-blocking init to finish (throws its
// error); for_ops also refuses revoked or finalized communicators.
// Returns the mycoll communicator.
mycollComm_t ready_comm(ncclComm* comm, const char* fn, bool for_ops = true);

// Runs f (which throws mycoll::Error on failure) at the NCCL boundary: the
// environment mapped first, exceptions converted and recorded.
template <typename F>
ncclResult_t guarded(ncclComm* comm, const char* fn, F&& f) {
  apply_nccl_env();
  ncclComm* live = comm && comm->magic == ncclComm::kMagic ? comm : nullptr;
  if (live) live->active++;
  ncclResult_t r = ncclSuccess;
  try {
    r = f();
  } catch (const Forwarded& e) {
    record_error(live, fn, e.what(), true);
    r = to_nccl(e.code());
  } catch (const Error& e) {
    record_error(live, fn, e.what(), false);
    r = to_nccl(e.code());
  } catch (const std::bad_alloc&) {
    record_error(live, fn, "out of memory", false);
    r = ncclSystemError;
  } catch (const std::exception& e) {
    record_error(live, fn, e.what(), false);
    r = ncclInternalError;
  }
  if (live) live->active--;
  return r;
}

// Refuses what this library cannot serve: ncclInvalidUsage, a WARN line and
// the reason in ncclGetLastError.
[[noreturn]] void refuse(const char* fn, const std::string& why);

// PreMulSum op lookup for a collective (InvalidArgument for an op that is
// neither built in nor a live PreMulSum of comm, or whose type differs).
// op and dtype: the caller's ints (enum_arg).
PreMul resolve_op(ncclComm* comm, int op, int dtype, const char* fn);

// Whether an ncclGroupStart is open on this thread (coll.cc).
bool in_group();
// An init called inside a group runs in the background (so one thread can
// create the communicators of several ranks); the outermost ncclGroupEnd
// waits for it (coll.cc).
void group_add_init(ncclComm* comm);
// Waits for a background init to finish; throws its error (comm.cc).
void wait_init(ncclComm* comm);

}  // namespace nccl
}  // namespace mycoll

// Defines pncclNAME as an alias of ncclNAME (NCCL's profiling interface).
#define MYCOLL_NCCL_PROFILING_ALIAS(ret, name, params) \
  extern "C" ret p##name params __attribute__((alias(#name)))
