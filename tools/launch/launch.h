// Tiny launcher shared by mycoll-perf and the examples (library mycoll_launch):
// gives a per-rank function an initialised communicator, however the program
// was started.
// Uses only the public C API (mycoll.h).
//
//   prog --np 4           forks 4 local ranks itself (see launch())
//   mpirun -np 4 prog     each process is one rank, through mycollCommInitFromEnv
//   torchrun / srun ...   same (rank/size variables of the launcher)
//   prog                  a single rank
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "mycoll.h"

namespace mycoll_launch {

// Runs once per rank with an initialised communicator; returns the rank's
// exit status (0 = success). The launcher destroys comm afterwards.
using RankMain = std::function<int(mycollComm_t comm, int rank, int nranks)>;

// True when a launcher set a rank variable that mycollCommInitFromEnv reads
// (MYCOLL_RANK, RANK, OMPI_COMM_WORLD_RANK, PMIX_RANK or SLURM_PROCID).
bool launched_by_env();

// np > 0: forks np local ranks. The parent forks every child FIRST and never
// calls the library; rank 0's child calls mycollGetUniqueId and writes the id
// into one pipe per other rank; the others read it (bounded wait) and call
// mycollCommInitRank. The parent waits for all children; when one fails it
// gives the others grace_s seconds to finish, then kills them. Returns 0 when
// every rank returned 0, else the largest status a rank returned (2 for a
// rank killed by a signal); the failing ranks are named on stderr.
//
// np == 0 and launched_by_env(): mycollCommInitFromEnv (needs MYCOLL_ADDR=host:port
// or MASTER_ADDR/MASTER_PORT, reachable by every rank; rank 0 listens there),
// then body; returns body's status.
// np == 0 otherwise: one rank (nranks 1), then body.
//
// before_init (optional) runs in each rank's process right before its
// communicator is created, with the rank (-1 when it comes from the
// environment and is not known yet): e.g. cudaSetDevice for GPU ranks.
int launch(int np, const RankMain& body, double grace_s = 30.0,
           const std::function<void(int rank)>& before_init = nullptr);

// ---- Lower-level pieces, for programs that create their communicators
// themselves (several per process, GPU selection, other libraries' ids). ----

// Sends `bytes` bytes at data from process 0 to every other process of the
// group (process 0: in; others: out). Every process must call it the same
// number of times with the same sizes. Returns false (after printing why)
// when process 0 is gone or did not send within the relay timeout (120 s).
using Share = std::function<bool(void* data, size_t bytes)>;
using ProcMain = std::function<int(int proc, int nprocs, const Share& share)>;

// Forks np >= 1 processes (the parent forks all of them FIRST and calls
// nothing else: no library, no CUDA) and runs body(proc, np, share) in each;
// share relays bytes from process 0 through pipes. Exit statuses, the grace
// period and the messages on failure are as for launch().
int fork_procs(int np, const ProcMain& body, double grace_s = 30.0);

// Runs fn in a forked child and stores its return value (0..255) in *result.
// For probing something whose initialisation must not happen in this process
// before it forks (e.g. the CUDA device count). False when the child crashed
// or did not finish within timeout_s (it is then killed).
bool run_in_child(const std::function<int()>& fn, int* result, double timeout_s = 120.0);

// This process' index among the processes of its host as a launcher set it
// (MYCOLL_LOCAL_RANK, LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID,
// SLURM_LOCALID), or -1 when none is set.
int env_local_rank();
// The rank variable launched_by_env() found, as a number (-1 when none).
int env_rank();

// Runs body on a communicator created elsewhere (e.g. bootstrapped over
// MPI), destroying comm afterwards. An exception escaping body is printed,
// becomes status 2, and comm is aborted (mycollCommAbort) instead.
int run_rank(mycollComm_t comm, const RankMain& body);

// "mycollAllReduce failed: invalid argument: <reason from mycollGetLastError>"
std::string describe(mycollResult_t r, const char* what, mycollComm_t comm);

// Throws std::runtime_error(describe(...)) unless r is mycollSuccess.
void must(mycollResult_t r, const char* what, mycollComm_t comm);

}  // namespace mycoll_launch
