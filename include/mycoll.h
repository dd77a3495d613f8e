/*
 * mycoll: collective communication for GPUs and CPU processes.
 *
 * The only header users include. C99, stable ABI: enum values are fixed
 * forever and equal NCCL's, so a compatibility layer is a rename.
 */
#ifndef MYCOLL_H_
#define MYCOLL_H_

#include <stddef.h>

#define MYCOLL_MAJOR 0
#define MYCOLL_MINOR 1
#define MYCOLL_PATCH 0
#define MYCOLL_VERSION(X, Y, Z) ((X)*10000 + (Y)*100 + (Z))
#define MYCOLL_VERSION_CODE MYCOLL_VERSION(MYCOLL_MAJOR, MYCOLL_MINOR, MYCOLL_PATCH)

#if defined(__GNUC__)
#define MYCOLL_API __attribute__((visibility("default")))
#else
#define MYCOLL_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* In C++ the enums' underlying type is fixed to int (the type they promote
 * to anyway), so that every value a C caller can pass is a value of the type
 * and the library's range checks of arguments are well-defined C++. Sizes
 * and values are the same in C and C++. */
#ifdef __cplusplus
#define MYCOLL_ENUM_BASE : int
#else
#define MYCOLL_ENUM_BASE
#endif

typedef enum MYCOLL_ENUM_BASE {
  mycollSuccess = 0,
  mycollUnhandledCudaError = 1,
  mycollSystemError = 2,
  mycollInternalError = 3,
  mycollInvalidArgument = 4,
  mycollInvalidUsage = 5,
  mycollRemoteError = 6,
  mycollInProgress = 7,
  mycollTimeout = 8,
  mycollNumResults = 9
} mycollResult_t;

typedef enum MYCOLL_ENUM_BASE {
  mycollInt8 = 0,
  mycollChar = 0,
  mycollUint8 = 1,
  mycollInt32 = 2,
  mycollInt = 2,
  mycollUint32 = 3,
  mycollInt64 = 4,
  mycollUint64 = 5,
  mycollFloat16 = 6,
  mycollHalf = 6,
  mycollFloat32 = 7,
  mycollFloat = 7,
  mycollFloat64 = 8,
  mycollDouble = 8,
  mycollBfloat16 = 9,
  /* 8-bit floats (OCP FP8): e4m3 (no infinities, max 448) and e5m2. Reductions
   * compute in fp32 and round to nearest even, saturating to the largest
   * finite value (NaN stays NaN). */
  mycollFloat8e4m3 = 10,
  mycollFloat8e5m2 = 11,
  mycollNumTypes = 12
} mycollDataType_t;

typedef enum MYCOLL_ENUM_BASE {
  mycollSum = 0,
  mycollProd = 1,
  mycollMax = 2,
  mycollMin = 3,
  mycollAvg = 4,
  mycollNumOps = 5
} mycollRedOp_t;

#define MYCOLL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[MYCOLL_UNIQUE_ID_BYTES];
} mycollUniqueId;

typedef struct mycollComm* mycollComm_t;

/* A cudaStream_t converts to this without including CUDA headers. */
typedef struct CUstream_st* mycollStream_t;

/* Version as MYCOLL_VERSION_CODE. */
MYCOLL_API mycollResult_t mycollGetVersion(int* version);
/* Static string naming a result code. */
MYCOLL_API const char* mycollGetErrorString(mycollResult_t result);
/* Human-readable reason for the last failure on comm (or on this thread when
 * comm is NULL). Never NULL; "" when nothing failed. */
MYCOLL_API const char* mycollGetLastError(mycollComm_t comm);

/* Called on one rank; starts the rendezvous listener in this process and
 * fills id with its address and a random 128-bit secret. Pass id to every
 * rank out of band. */
MYCOLL_API mycollResult_t mycollGetUniqueId(mycollUniqueId* uniqueId);
MYCOLL_API mycollResult_t mycollCommInitRank(mycollComm_t* comm, int nranks, mycollUniqueId commId,
                                             int rank);
/* One process, ndev ranks on GPUs devlist[i] (NULL = 0..ndev-1; a device
 * may repeat: ranks then share it). A thread driving several ranks issues
 * their calls between mycollGroupStart and mycollGroupEnd, where they may
 * share a stream if they share a GPU; outside a group one rank's collective
 * waits for the others', so each rank then needs a stream (or thread) of
 * its own. A stream of another GPU than the rank's is mycollInvalidArgument,
 * before anything of the call or group runs. */
MYCOLL_API mycollResult_t mycollCommInitAll(mycollComm_t* comms, int ndev, const int* devlist);
/* Rank, size and rendezvous from MYCOLL_RANK/MYCOLL_NRANKS/MYCOLL_ADDR, else
 * torchrun's RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, else Open MPI's or
 * Slurm's rank variables with MYCOLL_ADDR or MASTER_ADDR/MASTER_PORT. */
