// Memory, buffer registration, and the device API (refused: it needs
// NCCL's symmetric-memory kernels, which mycoll does not have).
#include <cstring>

#include "comm/comm.h"
#include "base/log.h"
#include "engine/device_engine.h"
#include "nccl/shim.h"

#if MYCOLL_HAVE_CUDA
#include <cuda_runtime.h>
#endif

using namespace mycoll;
using namespace mycoll::nccl;

// The device API's host-side types (nccl_device/core.h), declared here so
// the library builds without that header. Only ncclTeam's layout matters
// (returned by value); the others are passed by pointer.
struct ncclTeam {
  int nRanks, rank, stride;
};
struct ncclDevComm;
struct ncclDevCommRequirements;
struct ncclDevResourceRequirements;
struct ncclLsaBarrierHandle;
struct ncclGinBarrierHandle;
struct ncclLLA2AHandle;

namespace {

constexpr const char* kDeviceApi =
    "the NCCL device API (ncclDevComm, LSA/GIN barriers, LL all-to-all) needs NCCL's "
    "symmetric-memory device runtime; use the host collectives";

// Checks a buffer given for registration: non-null, non-empty, and of the
// memory kind the communicator works on (where GPUs exist).
void check_buffer(mycollComm_t mc, const void* buff, size_t size, const char* fn) {
  check_arg(buff != nullptr, std::string(fn) + ": buff is NULL");
  check_arg(size > 0, std::string(fn) + ": size is 0");
  if (cuda_device_count() > 0) {
    const bool dev = is_device_pointer(buff);
    int cdev = -1;
    mycollCommCuDevice(mc, &cdev);
    const bool want = cdev >= 0;
    check_arg(dev == want, fmt::format("{}: buffer {} is {} memory but the communicator is {}", fn,
                                       buff, dev ? "device" : "host",
                                       want ? "bound to a GPU" : "host-only"));
  }
}

// Device-API entry points with no result code: a WARN line and the reason
// in ncclGetLastError, then a value that names no resource.
void refuse_quietly(const char* fn) {
  apply_nccl_env();
  record_error(nullptr, fn, std::string("not served by mycoll's libnccl.so.2: ") + kDeviceApi,
               false);
}

}  // namespace

extern "C" {

ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  return guarded(nullptr, "ncclMemAlloc", [&]() -> ncclResult_t {
    check_arg(ptr != nullptr, "ncclMemAlloc: ptr is NULL");
    *ptr = nullptr;
#if MYCOLL_HAVE_CUDA
    cudaError_t e = cudaMalloc(ptr, size);
    if (e != cudaSuccess)
      throw_error(mycollUnhandledCudaError,
                  fmt::format("ncclMemAlloc: cudaMalloc({}) failed: {}", size, cudaGetErrorString(e)));
    return ncclSuccess;
#else
    (void)size;
    refuse("ncclMemAlloc", "this libnccl.so.2 was built without CUDA (GPU memory unavailable)");
#endif
  });
}

ncclResult_t ncclMemFree(void* ptr) {
  return guarded(nullptr, "ncclMemFree", [&]() -> ncclResult_t {
    if (!ptr) return ncclSuccess;
#if MYCOLL_HAVE_CUDA
    cudaError_t e = cudaFree(ptr);
    if (e != cudaSuccess)
      throw_error(mycollUnhandledCudaError,
                  fmt::format("ncclMemFree: cudaFree failed: {}", cudaGetErrorString(e)));
    return ncclSuccess;
#else
    refuse("ncclMemFree", "this libnccl.so.2 was built without CUDA (GPU memory unavailable)");
#endif
  });
}

// mycoll moves data through its own FIFOs and maps no user buffers, so a
// registration is validated and recorded (and returned on deregistration)
// but changes no data path.
ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  return guarded(comm, "ncclCommRegister", [&] {
    mycollComm_t mc = ready_comm(comm, "ncclCommRegister", false);
    check_arg(handle != nullptr, "ncclCommRegister: handle is NULL");
    check_buffer(mc, buff, size, "ncclCommRegister");
    auto* win = new ncclWindow_vidmem{comm, buff, size, -1};
    std::lock_guard<std::mutex> g(comm->mu);
    comm->registrations.insert(win);
    *handle = win;
    return ncclSuccess;
  });
}

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  return guarded(comm, "ncclCommDeregister", [&] {
    ready_comm(comm, "ncclCommDeregister", false);
    std::lock_guard<std::mutex> g(comm->mu);
    check_arg(handle && comm->registrations.erase(handle) == 1,
              "ncclCommDeregister: handle is not a registration of this communicator");
    delete static_cast<ncclWindow_vidmem*>(handle);
    return ncclSuccess;
  });
}

ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                    int winFlags) {
  return guarded(comm, "ncclCommWindowRegister", [&] {
    const char* fn = "ncclCommWindowRegister";
    mycollComm_t mc = ready_comm(comm, fn, false);
    check_arg(win != nullptr, std::string(fn) + ": win is NULL");
    check_arg(winFlags == NCCL_WIN_DEFAULT || winFlags == NCCL_WIN_COLL_SYMMETRIC,
              fmt::format("{}: winFlags {:#x} is not NCCL_WIN_DEFAULT or NCCL_WIN_COLL_SYMMETRIC",
                          fn, winFlags));
    check_buffer(mc, buff, size, fn);
    auto* w = new ncclWindow_vidmem{comm, buff, size, winFlags};
    std::lock_guard<std::mutex> g(comm->mu);
    comm->windows.insert(w);
    *win = w;
    return ncclSuccess;
  });
}

ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  return guarded(comm, "ncclCommWindowDeregister", [&] {
    ready_comm(comm, "ncclCommWindowDeregister", false);
    std::lock_guard<std::mutex> g(comm->mu);
    check_arg(win && comm->windows.erase(win) == 1,
              "ncclCommWindowDeregister: win is not a window of this communicator");
    delete win;
    return ncclSuccess;
  });
}

