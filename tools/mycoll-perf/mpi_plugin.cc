// mycoll-perf-mpi.so: the MPI half of `--vs mpi` (mpi_compare.h), the only
// code of mycoll-perf that includes mpi.h and links libmpi.
#include <mpi.h>

#include <climits>
#include <cstring>

#include "datatypes.h"
#include "mpi_compare.h"

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

int call(CollId c, const void* send, void* recv, size_t count, mycollDataType_t t,
         mycollRedOp_t op, int root) {
  if (count > static_cast<size_t>(INT_MAX)) return MPI_ERR_COUNT;
  const int n = static_cast<int>(count);
  const MPI_Datatype dt = mpi_type(t);
  MPI_Comm comm = MPI_COMM_WORLD;
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  switch (c) {
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

const MpiApi kApi = {
    [] { return MPI_Init(nullptr, nullptr) == MPI_SUCCESS ? 0 : 1; },
    [] { MPI_Finalize(); },
    [](int code) { MPI_Abort(MPI_COMM_WORLD, code); },
    [] {
      int r = 0;
      MPI_Comm_rank(MPI_COMM_WORLD, &r);
      return r;
    },
    [] {
      int s = 1;
      MPI_Comm_size(MPI_COMM_WORLD, &s);
      return s;
    },
    [](void* buf, size_t bytes, int root) {
      MPI_Bcast(buf, static_cast<int>(bytes), MPI_BYTE, root, MPI_COMM_WORLD);
    },
    [](double v, MpiAgg how) {
      double out = 0;
      MPI_Op op = how == MpiAgg::Min ? MPI_MIN : how == MpiAgg::Max ? MPI_MAX : MPI_SUM;
      MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, op, MPI_COMM_WORLD);
      return out;
    },
    [](mycollDataType_t t) { return mpi_type(t) != MPI_DATATYPE_NULL; },
    [](CollId c, const void* send, void* recv, size_t count, mycollDataType_t t, mycollRedOp_t op,
       int root, std::string* err) {
      int e = call(c, send, recv, count, t, op, root);
      if (e == MPI_SUCCESS) return true;
      char msg[MPI_MAX_ERROR_STRING];
      int len = 0;
      MPI_Error_string(e, msg, &len);
      *err = std::string(msg, len);
      return false;
    },
};

}  // namespace
}  // namespace mycoll_perf

extern "C" __attribute__((visibility("default"))) const mycoll_perf::MpiApi* mycoll_perf_mpi_api() {
  return &mycoll_perf::kApi;
}
