// Communicators: version, ids, errors, init (blocking and not), split,
// shrink, finalize, revoke, destroy, abort, queries.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <thread>

#include "api/api_internal.h"
#include "base/config.h"
#include "base/log.h"
#include "bootstrap/bootstrap.h"
#include "comm/comm.h"
#include "engine/device_engine.h"
#include "nccl/shim.h"

#if MYCOLL_HAVE_CUDA
#include <cuda_runtime.h>
#endif

using namespace mycoll;
using namespace mycoll::nccl;

namespace mycoll {
namespace nccl {

namespace {
thread_local std::string t_last_error;
}

ncclResult_t to_nccl(mycollResult_t r) {
  if (r >= mycollSuccess && r <= mycollInProgress) return static_cast<ncclResult_t>(r);
  if (r == mycollTimeout) return ncclRemoteError;
  return ncclInternalError;
}

void check_mycoll(mycollResult_t r, mycollComm_t comm, const char* fn) {
  if (r == mycollSuccess) return;
  throw Forwarded(r, mycollGetLastError(comm));
}

void record_error(ncclComm* comm, const char* fn, const std::string& what, bool logged) {
  std::string msg =
      what.compare(0, std::strlen(fn), fn) == 0 ? what : std::string(fn) + ": " + what;
  t_last_error = msg;
  if (comm && comm->magic == ncclComm::kMagic) {
    std::lock_guard<std::mutex> g(comm->mu);
    comm->last_error = msg;
  }
  if (!logged) log_warn(Subsys::Init, "{}", msg);
}

void refuse(const char* fn, const std::string& why) {
  throw_error(mycollInvalidUsage, std::string("not served by mycoll's libnccl.so.2: ") + why);
}

ncclComm* valid_comm(ncclComm* comm, const char* fn) {
  check_arg(comm != nullptr, [&] { return std::string(fn) + ": comm is NULL"; });
  check_arg(comm->magic == ncclComm::kMagic, [&] {
    return std::string(fn) + ": comm is not a valid communicator (destroyed or aborted?)";
  });
  return comm;
}

namespace {

// Waits (wait = true) or checks whether a non-blocking init has finished;
// publishes its communicator. Returns false while it still runs; throws its
// error when it failed.
bool settle_init(ncclComm* w, bool wait) {
  if (w->mc.load()) return true;
  auto job = w->job;
  if (!job) throw_error(mycollInternalError, "communicator has neither an init nor a result");
  std::unique_lock<std::mutex> lk(job->mu);
  if (!job->done) {
    if (!wait) return false;
    job->cv.wait(lk, [&] { return job->done; });
  }
  if (job->result != mycollSuccess) throw Forwarded(job->result, job->error);
  w->mc.store(job->comm);
  return true;
}

}  // namespace

void wait_init(ncclComm* comm) { settle_init(comm, true); }

mycollComm_t ready_comm(ncclComm* comm, const char* fn, bool for_ops) {
  valid_comm(comm, fn);
  settle_init(comm, true);
  if (for_ops && comm->revoked.load())
    throw_error(mycollInvalidUsage,
                "communicator was revoked (ncclCommRevoke); only "
                "ncclCommShrink, ncclCommDestroy and ncclCommAbort remain");
  if (for_ops && comm->finalized.load())
    throw_error(mycollInvalidUsage,
                "communicator was finalized (ncclCommFinalize); only "
                "ncclCommDestroy remains");
  return comm->mc.load();
}

}  // namespace nccl
}  // namespace mycoll

