// The MPI equivalent of each benchmarked collective, for `--vs mpi`: same
// processes, same buffers, same sizes, so the per-size ratio mycoll/MPI is a
// fair comparison. Only compiled with MYCOLL_PERF_MPI (CMake found MPI).
#pragma once

#ifdef MYCOLL_PERF_MPI

#include <mpi.h>

#include <cstddef>

#include "colls.h"

namespace mycoll_perf {

// Whether MPI has the datatype (half and bfloat16 have no standard MPI type).
bool mpi_supports(mycollDataType_t t);

// The MPI call for collective c (out of place), returning MPI's error code:
//   all_reduce MPI_Allreduce, all_gather MPI_Allgather, reduce_scatter
//   MPI_Reduce_scatter_block, broadcast MPI_Bcast (on recv; the root first
//   copies send into it, as mycoll's out-of-place broadcast does), reduce
//   MPI_Reduce, alltoall MPI_Alltoall, scatter MPI_Scatter, gather
//   MPI_Gather, sendrecv MPI_Sendrecv to rank+1 from rank-1.
// avg has no MPI op: it runs as MPI_SUM (the division is not timed).
int run_mpi(const CollInfo& c, const void* send, void* recv, size_t count, mycollDataType_t t,
            mycollRedOp_t op, int root, MPI_Comm comm);

}  // namespace mycoll_perf

#endif  // MYCOLL_PERF_MPI
