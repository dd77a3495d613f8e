#include "nccl_compare.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <stdexcept>

#include "datatypes.h"

namespace mycoll_perf {
namespace {

constexpr int kNcclSuccess = 0;
constexpr int kNcclInProgress = 7;

NcclApi g_api;
std::string g_load_error;

template <class F>
bool sym(void* lib, const char* name, F* fn, bool required) {
  *fn = reinterpret_cast<F>(dlsym(lib, name));
  if (*fn || !required) return true;
  g_load_error = std::string("--vs nccl: ") + g_api.path + " has no symbol " + name +
                 " (NCCL too old?)";
  return false;
}

void load() {
  std::string tried;
  void* lib = nullptr;
  const char* env = std::getenv("MYCOLL_PERF_NCCL_LIB");
  for (const char* name : {env, "libnccl.so.2", "libnccl.so"}) {
    if (!name || !*name) continue;
    lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      g_api.path = name;
      break;
    }
    const char* why = dlerror();
    tried += std::string("\n  ") + name + ": " + (why ? why : "not found");
    if (name == env) break;  // an explicit choice that fails is an error, no fallback
  }
  if (!lib) {
    g_load_error = "--vs nccl: cannot load NCCL (install libnccl2, or set MYCOLL_PERF_NCCL_LIB "
                   "to libnccl.so.2's path):" + tried;
    return;
  }
  Dl_info info;
  if (dladdr(dlsym(lib, "ncclGetVersion"), &info) && info.dli_fname) g_api.path = info.dli_fname;
  NcclApi& a = g_api;
  bool ok = sym(lib, "ncclGetVersion", &a.GetVersion, true) &&
            sym(lib, "ncclGetUniqueId", &a.GetUniqueId, true) &&
            sym(lib, "ncclCommInitRank", &a.CommInitRank, true) &&
            sym(lib, "ncclCommInitAll", &a.CommInitAll, true) &&
            sym(lib, "ncclCommDestroy", &a.CommDestroy, true) &&
            sym(lib, "ncclCommAbort", &a.CommAbort, false) &&
            sym(lib, "ncclCommGetAsyncError", &a.CommGetAsyncError, true) &&
            sym(lib, "ncclGetErrorString", &a.GetErrorString, true) &&
            sym(lib, "ncclGetLastError", &a.GetLastError, false) &&
            sym(lib, "ncclAllReduce", &a.AllReduce, true) &&
            sym(lib, "ncclAllGather", &a.AllGather, true) &&
            sym(lib, "ncclReduceScatter", &a.ReduceScatter, true) &&
            sym(lib, "ncclBroadcast", &a.Broadcast, true) &&
            sym(lib, "ncclReduce", &a.Reduce, true) && sym(lib, "ncclSend", &a.Send, true) &&
            sym(lib, "ncclRecv", &a.Recv, true) &&
            sym(lib, "ncclGroupStart", &a.GroupStart, true) &&
            sym(lib, "ncclGroupEnd", &a.GroupEnd, true);
  if (!ok) return;
  if (a.GetVersion(&a.version) != kNcclSuccess) a.version = 0;
}

// Runs the calls of one rank's send/recv pattern in one NCCL group.
template <class F>
int grouped(const NcclApi& a, F body) {
  int r = a.GroupStart();
  if (r != kNcclSuccess) return r;
  int first = body();
  r = a.GroupEnd();  // always close the group
  return first != kNcclSuccess ? first : r;
}

}  // namespace

const NcclApi& nccl_api() {
  static std::once_flag once;
  std::call_once(once, load);
  if (!g_load_error.empty()) throw std::runtime_error(g_load_error);
  return g_api;
}

std::string nccl_describe() {
  const NcclApi& a = nccl_api();
  const int v = a.version;
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100) + " (" + a.path + ")";
}

void nccl_must(int r, const std::string& what, NcclComm comm) {
  if (r == kNcclSuccess) return;
  const NcclApi& a = nccl_api();
  std::string msg = what + " failed: " + a.GetErrorString(r);
  if (a.GetLastError) {
    const char* last = a.GetLastError(comm);
    if (last && *last) msg += std::string(": ") + last;
  }
  throw std::runtime_error(msg);
}

void nccl_check_async(NcclComm comm, int rank) {
  if (!comm) return;
  const NcclApi& a = nccl_api();
  int async = kNcclSuccess;
  int r = a.CommGetAsyncError(comm, &async);
  if (r != kNcclSuccess) nccl_must(r, "rank " + std::to_string(rank) + ": ncclCommGetAsyncError", comm);
  if (async != kNcclSuccess && async != kNcclInProgress)
    nccl_must(async, "rank " + std::to_string(rank) + ": NCCL (asynchronous error)", comm);
}

int run_nccl(const CollInfo& c, const void* send, void* recv, size_t count, mycollDataType_t t,
             mycollRedOp_t op, int root, int rank, int n, NcclComm comm, mycollStream_t s) {
  const NcclApi& a = nccl_api();
  const int dt = static_cast<int>(t), o = static_cast<int>(op);
  const size_t blk = count * dtype_size(t);  // bytes of one rank's block
  const char* sp = static_cast<const char*>(send);
  char* rp = static_cast<char*>(recv);
  switch (c.id) {
    case CollId::AllReduce: return a.AllReduce(send, recv, count, dt, o, comm, s);
    case CollId::AllGather: return a.AllGather(send, recv, count, dt, comm, s);
    case CollId::ReduceScatter: return a.ReduceScatter(send, recv, count, dt, o, comm, s);
    case CollId::Broadcast: return a.Broadcast(send, recv, count, dt, root, comm, s);
    case CollId::Reduce: return a.Reduce(send, recv, count, dt, o, root, comm, s);
    case CollId::AllToAll:
      return grouped(a, [&] {
        for (int p = 0; p < n; ++p) {
          int r = a.Send(sp + blk * p, count, dt, p, comm, s);
          if (r == kNcclSuccess) r = a.Recv(rp + blk * p, count, dt, p, comm, s);
          if (r != kNcclSuccess) return r;
        }
        return kNcclSuccess;
      });
    case CollId::Scatter:
      return grouped(a, [&] {
        if (rank == root)
          for (int p = 0; p < n; ++p) {
            int r = a.Send(sp + blk * p, count, dt, p, comm, s);
            if (r != kNcclSuccess) return r;
          }
        return a.Recv(recv, count, dt, root, comm, s);
      });
    case CollId::Gather:
      return grouped(a, [&] {
        int r = a.Send(send, count, dt, root, comm, s);
        if (r != kNcclSuccess || rank != root) return r;
        for (int p = 0; p < n; ++p) {
          r = a.Recv(rp + blk * p, count, dt, p, comm, s);
          if (r != kNcclSuccess) return r;
        }
        return kNcclSuccess;
      });
    case CollId::SendRecv:
      return grouped(a, [&] {
        int r = a.Send(send, count, dt, (rank + 1) % n, comm, s);
        if (r == kNcclSuccess) r = a.Recv(recv, count, dt, (rank + n - 1) % n, comm, s);
        return r;
      });
  }
  return 4;  // ncclInvalidArgument
}

}  // namespace mycoll_perf
