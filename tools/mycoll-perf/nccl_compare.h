// NCCL, for `--vs nccl`: loaded at run time with dlopen("libnccl.so.2") (no
// nccl.h needed at build time: the few symbols used are declared here, with
// NCCL's ABI), and the NCCL equivalent of each benchmarked collective, on
// the same buffers and stream as mycoll's.
//
// NCCL's enums equal mycoll's (datatypes int8=0 .. bfloat16=9, ops sum=0 ..
// avg=4), so mycoll's values are passed through unchanged.
#pragma once

#include <cstddef>
#include <string>

#include "colls.h"
#include "mycoll.h"

namespace mycoll_perf {

using NcclComm = void*;  // ncclComm_t
struct NcclUniqueId {
  char internal[128];  // NCCL_UNIQUE_ID_BYTES
};

// Function table of libnccl.so.2 (ncclResult_t and the enums are int).
struct NcclApi {
  int (*GetVersion)(int* version);
  int (*GetUniqueId)(NcclUniqueId* id);
  int (*CommInitRank)(NcclComm* comm, int nranks, NcclUniqueId id, int rank);
  int (*CommInitAll)(NcclComm* comms, int ndev, const int* devlist);
  int (*CommDestroy)(NcclComm comm);
  int (*CommAbort)(NcclComm comm);                      // may be null (old NCCL)
  int (*CommGetAsyncError)(NcclComm comm, int* async_error);
  const char* (*GetErrorString)(int result);
  const char* (*GetLastError)(NcclComm comm);           // may be null (old NCCL)
  int (*AllReduce)(const void*, void*, size_t, int type, int op, NcclComm, mycollStream_t);
  int (*AllGather)(const void*, void*, size_t sendcount, int type, NcclComm, mycollStream_t);
  int (*ReduceScatter)(const void*, void*, size_t recvcount, int type, int op, NcclComm,
                       mycollStream_t);
  int (*Broadcast)(const void*, void*, size_t, int type, int root, NcclComm, mycollStream_t);
  int (*Reduce)(const void*, void*, size_t, int type, int op, int root, NcclComm, mycollStream_t);
  int (*Send)(const void*, size_t, int type, int peer, NcclComm, mycollStream_t);
  int (*Recv)(void*, size_t, int type, int peer, NcclComm, mycollStream_t);
  int (*GroupStart)();
  int (*GroupEnd)();
  std::string path;  // what was loaded
  int version = 0;   // ncclGetVersion: 22809 for 2.28.9
};

// Loads NCCL once (thread-safe): MYCOLL_PERF_NCCL_LIB if set, else
// libnccl.so.2, else libnccl.so. Throws std::runtime_error saying what is
// missing (library or symbol) when it cannot.
const NcclApi& nccl_api();

// "2.28.9 (/lib/x86_64-linux-gnu/libnccl.so.2)"
std::string nccl_describe();

// Throws std::runtime_error("<what> failed: <NCCL error string>: <last error>")
// unless r is ncclSuccess (0).
void nccl_must(int r, const std::string& what, NcclComm comm);

// Throws when comm reports an asynchronous error (ncclCommGetAsyncError).
void nccl_check_async(NcclComm comm, int rank);

// The NCCL call for collective c on `rank` of `nranks`, out of place:
//   all_reduce ncclAllReduce, all_gather ncclAllGather, reduce_scatter
//   ncclReduceScatter, broadcast ncclBroadcast, reduce ncclReduce;
//   as nccl-tests does: alltoall = one ncclSend + ncclRecv per peer, scatter =
//   the root's ncclSend to every rank + ncclRecv from the root, gather = the
//   reverse, all in one ncclGroupStart/End; sendrecv = ncclSend to rank+1 and
//   ncclRecv from rank-1 in one group (the ring mycoll-perf times).
// Returns NCCL's result (0 = success).
int run_nccl(const CollInfo& c, const void* send, void* recv, size_t count, mycollDataType_t t,
             mycollRedOp_t op, int root, int rank, int nranks, NcclComm comm,
             mycollStream_t stream);

}  // namespace mycoll_perf