// ---- the device API --------------------------------------------------------

ncclResult_t ncclDevCommCreate(ncclComm_t comm, const ncclDevCommRequirements* reqs,
                               ncclDevComm* outDevComm) {
  return guarded(comm, "ncclDevCommCreate", [&]() -> ncclResult_t {
    refuse("ncclDevCommCreate", kDeviceApi);
  });
}

ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const ncclDevComm* devComm) {
  return guarded(comm, "ncclDevCommDestroy", [&]() -> ncclResult_t {
    refuse("ncclDevCommDestroy", kDeviceApi);
  });
}

ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam team, int nBarriers,
                                             ncclLsaBarrierHandle* outHandle,
                                             ncclDevResourceRequirements* outReq) {
  return guarded(nullptr, "ncclLsaBarrierCreateRequirement", [&]() -> ncclResult_t {
    refuse("ncclLsaBarrierCreateRequirement", kDeviceApi);
  });
}

ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam team, int nBarriers,
                                             ncclGinBarrierHandle* outHandle,
                                             ncclDevResourceRequirements* outReq) {
  return guarded(comm, "ncclGinBarrierCreateRequirement", [&]() -> ncclResult_t {
    refuse("ncclGinBarrierCreateRequirement", kDeviceApi);
  });
}

ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle* outHandle,
                                        ncclDevResourceRequirements* outReq) {
  return guarded(nullptr, "ncclLLA2ACreateRequirement", [&]() -> ncclResult_t {
    refuse("ncclLLA2ACreateRequirement", kDeviceApi);
  });
}

int ncclLLA2ACalcSlots(int maxElts, int maxEltSize) {
  refuse_quietly("ncclLLA2ACalcSlots");
  return 0;
}

// Teams describe ranks as the device API sees them. The world team is the
// communicator; mycoll maps no peer memory, so the load/store-accessible
// (LSA) team is this rank alone and the rail team (one rank per LSA team)
// is the world.
ncclTeam ncclTeamWorld(ncclComm_t comm) {
  apply_nccl_env();
  if (!comm || comm->magic != ncclComm::kMagic) return ncclTeam{0, 0, 1};
  return ncclTeam{comm->nranks, comm->rank, 1};
}

ncclTeam ncclTeamLsa(ncclComm_t comm) {
  apply_nccl_env();
  return ncclTeam{1, 0, 1};
}

ncclTeam ncclTeamRail(ncclComm_t comm) { return ncclTeamWorld(comm); }

int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam team, int rank) {
  const int me = comm && comm->magic == ncclComm::kMagic ? comm->rank : 0;
  return me + (rank - team.rank) * team.stride;
}

int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam team, int rank) {
  // Every LSA team has one rank: only this rank itself is in it.
  const int world = ncclTeamRankToWorld(comm, team, rank);
  const int me = comm && comm->magic == ncclComm::kMagic ? comm->rank : 0;
  return world == me ? 0 : -1;
}

}  // extern "C"

MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclMemAlloc, (void**, size_t));
MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclMemFree, (void*));
MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclCommRegister, (const ncclComm_t, void*, size_t, void**));
MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclCommDeregister, (const ncclComm_t, void*));
MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclCommWindowRegister,
                            (ncclComm_t, void*, size_t, ncclWindow_t*, int));
MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t, ncclWindow_t));
MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclDevCommCreate,
                            (ncclComm_t, const ncclDevCommRequirements*, ncclDevComm*));
MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclDevCommDestroy, (ncclComm_t, const ncclDevComm*));
MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclLsaBarrierCreateRequirement,
                            (ncclTeam, int, ncclLsaBarrierHandle*, ncclDevResourceRequirements*));
MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclGinBarrierCreateRequirement,
                            (ncclComm_t, ncclTeam, int, ncclGinBarrierHandle*,
                             ncclDevResourceRequirements*));
MYCOLL_NCCL_PROFILING_ALIAS(ncclResult_t, ncclLLA2ACreateRequirement,
                            (int, int, ncclLLA2AHandle*, ncclDevResourceRequirements*));
MYCOLL_NCCL_PROFILING_ALIAS(int, ncclLLA2ACalcSlots, (int, int));
MYCOLL_NCCL_PROFILING_ALIAS(ncclTeam, ncclTeamWorld, (ncclComm_t));
MYCOLL_NCCL_PROFILING_ALIAS(ncclTeam, ncclTeamLsa, (ncclComm_t));
MYCOLL_NCCL_PROFILING_ALIAS(ncclTeam, ncclTeamRail, (ncclComm_t));
MYCOLL_NCCL_PROFILING_ALIAS(int, ncclTeamRankToWorld, (ncclComm_t, ncclTeam, int));
MYCOLL_NCCL_PROFILING_ALIAS(int, ncclTeamRankToLsa, (ncclComm_t, ncclTeam, int));
