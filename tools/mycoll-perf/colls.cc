#include "colls.h"

namespace mycoll_perf {

const std::vector<CollInfo>& all_colls() {
  //                     id                      name              reduces rooted blocked in-place
  static const std::vector<CollInfo> kColls = {
      {CollId::AllReduce, "all_reduce", true, false, false, true},
      {CollId::AllGather, "all_gather", false, false, true, true},
      {CollId::ReduceScatter, "reduce_scatter", true, false, true, true},
      {CollId::Broadcast, "broadcast", false, true, false, true},
      {CollId::Reduce, "reduce", true, true, false, true},
      {CollId::AllToAll, "alltoall", false, false, true, true},
      {CollId::Scatter, "scatter", false, true, true, true},
      {CollId::Gather, "gather", false, true, true, true},
      {CollId::SendRecv, "sendrecv", false, false, false, false},
  };
  return kColls;
}

const CollInfo* find_coll(const std::string& name) {
  for (const CollInfo& c : all_colls())
    if (name == c.name) return &c;
  return nullptr;
}

double CollInfo::busbw_factor(int n) const {
  const double dn = n;
  switch (id) {
    case CollId::AllReduce: return 2.0 * (dn - 1) / dn;
    case CollId::AllGather:
    case CollId::ReduceScatter:
    case CollId::AllToAll:
    case CollId::Scatter:
    case CollId::Gather: return (dn - 1) / dn;
    case CollId::Broadcast:
    case CollId::Reduce:
    case CollId::SendRecv: return 1.0;
  }
  return 1.0;
}

Layout layout(const CollInfo& c, size_t count, int rank, int n, int root) {
  const size_t un = static_cast<size_t>(n), blk = count * static_cast<size_t>(rank);
  Layout l;
  l.total = c.blocked ? un * count : count;
  l.in_count = count;
  l.out_count = count;
  switch (c.id) {
    case CollId::AllReduce:
    case CollId::SendRecv: break;
    case CollId::AllGather:
      l.out_count = un * count;
      l.ip_in_off = blk;
      break;
    case CollId::ReduceScatter:
      l.in_count = un * count;
      l.ip_out_off = blk;
      break;
    case CollId::Broadcast: l.has_input = rank == root; break;
    case CollId::Reduce: l.has_output = rank == root; break;
    case CollId::AllToAll:
      l.in_count = un * count;
      l.out_count = un * count;
      break;
    case CollId::Scatter:
      l.in_count = un * count;
      l.has_input = rank == root;
      l.ip_out_off = blk;
      break;
    case CollId::Gather:
      l.out_count = un * count;
      l.has_output = rank == root;
      l.ip_in_off = blk;
      break;
  }
  return l;
}

namespace {

// Data collectives: distinct per rank and position, 0..100 (exact in every type).
int64_t data_value(int rank, size_t idx) {
  return static_cast<int64_t>((static_cast<size_t>(rank % 101) * 13 + (idx % 101) * 7 + 1) % 101);
}

// Reductions. sum/max/min: 0..4 (a sum over 64 ranks stays <= 256, exact in
// bfloat16). prod: mostly 1, a 2 on about a quarter of the ranks per element
// (powers of two are exact in every float type). avg: v + d(rank) with
// v in 1..3 and the d summing to zero over the ranks, so avg == v exactly.
int64_t reduce_input(mycollRedOp_t op, int rank, int n, size_t idx) {
  const size_t r = static_cast<size_t>(rank);
  switch (op) {
    case mycollProd: return (idx + r) % 4 == 0 ? 2 : 1;
    case mycollAvg: {
      const int64_t v = 1 + static_cast<int64_t>(idx % 3);
      int64_t d = rank % 2 == 0 ? 1 : -1;
      if (n % 2 == 1 && rank == n - 1) d = 0;
      return v + d;
    }
    default: return static_cast<int64_t>((r * 3 + (idx % 5) * 7 + 1) % 5);
  }
}

int64_t reduce_all(mycollRedOp_t op, int n, size_t idx) {
  int64_t acc = reduce_input(op, 0, n, idx);
  for (int r = 1; r < n; ++r) {
    const int64_t v = reduce_input(op, r, n, idx);
    switch (op) {
      case mycollSum:
      case mycollAvg: acc += v; break;
      case mycollProd: acc *= v; break;
      case mycollMax: acc = v > acc ? v : acc; break;
      case mycollMin: acc = v < acc ? v : acc; break;
      default: break;
    }
  }
  return op == mycollAvg ? acc / n : acc;
}

}  // namespace

int64_t input_value(const CollInfo& c, mycollRedOp_t op, int rank, int n, size_t idx) {
  return c.reduces ? reduce_input(op, rank, n, idx) : data_value(rank, idx);
}

int64_t expected_value(const CollInfo& c, mycollRedOp_t op, int rank, int n, int root, size_t count,
                       size_t idx) {
  const size_t blk = count * static_cast<size_t>(rank);
  switch (c.id) {
    case CollId::AllReduce:
    case CollId::Reduce: return reduce_all(op, n, idx);
    case CollId::ReduceScatter: return reduce_all(op, n, blk + idx);
    case CollId::AllGather:
    case CollId::Gather: return data_value(static_cast<int>(idx / count), idx % count);
    case CollId::Broadcast: return data_value(root, idx);
    case CollId::AllToAll: return data_value(static_cast<int>(idx / count), blk + idx % count);
    case CollId::Scatter: return data_value(root, blk + idx);
    case CollId::SendRecv: return data_value((rank + n - 1) % n, idx);
  }
  return 0;
}

mycollResult_t run_mycoll(const CollInfo& c, const void* send, void* recv, size_t count,
                          mycollDataType_t t, mycollRedOp_t op, int root, mycollComm_t comm,
                          mycollStream_t s) {
  switch (c.id) {
    case CollId::AllReduce: return mycollAllReduce(send, recv, count, t, op, comm, s);
    case CollId::AllGather: return mycollAllGather(send, recv, count, t, comm, s);
    case CollId::ReduceScatter: return mycollReduceScatter(send, recv, count, t, op, comm, s);
    case CollId::Broadcast: return mycollBroadcast(send, recv, count, t, root, comm, s);
    case CollId::Reduce: return mycollReduce(send, recv, count, t, op, root, comm, s);
    case CollId::AllToAll: return mycollAllToAll(send, recv, count, t, comm, s);
    case CollId::Scatter: return mycollScatter(send, recv, count, t, root, comm, s);
    case CollId::Gather: return mycollGather(send, recv, count, t, root, comm, s);
    case CollId::SendRecv: {
      // The ring neighbours, asked once per communicator (as an application
      // would; asking per call measured two more API calls than MPI_Sendrecv).
      struct Ring {
        mycollComm_t comm = nullptr;
        int n = 1, rank = 0;
      };
      thread_local Ring ring;
      mycollResult_t r = mycollSuccess;
      if (ring.comm != comm) {
        Ring fresh;
        r = mycollCommCount(comm, &fresh.n);
        if (r == mycollSuccess) r = mycollCommUserRank(comm, &fresh.rank);
        if (r != mycollSuccess) return r;
        fresh.comm = comm;
        ring = fresh;
      }
      const int n = ring.n, rank = ring.rank;
      r = mycollGroupStart();
      if (r != mycollSuccess) return r;
      mycollResult_t first = mycollSend(send, count, t, (rank + 1) % n, comm, s);
      if (first == mycollSuccess) first = mycollRecv(recv, count, t, (rank + n - 1) % n, comm, s);
      r = mycollGroupEnd();
      return first != mycollSuccess ? first : r;
    }
  }
  return mycollInvalidArgument;
}

}  // namespace mycoll_perf
