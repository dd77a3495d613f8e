// --mem cuda: how ranks map onto processes, threads and GPUs (as in
// nccl-tests), and creation of mycoll's (and with --vs nccl NCCL's)
// communicators over them. Built only with CUDA (MYCOLL_PERF_CUDA).
//
//   world = processes x threads (-t) x GPUs per thread (-g)
//   thread t of process p drives ranks (p*T + t)*G + g, g < G, on local
//   GPUs (local_p*T + t)*G + g, where local_p is p with --np, or the
//   launcher's local rank (LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, ...).
//
// Processes: --np N forks N (the parent forks first and makes no CUDA call:
// the GPU count is probed in a forked child); or one per launcher rank
// (mycollCommInitFromEnv gives the process communicator, which relays the
// other ids); or one. Ids: process 0 makes mycoll's unique id (and NCCL's)
// and relays them (pipes, or a broadcast on the process communicator);
// every rank calls mycollCommInitRank on its device (one helper thread per
// GPU when -g > 1). One process, one thread, -g G > 1: mycollCommInitAll
// and ncclCommInitAll instead.
#pragma once

#include "options.h"

namespace mycoll_perf {

// Runs the whole --mem cuda benchmark; returns the exit status (0 ok, 1
// some #wrong, 2 error; 0 with "SKIP: ..." when --skip-without-gpu and too
// few GPUs).
int run_gpu(const Options& o);

// Under mpirun (--vs mpi --mem cuda): selects the GPU of this process'
// local rank before the communicator is created. Throws when there is none.
void select_local_gpu();

}  // namespace mycoll_perf