MYCOLL_API mycollResult_t mycollCommInitFromEnv(mycollComm_t* comm);
MYCOLL_API mycollResult_t mycollCommDestroy(mycollComm_t comm);
MYCOLL_API mycollResult_t mycollCommAbort(mycollComm_t comm);
/* Collective over comm; color < 0 (MYCOLL_SPLIT_NOCOLOR) gives *newcomm = NULL. */
#define MYCOLL_SPLIT_NOCOLOR -1
MYCOLL_API mycollResult_t mycollCommSplit(mycollComm_t comm, int color, int key,
                                          mycollComm_t* newcomm);
MYCOLL_API mycollResult_t mycollCommCount(const mycollComm_t comm, int* count);
MYCOLL_API mycollResult_t mycollCommUserRank(const mycollComm_t comm, int* rank);
/* CUDA device of comm; -1 for a host-only communicator. */
MYCOLL_API mycollResult_t mycollCommCuDevice(const mycollComm_t comm, int* device);
MYCOLL_API mycollResult_t mycollCommGetAsyncError(mycollComm_t comm, mycollResult_t* asyncError);
/* Writes comm's flight recorder (the last MYCOLL_FLIGHT_RECORDER operations:
 * sequence number, collective, state, timestamps, peer waited on) as JSON to
 * path, or to MYCOLL_FLIGHT_RECORDER_FILE when path is NULL (%r rank, %c
 * communicator id, %h host, %p pid). mycollInvalidUsage when the recorder is
 * off; tools/flight/mycoll-flight reads every rank's file. Any thread. */
MYCOLL_API mycollResult_t mycollCommDump(mycollComm_t comm, const char* path);

/* Collectives and send/recv. On a GPU communicator a call is enqueued on
 * stream and returns; it may be captured into a CUDA graph (any capture
 * mode, no warm-up call needed; buffers allocated inside the capture are
 * accepted) and the graph replayed between eager calls. Communicators are
 * not created under capture. On a host communicator the call returns when
 * this rank's part is done. */
MYCOLL_API mycollResult_t mycollAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                          mycollDataType_t datatype, mycollRedOp_t op,
                                          mycollComm_t comm, mycollStream_t stream);
MYCOLL_API mycollResult_t mycollBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                          mycollDataType_t datatype, int root, mycollComm_t comm,
                                          mycollStream_t stream);
MYCOLL_API mycollResult_t mycollReduce(const void* sendbuff, void* recvbuff, size_t count,
                                       mycollDataType_t datatype, mycollRedOp_t op, int root,
                                       mycollComm_t comm, mycollStream_t stream);
MYCOLL_API mycollResult_t mycollAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                          mycollDataType_t datatype, mycollComm_t comm,
                                          mycollStream_t stream);
MYCOLL_API mycollResult_t mycollReduceScatter(const void* sendbuff, void* recvbuff,
                                              size_t recvcount, mycollDataType_t datatype,
                                              mycollRedOp_t op, mycollComm_t comm,
                                              mycollStream_t stream);
/* count elements to and from each peer. */
MYCOLL_API mycollResult_t mycollAllToAll(const void* sendbuff, void* recvbuff, size_t count,
                                         mycollDataType_t datatype, mycollComm_t comm,
                                         mycollStream_t stream);
/* count elements per rank. */
MYCOLL_API mycollResult_t mycollScatter(const void* sendbuff, void* recvbuff, size_t count,
                                        mycollDataType_t datatype, int root, mycollComm_t comm,
                                        mycollStream_t stream);
MYCOLL_API mycollResult_t mycollGather(const void* sendbuff, void* recvbuff, size_t count,
                                       mycollDataType_t datatype, int root, mycollComm_t comm,
                                       mycollStream_t stream);
MYCOLL_API mycollResult_t mycollSend(const void* sendbuff, size_t count, mycollDataType_t datatype,
                                     int peer, mycollComm_t comm, mycollStream_t stream);
MYCOLL_API mycollResult_t mycollRecv(void* recvbuff, size_t count, mycollDataType_t datatype,
                                     int peer, mycollComm_t comm, mycollStream_t stream);

/* Calls between GroupStart and GroupEnd are queued and complete at GroupEnd,
 * deadlock-free whatever order ranks posted them in. Groups nest. */
MYCOLL_API mycollResult_t mycollGroupStart(void);
MYCOLL_API mycollResult_t mycollGroupEnd(void);

#ifdef __cplusplus
}
#endif

#endif /* MYCOLL_H_ */