namespace {

// What of an ncclConfig_t mycoll uses; the rest is logged as ignored.
struct ConfigView {
  bool blocking = true;
  std::string name;
  int max_ctas = 0;  // maxCTAs (0: not set)
};

ConfigView read_config(const ncclConfig_t* c, const char* fn) {
  ConfigView v;
  if (!c) return v;
  const std::string f = fn;
  check_arg(c->magic == kConfigMagic, [&] {
    return fmt::format(
        "{}: config->magic is {:#x}, not NCCL's {:#x}: initialise the config "
        "with NCCL_CONFIG_INITIALIZER",
        f, c->magic, kConfigMagic);
  });
  check_arg(c->version >= 21400u, [&] {
    return fmt::format("{}: config->version {} is older than ncclConfig_t (2.14)", f, c->version);
  });
  const size_t need = offsetof(ncclConfig_t, blocking) + sizeof(int);
  check_arg(c->size >= need, [&] {
    return fmt::format("{}: config->size {} is too small for an ncclConfig_t", f, c->size);
  });
  auto has = [&](size_t off, size_t sz) { return c->size >= off + sz; };
  if (c->blocking != NCCL_CONFIG_UNDEF_INT) {
    check_arg(c->blocking == 0 || c->blocking == 1, [&] {
      return fmt::format("{}: config->blocking is {}; must be 0 or 1", f, c->blocking);
    });
    v.blocking = c->blocking == 1;
  }
  if (has(offsetof(ncclConfig_t, commName), sizeof(c->commName)) && c->commName)
    v.name = c->commName;
  std::string ignored;
  auto note_int = [&](const char* name, size_t off, const int& value) {
    if (has(off, sizeof(int)) && value != NCCL_CONFIG_UNDEF_INT)
      ignored += fmt::format(" {}={}", name, value);
  };
  // maxCTAs caps the thread blocks of every kernel (above 64, the most
  // channels there are, it caps nothing); minCTAs is checked as NCCL does
  // and has no effect (no channel floor here). Both came with NCCL 2.17.
  auto ctas = [&](const char* name, size_t off, const int& value) {
    if (c->version < 21700u || !has(off, sizeof(int)) || value == NCCL_CONFIG_UNDEF_INT) return 0;
    check_arg(value >= 1, [&] {
      return fmt::format("{}: config->{} is {}; must be at least 1", f, name, value);
    });
    return std::min(value, 64);
  };
  const int min_ctas = ctas("minCTAs", offsetof(ncclConfig_t, minCTAs), c->minCTAs);
  v.max_ctas = ctas("maxCTAs", offsetof(ncclConfig_t, maxCTAs), c->maxCTAs);
  check_arg(min_ctas == 0 || v.max_ctas == 0 || min_ctas <= v.max_ctas, [&] {
    return fmt::format("{}: config->minCTAs {} is above config->maxCTAs {}", f, min_ctas,
                       v.max_ctas);
  });
  if (min_ctas > 0)
    ignored +=
        fmt::format(" minCTAs={} (no channel floor: channels follow the message size)", min_ctas);
  note_int("cgaClusterSize", offsetof(ncclConfig_t, cgaClusterSize), c->cgaClusterSize);
  note_int("splitShare", offsetof(ncclConfig_t, splitShare), c->splitShare);
  note_int("trafficClass", offsetof(ncclConfig_t, trafficClass), c->trafficClass);
  note_int("collnetEnable", offsetof(ncclConfig_t, collnetEnable), c->collnetEnable);
  note_int("CTAPolicy", offsetof(ncclConfig_t, CTAPolicy), c->CTAPolicy);
  note_int("shrinkShare", offsetof(ncclConfig_t, shrinkShare), c->shrinkShare);
  note_int("nvlsCTAs", offsetof(ncclConfig_t, nvlsCTAs), c->nvlsCTAs);
  note_int("nChannelsPerNetPeer", offsetof(ncclConfig_t, nChannelsPerNetPeer),
           c->nChannelsPerNetPeer);
  note_int("nvlinkCentricSched", offsetof(ncclConfig_t, nvlinkCentricSched), c->nvlinkCentricSched);
  if (has(offsetof(ncclConfig_t, netName), sizeof(c->netName)) && c->netName)
    ignored += fmt::format(" netName={} (use MYCOLL_NET)", c->netName);
  if (!ignored.empty())
    log_info(Subsys::Init, "{}: config fields with no meaning in mycoll, ignored:{}", f, ignored);
  return v;
}

// The communicator options of a config: maxCTAs and NCCL_MAX_CTAS /
// NCCL_MAX_NCHANNELS, the smallest cap given.
CommOptions options_of(const ConfigView& cv) {
  CommOptions o;
  o.max_blocks = tighter_cap(cv.max_ctas, nccl_env_max_ctas());
  return o;
}

mycollUniqueId pack_id(const UniqueIdData& d) {
  mycollUniqueId id;
  std::memset(&id, 0, sizeof(id));
  std::memcpy(id.internal, &d, sizeof(d));
  return id;
}

// "host:port" (IPv6 in brackets) of NCCL_COMM_ID.
UniqueIdData id_from_comm_id(const std::string& addr) {
  size_t colon = addr.rfind(':');
  if (colon == std::string::npos)
    throw_error(mycollInvalidArgument, "NCCL_COMM_ID='" + addr + "' is not host:port");
  std::string host = addr.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  return unique_id_from_address(
      host, static_cast<int>(parse_int(addr.substr(colon + 1), "NCCL_COMM_ID port")));
}

ncclComm* wrap(mycollComm_t mc, const ConfigView& cv) {
  auto* w = new ncclComm;
  w->mc.store(mc);
  w->blocking = cv.blocking;
  w->name = cv.name;
  mycollCommUserRank(mc, &w->rank);
  mycollCommCount(mc, &w->nranks);
  return w;
}

void free_wrapper(ncclComm* w) {
  {
    std::lock_guard<std::mutex> g(w->mu);
    for (ncclWindow_vidmem* win : w->windows) delete win;
    for (void* reg : w->registrations) delete static_cast<ncclWindow_vidmem*>(reg);
    w->windows.clear();
    w->registrations.clear();
  }
  w->magic = 0;
  delete w;
}

int calling_device() {
#if MYCOLL_HAVE_CUDA
  int d = -1;
  if (cuda_device_count() > 0 && cudaGetDevice(&d) != cudaSuccess) d = -1;
  return d;
#else
  return -1;
#endif
}

ncclResult_t init_common(ncclComm_t* out, int nranks, const ncclUniqueId& commId, int rank,
                         const ncclConfig_t* config, const char* fn) {
  check_arg(out != nullptr, std::string(fn) + ": comm is NULL");
  *out = nullptr;
  ConfigView cv = read_config(config, fn);
  check_arg(nranks >= 1, fmt::format("{}: nranks {} must be >= 1", fn, nranks));
  check_arg(rank >= 0 && rank < nranks,
            fmt::format("{}: rank {} is out of range [0, {})", fn, rank, nranks));
  static_assert(sizeof(ncclUniqueId) == sizeof(mycollUniqueId), "unique id sizes differ");
  mycollUniqueId id;
  std::memcpy(&id, &commId, sizeof(id));
  const UniqueIdData data = unpack_unique_id(id);
  if (rank == 0 && !nccl_comm_id().empty()) start_root_listener(data, nranks, timeout_from_env());
  log_info(Subsys::Init, "{}: rank {}/{}{}{} {}", fn, rank, nranks, cv.name.empty() ? "" : " comm ",
           cv.name,
           cv.blocking && !in_group() ? "blocking"
                                      : "in a background thread (non-blocking "
                                        "config or inside a group)");
  const bool grouped = in_group();
  if (cv.blocking && !grouped) {
    mycollComm_t mc = nullptr;
    check_mycoll(comm_init_rank_cancellable(&mc, nranks, id, rank, {}, options_of(cv)), nullptr,
                 fn);
    *out = wrap(mc, cv);
    return ncclSuccess;
  }
  auto* w = new ncclComm;
  w->blocking = cv.blocking;
  w->name = cv.name;
  w->rank = rank;
  w->nranks = nranks;
  w->job = std::make_shared<InitJob>();
  const int dev = calling_device();
  std::thread([job = w->job, id, nranks, rank, dev, opts = options_of(cv)] {
#if MYCOLL_HAVE_CUDA
    if (dev >= 0) cudaSetDevice(dev);
#else
    (void)dev;
#endif
    mycollComm_t mc = nullptr;
    mycollResult_t r = comm_init_rank_cancellable(&mc, nranks, id, rank, job->cancel, opts);
    std::string err = r == mycollSuccess ? "" : mycollGetLastError(nullptr);
    std::lock_guard<std::mutex> lk(job->mu);
    job->done = true;
    job->result = r;
    job->error = err;
    job->comm = mc;
    if (job->cancel->load() && mc) mycollCommAbort(mc);  // ncclCommAbort came first
    job->cv.notify_all();
  }).detach();
  *out = w;
  if (grouped) group_add_init(w);
  return cv.blocking ? ncclSuccess : ncclInProgress;
}

}  // namespace

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  return guarded(nullptr, "ncclGetVersion", [&] {
    check_arg(version != nullptr, "ncclGetVersion: version is NULL");
    *version = kNcclVersionCode;
    return ncclSuccess;
  });
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  return guarded(nullptr, "ncclGetUniqueId", [&] {
    check_arg(uniqueId != nullptr, "ncclGetUniqueId: uniqueId is NULL");
    mycollUniqueId id;
    const std::string addr = nccl_comm_id();
    if (!addr.empty()) {
      id = pack_id(id_from_comm_id(addr));
    } else {
      check_mycoll(mycollGetUniqueId(&id), nullptr, "ncclGetUniqueId");
    }
    std::memcpy(uniqueId, &id, sizeof(id));
    return ncclSuccess;
  });
}

