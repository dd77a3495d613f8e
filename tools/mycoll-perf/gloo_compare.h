// The Gloo side of `--vs gloo`: Gloo (PyTorch's CPU collective library)
// timed in the same processes, on the same host buffers and with the same
// checks as mycoll, the way --vs mpi times MPI.
//
// mycoll-perf does not link Gloo: the Gloo code is a separate module,
// mycoll-perf-gloo.so (gloo_plugin.cc, built only where CMake found Gloo,
// e.g. Debian's libgloo-dev), loaded with dlopen only for --vs gloo.
// Ranks meet through mycoll first (any launch mode: --np, a launcher);
// rank 0 makes a fresh directory for Gloo's own rendezvous (its FileStore),
// sends its path to the others with a mycollBroadcast, and every rank
// connects a full mesh over Gloo's TCP transport on loopback (Gloo has no
// shared-memory transport).
//
// Gloo equivalents: all_reduce gloo::allreduce, all_gather gloo::allgather,
// broadcast gloo::broadcast (on recv; the root first copies send into it),
// reduce gloo::reduce, alltoall gloo::alltoall, scatter gloo::scatter,
// gather gloo::gather, sendrecv one unbound-buffer send to rank+1 and recv
// from rank-1, reduce_scatter gloo::ReduceScatterHalvingDoubling (Gloo's only
// reduce-scatter: in place on a copy of the input, kept between calls of
// one shape as Gloo's algorithm objects are meant to be, then the rank's
// block copied out). avg runs as sum; half and bfloat16 are N/A except half
// for the function-style collectives that only move data.
#pragma once

#include <string>

#include "mpi_compare.h"

namespace mycoll_perf {

// Plain function pointers: the table crosses the dlopen boundary.
struct GlooApi {
  // Connects rank `rank` of `size` through a FileStore in store_dir (the
  // same directory on every rank) over TCP on `host`. 0 on success, else
  // writes Gloo's message into err.
  int (*init)(int rank, int size, const char* store_dir, const char* host, std::string* err);
  void (*finalize)();
  double (*allreduce)(double v, MpiAgg how);
  void (*bcast)(void* buf, size_t bytes, int root);
  bool (*supports)(mycollDataType_t t);
  bool (*run)(CollId c, const void* send, void* recv, size_t count, mycollDataType_t t,
              mycollRedOp_t op, int root, std::string* err);
};

#define MYCOLL_PERF_GLOO_ENTRY "mycoll_perf_gloo_api"

// Loads mycoll-perf-gloo.so once (as load_mpi does for the MPI module).
// nullptr and *why saying what is missing when it cannot.
const GlooApi* load_gloo(std::string* why);

// Sets Gloo up over comm's ranks (collective over comm) and returns the
// MPI-shaped table the benchmark compares with (name "Gloo"), or nullptr
// and *why. Call finish_gloo() before the communicator is destroyed.
const MpiApi* start_gloo(mycollComm_t comm, int rank, int nranks, std::string* why);
void finish_gloo();

}  // namespace mycoll_perf
