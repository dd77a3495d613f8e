// The benchmark loop of one thread: for every collective, type, op and size,
// time the out-of-place and in-place variants (and MPI's or NCCL's
// equivalent with --vs), check one extra run of each, and let the thread
// that drives global rank 0 print the table.
#pragma once

#include <string>
#include <vector>

#include "mycoll.h"
#include "nccl_compare.h"
#include "options.h"

namespace mycoll_perf {

struct MpiApi;  // mpi_compare.h

// One rank driven by the calling thread.
struct RankSlot {
  mycollComm_t comm = nullptr;
  int rank = 0;           // in the world communicator
  int device = -1;        // CUDA device (--mem cuda), -1 for host memory
  NcclComm nccl = nullptr;  // with --vs nccl: NCCL's communicator over the same GPU and rank
};

struct BenchSetup {
  // The ranks this thread drives: every call is issued for all of them, in
  // one mycollGroupStart/End (ncclGroupStart/End) when there are several.
  std::vector<RankSlot> slots;
  int nranks = 1;        // ranks in the world, over all processes and threads
  std::string topology;  // "8 processes x 1 thread x 1 GPU", for the header
  bool with_mpi = false;  // MPI_COMM_WORLD = the same ranks (MYCOLL_PERF_MPI builds only)
  bool with_nccl = false;  // every slot has an NCCL communicator
  const MpiApi* vs = nullptr;  // --vs gloo: Gloo behind the MPI-shaped table (gloo_compare.h)
};

// Runs on every thread of every process with the same options. Returns 0
// when every checked element of mycoll's outputs on every rank was right, 1
// when some #wrong > 0 (the same on every rank); throws std::runtime_error
// when a call fails.
int run_benchmark(const BenchSetup& setup, const Options& o);

// One rank per process (host memory, or MPI): comm's rank and size.
int run_benchmark(mycollComm_t comm, int rank, int nranks, const Options& o, bool with_mpi);
// One rank per process, host memory, compared with `vs` (--vs gloo).
int run_benchmark_vs(mycollComm_t comm, int rank, int nranks, const Options& o, const MpiApi* vs);

}  // namespace mycoll_perf
