// The MPI side of `--vs mpi`: MPI bootstrap (init, rank, size, broadcast of
// the unique id) and the MPI equivalent of each benchmarked collective, in
// the same processes on the same buffers, so the per-size ratio mycoll/MPI
// is a fair comparison.
//
// mycoll-perf itself does not link MPI: the MPI code is a separate module,
// mycoll-perf-mpi.so (mpi_plugin.cc, linked against libmpi), loaded with
// dlopen only for --vs mpi. So mycoll-perf starts where no MPI is installed,
// and --vs mpi there says what it needs.
#pragma once

#include <cstddef>
#include <string>

#include "colls.h"

namespace mycoll_perf {

// Reduction of one double over all MPI ranks (for timing aggregation).
enum class MpiAgg { Sum = 0, Min = 1, Max = 2 };

// Plain function pointers: the table crosses the dlopen boundary.
struct MpiApi {
  int (*init)();    // MPI_Init; 0 on success
  void (*finalize)();
  void (*abort)(int code);  // MPI_Abort(MPI_COMM_WORLD, code)
  int (*rank)();
  int (*size)();
  void (*bcast)(void* buf, size_t bytes, int root);  // MPI_Bcast of bytes
  double (*allreduce)(double v, MpiAgg how);
  // Whether MPI has the datatype (half and bfloat16 have no standard MPI type).
  bool (*supports)(mycollDataType_t t);
  // The MPI call for collective c (out of place) on MPI_COMM_WORLD; returns
  // false and writes MPI's message into err on failure:
  //   all_reduce MPI_Allreduce, all_gather MPI_Allgather, reduce_scatter
  //   MPI_Reduce_scatter_block, broadcast MPI_Bcast (on recv; the root first
  //   copies send into it, as mycoll's out-of-place broadcast does), reduce
  //   MPI_Reduce, alltoall MPI_Alltoall, scatter MPI_Scatter, gather
  //   MPI_Gather, sendrecv MPI_Sendrecv to rank+1 from rank-1.
  // avg has no MPI op: it runs as MPI_SUM (the division is not timed).
  bool (*run)(CollId c, const void* send, void* recv, size_t count, mycollDataType_t t,
              mycollRedOp_t op, int root, std::string* err);
  // What the columns and summary call it ("MPI"; "Gloo" for --vs gloo's
  // table of the same shape, gloo_compare.h). Null reads as "MPI".
  const char* name = nullptr;
};

// The module's entry point (extern "C" so dlsym finds it by this name).
#define MYCOLL_PERF_MPI_ENTRY "mycoll_perf_mpi_api"

// Loads mycoll-perf-mpi.so once (next to the executable in the build tree,
// ../lib/mycoll/ when installed). nullptr and *why saying what is missing
// (the module, or libmpi it needs) when it cannot.
const MpiApi* load_mpi(std::string* why);

}  // namespace mycoll_perf