const char* ncclGetErrorString(ncclResult_t result) {
  const int code = enum_arg(result);
  if (code < ncclSuccess || code >= ncclNumResults) return "unknown result code";
  return mycollGetErrorString(static_cast<mycollResult_t>(code));
}

const char* ncclGetLastError(ncclComm_t comm) {
  if (comm && comm->magic == ncclComm::kMagic) {
    std::lock_guard<std::mutex> g(comm->mu);
    if (!comm->last_error.empty()) {
      thread_local std::string copy;
      copy = comm->last_error;
      return copy.c_str();
    }
  }
  return t_last_error.c_str();
}

void ncclResetDebugInit() {
  apply_nccl_env();
  log_info(Subsys::Init, "ncclResetDebugInit: mycoll reads its log settings once; no effect");
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return guarded(nullptr, "ncclCommInitRank", [&] {
    return init_common(comm, nranks, commId, rank, nullptr, "ncclCommInitRank");
  });
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config) {
  return guarded(nullptr, "ncclCommInitRankConfig", [&] {
    return init_common(comm, nranks, commId, rank, config, "ncclCommInitRankConfig");
  });
}

ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId* commIds, ncclConfig_t* config) {
  return guarded(nullptr, "ncclCommInitRankScalable", [&] {
    const char* fn = "ncclCommInitRankScalable";
    check_arg(nId >= 1, fmt::format("{}: nId {} must be >= 1", fn, nId));
    check_arg(commIds != nullptr, std::string(fn) + ": commIds is NULL");
    // mycoll's rendezvous serves any number of ranks from one root: every
    // rank uses the first id (the others' listeners time out unused).
    return init_common(newcomm, nranks, commIds[0], myrank, config, fn);
  });
}

ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  return guarded(nullptr, "ncclCommInitAll", [&] {
    check_arg(comms != nullptr, "ncclCommInitAll: comms is NULL");
    check_arg(ndev >= 1, fmt::format("ncclCommInitAll: ndev {} must be >= 1", ndev));
    std::vector<mycollComm_t> mcs(ndev, nullptr);
    check_mycoll(comm_init_all(mcs.data(), ndev, devlist, options_of(ConfigView{})), nullptr,
                 "ncclCommInitAll");
    for (int i = 0; i < ndev; ++i) comms[i] = wrap(mcs[i], ConfigView{});
    return ncclSuccess;
  });
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config) {
  return guarded(comm, "ncclCommSplit", [&] {
    const char* fn = "ncclCommSplit";
    mycollComm_t mc = ready_comm(comm, fn);
    check_arg(newcomm != nullptr, "ncclCommSplit: newcomm is NULL");
    *newcomm = nullptr;
    ConfigView cv = read_config(config, fn);
    if (!config) cv.blocking = comm->blocking;  // NCCL: the child inherits the parent's config
    const CommOptions opts = options_of(cv);
    mycollComm_t child = nullptr;
    check_mycoll(comm_split(mc, color, key, &child, config ? &opts : nullptr), mc, fn);
    if (child) *newcomm = wrap(child, cv);
    return ncclSuccess;
  });
}

ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                            ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  return guarded(comm, "ncclCommShrink", [&] {
    const char* fn = "ncclCommShrink";
    valid_comm(comm, fn);
    CommPin mc = pin_comm(ready_comm(comm, fn, false), PinMode::kShared, fn);
    check_arg(newcomm != nullptr, "ncclCommShrink: newcomm is NULL");
    *newcomm = nullptr;
    check_arg(shrinkFlags == NCCL_SHRINK_DEFAULT || shrinkFlags == NCCL_SHRINK_ABORT,
              fmt::format("{}: shrinkFlags {} is not NCCL_SHRINK_DEFAULT or NCCL_SHRINK_ABORT", fn,
                          shrinkFlags));
    check_arg(excludeRanksCount >= 0 && excludeRanksCount < mc->nranks,
              fmt::format("{}: excludeRanksCount {} must be in [0, {})", fn, excludeRanksCount,
                          mc->nranks));
    check_arg(excludeRanksCount == 0 || excludeRanksList != nullptr,
              std::string(fn) + ": excludeRanksList is NULL");
    std::vector<char> excluded(mc->nranks, 0);
    for (int i = 0; i < excludeRanksCount; ++i) {
      const int r = excludeRanksList[i];
      check_arg(r >= 0 && r < mc->nranks,
                fmt::format("{}: excluded rank {} is out of range [0, {})", fn, r, mc->nranks));
      check_arg(!excluded[r], fmt::format("{}: rank {} is excluded twice", fn, r));
      excluded[r] = 1;
    }
    check_arg(!excluded[mc->rank],
              fmt::format("{}: this rank ({}) is in excludeRanksList; excluded ranks must not "
                          "call ncclCommShrink",
                          fn, mc->rank));
    ConfigView cv = read_config(config, fn);
    if (!config) cv.blocking = comm->blocking;
    if (shrinkFlags == NCCL_SHRINK_ABORT && mc->device) mc->device->abort();
    std::vector<int> keep;
    for (int r = 0; r < mc->nranks; ++r)
      if (!excluded[r]) keep.push_back(r);
    // The lowest remaining rank makes the new rendezvous and hands its id
    // to the others over rescue links of the parent's bootstrap (excluded
    // ranks, possibly dead, take no part). Those work after a failure: a
    // GPU communicator fails as soon as it sees a rank's process end, and
    // shrinking that rank away is what the caller does next.
    mycollUniqueId uid;
    if (keep[0] == mc->rank) {
      check_mycoll(mycollGetUniqueId(&uid), nullptr, fn);
      for (size_t i = 1; i < keep.size(); ++i)
        mc->bootstrap->send_rescue(keep[i], &uid, sizeof(uid));
    } else {
      mc->bootstrap->recv_rescue(keep[0], &uid, sizeof(uid));
    }
    const int newrank =
        static_cast<int>(std::find(keep.begin(), keep.end(), mc->rank) - keep.begin());
    log_info(Subsys::Init, "{}: rank {} -> rank {} of {} ({} excluded{})", fn, mc->rank, newrank,
             keep.size(), excludeRanksCount,
             shrinkFlags == NCCL_SHRINK_ABORT ? ", parent's operations aborted" : "");
    const CommOptions opts = config ? options_of(cv) : mc->opts;
    mycollComm_t child =
        registry_add(comm_create(unpack_unique_id(uid), static_cast<int>(keep.size()), newrank,
                                 mc->cuda_device, nullptr, {}, &opts));
    *newcomm = wrap(child, cv);
    return ncclSuccess;
  });
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  return guarded(nullptr, "ncclCommFinalize", [&] {
    ready_comm(comm, "ncclCommFinalize", false);
    // mycoll's host collectives complete within their call and GPU work is
    // drained by ncclCommDestroy; finalize only closes the communicator to
    // new operations.
    comm->finalized = true;
    return ncclSuccess;
  });
}

ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  return guarded(comm, "ncclCommRevoke", [&] {
    CommPin mc =
        pin_comm(ready_comm(comm, "ncclCommRevoke", false), PinMode::kShared, "ncclCommRevoke");
    check_arg(
        revokeFlags == NCCL_REVOKE_DEFAULT,
        fmt::format("ncclCommRevoke: revokeFlags {} must be NCCL_REVOKE_DEFAULT (0)", revokeFlags));
    comm->revoked = true;
    if (mc->device) mc->device->abort();
    mc->fail(mycollInvalidUsage, "communicator revoked by ncclCommRevoke");
    return ncclSuccess;
  });
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  return guarded(nullptr, "ncclCommDestroy", [&] {
    if (!comm) return ncclSuccess;
    valid_comm(comm, "ncclCommDestroy");
    bool ok = true;
    try {
      settle_init(comm, true);
    } catch (const Error&) {
      ok = false;  // init failed: nothing of mycoll's to destroy
    }
    mycollComm_t mc = ok ? comm->mc.load() : nullptr;
    mycollResult_t r = mc ? mycollCommDestroy(mc) : mycollSuccess;
    std::string why = r == mycollSuccess ? "" : mycollGetLastError(nullptr);
    free_wrapper(comm);
    if (r != mycollSuccess) throw Forwarded(r, why);
    return ncclSuccess;
  });
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  return guarded(nullptr, "ncclCommAbort", [&] {
    if (!comm) return ncclSuccess;
    valid_comm(comm, "ncclCommAbort");
    if (!comm->mc.load() && comm->job) {
      InitJob& job = *comm->job;
      std::unique_lock<std::mutex> lk(job.mu);
      if (!job.done) {
        // Cancelled, the init thread ends within about 0.1 s while it waits
        // for peers (later, should it have succeeded meanwhile, it aborts
        // what it made): wait a little for it, so that nothing of the
        // communicator outlives the abort when it can be helped.
        job.cancel->store(true);
        job.cv.wait_for(lk, std::chrono::seconds(2), [&] { return job.done; });
      } else if (job.comm) {
        comm->mc.store(job.comm);
      }
    }
    if (mycollComm_t mc = comm->mc.load()) {
      {
        CommPin m = pin_comm(mc, PinMode::kShared, "ncclCommAbort");
        m->interrupt();
      }
      auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (comm->active.load() > 0 && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      mycollCommAbort(mc);
    }
    free_wrapper(comm);
    return ncclSuccess;
  });
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  return guarded(comm, "ncclCommGetAsyncError", [&] {
    valid_comm(comm, "ncclCommGetAsyncError");
    check_arg(asyncError != nullptr, "ncclCommGetAsyncError: asyncError is NULL");
    try {
      if (!settle_init(comm, false)) {
        *asyncError = ncclInProgress;
        return ncclSuccess;
      }
    } catch (const Error& e) {  // the non-blocking init failed: that is the async error
      *asyncError = to_nccl(e.code());
      record_error(comm, "non-blocking init", e.what(), comm->async_logged.exchange(true));
      return ncclSuccess;
    }
    mycollComm_t mc = comm->mc.load();
    mycollResult_t r = mycollSuccess;
    check_mycoll(mycollCommGetAsyncError(mc, &r), mc, "ncclCommGetAsyncError");
    *asyncError = to_nccl(r);
    if (r != mycollSuccess) {
      std::string why = mycollGetLastError(mc);
      record_error(comm, "communicator failed", why, comm->async_logged.exchange(true));
    }
    return ncclSuccess;
  });
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  return guarded(comm, "ncclCommCount", [&] {
    check_arg(count != nullptr, "ncclCommCount: count is NULL");
    ready_comm(comm, "ncclCommCount", false);
    *count = comm->nranks;
    return ncclSuccess;
  });
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  return guarded(comm, "ncclCommUserRank", [&] {
    check_arg(rank != nullptr, "ncclCommUserRank: rank is NULL");
    ready_comm(comm, "ncclCommUserRank", false);
    *rank = comm->rank;
    return ncclSuccess;
  });
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  return guarded(comm, "ncclCommCuDevice", [&] {
    check_arg(device != nullptr, "ncclCommCuDevice: device is NULL");
    mycollComm_t mc = ready_comm(comm, "ncclCommCuDevice", false);
    check_mycoll(mycollCommCuDevice(mc, device), mc, "ncclCommCuDevice");
    return ncclSuccess;
  });
}

}  // extern "C"

MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclGetVersion, (int*));
MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclGetUniqueId, (ncclUniqueId*));
MYCOLL_NCCL_PROFILING_ALIAS(const char*, ncclGetErrorString, (ncclResult_t));
MYCOLL_NCCL_PROFILING_ALIAS(const char*, ncclGetLastError, (ncclComm_t));
MYCOLL_NCCL_PROFILING_ALIAS(void, ncclResetDebugInit, ());
MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclCommInitRank, (ncclComm_t*, int, ncclUniqueId, int));
MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclCommInitRankConfig,
                            (ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*));
MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclCommInitRankScalable,
                            (ncclComm_t*, int, int, int, ncclUniqueId*, ncclConfig_t*));
MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclCommInitAll, (ncclComm_t*, int, const int*));
MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclCommSplit,
                            (ncclComm_t, int, int, ncclComm_t*, ncclConfig_t*));
MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclCommShrink,
                            (ncclComm_t, int*, int, ncclComm_t*, ncclConfig_t*, int));
MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclCommFinalize, (ncclComm_t));
MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclCommRevoke, (ncclComm_t, int));
MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclCommDestroy, (ncclComm_t));
MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclCommAbort, (ncclComm_t));
MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t, ncclResult_t*));
MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclCommCount, (const ncclComm_t, int*));
MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclCommUserRank, (const ncclComm_t, int*));
MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclCommCuDevice, (const ncclComm_t, int*));
