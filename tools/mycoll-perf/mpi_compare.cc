#ifdef MYCOLL_PERF_MPI

#include "mpi_compare.h"

#include <climits>
#include <cstring>

#include "datatypes.h"

namespace mycoll_perf {
namespace {

MPI_Datatype mpi_type(mycollDataType_t t) {
  switch (t) {
    case mycollInt8: return MPI_INT8_T;
    case mycollUint8: return MPI_UINT8_T;
    case mycollInt32: return MPI_INT32_T;
    case mycollUint32: return MPI_UINT32_T;
    case mycollInt64: return MPI_INT64_T;
    case mycollUint64: return MPI_UINT64_T;
    case mycollFloat32: return MPI_FLOAT;
    case mycollFloat64: return MPI_DOUBLE;
    default: return MPI_DATATYPE_NULL;
  }
}

MPI_Op mpi_op(mycollRedOp_t op) {
  switch (op) {
    case mycollProd: return MPI_PROD;
    case mycollMax: return MPI_MAX;
    case mycollMin: return MPI_MIN;
    default: return MPI_SUM;  // sum, and avg (see header)
  }
}

}  // namespace

bool mpi_supports(mycollDataType_t t) { return mpi_type(t) != MPI_DATATYPE_NULL; }

int run_mpi(const CollInfo& c, const void* send, void* recv, size_t count, mycollDataType_t t,
            mycollRedOp_t op, int root, MPI_Comm comm) {
  if (count > static_cast<size_t>(INT_MAX)) return MPI_ERR_COUNT;
  const int n = static_cast<int>(count);
  const MPI_Datatype dt = mpi_type(t);
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  switch (c.id) {
    case CollId::AllReduce: return MPI_Allreduce(send, recv, n, dt, mpi_op(op), comm);
    case CollId::AllGather: return MPI_Allgather(send, n, dt, recv, n, dt, comm);
    case CollId::ReduceScatter:
      return MPI_Reduce_scatter_block(send, recv, n, dt, mpi_op(op), comm);
    case CollId::Broadcast:
      if (rank == root && send != recv) std::memcpy(recv, send, count * dtype_size(t));
      return MPI_Bcast(recv, n, dt, root, comm);
    case CollId::Reduce: return MPI_Reduce(send, recv, n, dt, mpi_op(op), root, comm);
    case CollId::AllToAll: return MPI_Alltoall(send, n, dt, recv, n, dt, comm);
    case CollId::Scatter: return MPI_Scatter(send, n, dt, recv, n, dt, root, comm);
    case CollId::Gather: return MPI_Gather(send, n, dt, recv, n, dt, root, comm);
    case CollId::SendRecv:
      return MPI_Sendrecv(send, n, dt, (rank + 1) % size, 0, recv, n, dt, (rank + size - 1) % size,
                          0, comm, MPI_STATUS_IGNORE);
  }
  return MPI_ERR_OTHER;
}

}  // namespace mycoll_perf

#endif  // MYCOLL_PERF_MPI
