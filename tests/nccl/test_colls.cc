// Every collective on host buffers, every data type, in place and out of
// place, odd counts, every root; outputs checked element by element against
// harness.cc's references. Inputs of out-of-place calls are checked to be
// left as they were (PreMulSum must scale into scratch, not the input).
#include <cstring>

#include "harness.h"
#include "suites.h"

namespace ntest {
namespace {

constexpr int kPreMulHost = kPreMul;      // ncclScalarHostImmediate
constexpr int kPreMulDev = kPreMul + 1;   // ncclScalarDevice (host memory on a host comm)

const char* op_name(int op) {
  switch (op) {
    case ncclSum: return "sum";
    case ncclProd: return "prod";
    case ncclMax: return "max";
    case ncclMin: return "min";
    case ncclAvg: return "avg";
    case kPreMulHost: return "premulsum(host scalar)";
    case kPreMulDev: return "premulsum(device scalar)";
    default: return "?";
  }
}

// The ncclRedOp_t for op; PreMulSum ops are created on comm (destroy with
// release()). The device-residence scalar is written after creation and the
// host-immediate one overwritten after it, so a library that read either at
// the wrong time gives wrong sums.
struct OpHolder {
  ncclRedOp_t op = ncclSum;
  bool created = false;
  ncclComm_t comm = nullptr;
  char scalar[8] = {};
  OpHolder(World& w, int which, ncclDataType_t t) : comm(w.comm) {
    if (which < kPreMul) {
      op = static_cast<ncclRedOp_t>(which);
      return;
    }
    const bool dev = which == kPreMulDev;
    store(t, scalar, 0, dev ? 0.0 : premul_scalar(t));
    created = ok(w, ncclRedOpCreatePreMulSum(&op, scalar, t,
                                             dev ? ncclScalarDevice : ncclScalarHostImmediate, comm),
                 "ncclRedOpCreatePreMulSum");
    expect(w, !created || op >= ncclNumOps, "PreMulSum op %d is a built-in value", int(op));
    store(t, scalar, 0, dev ? premul_scalar(t) : 7.0);
  }
  void release(World& w) {
    if (created) ok(w, ncclRedOpDestroy(op, comm), "ncclRedOpDestroy");
    created = false;
  }
};

int ref_op(int which) { return which >= kPreMul ? kPreMul : which; }
ncclRedOp_t input_op(int which) { return which >= kPreMul ? ncclSum : static_cast<ncclRedOp_t>(which); }

std::vector<double> inputs(ncclDataType_t t, int which, int r, size_t n, int seed) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = input(t, input_op(which), r, i, seed);
  return v;
}

void fill(ncclDataType_t t, void* buf, size_t off, const std::vector<double>& v) {
  for (size_t i = 0; i < v.size(); ++i) store(t, buf, off + i, v[i]);
}

void test_allreduce(World& w, int& seed) {
  const int ops[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg, kPreMulHost, kPreMulDev};
  for (ncclDataType_t t : kAllTypes)
    for (int which : ops)
      for (size_t count : {size_t(3), size_t(1031)})
        for (bool inplace : {false, true}) {
          ++seed;
          char what[96];
          std::snprintf(what, sizeof(what), "allreduce %s count %zu %s", op_name(which), count,
                        inplace ? "in-place" : "out-of-place");
          std::vector<double> in = inputs(t, which, w.rank, count, seed);
          std::vector<char> send = buffer(t, count), recv = buffer(t, count);
          fill(t, send.data(), 0, in);
          OpHolder op(w, which, t);
          void* out = inplace ? send.data() : recv.data();
          if (ok(w, ncclAllReduce(send.data(), out, count, t, op.op, w.comm, nullptr), what)) {
            std::vector<double> want(count);
            for (size_t i = 0; i < count; ++i) want[i] = reference(t, ref_op(which), w.nranks, i, seed);
            check_elems(w, t, out, 0, count, want, what);
            if (!inplace) check_elems(w, t, send.data(), 0, count, in, "allreduce input after call");
          }
          op.release(w);
        }
}

void test_reduce(World& w, int& seed) {
  const int ops[] = {ncclSum, ncclMax, ncclAvg, kPreMulHost};
  for (ncclDataType_t t : kAllTypes)
    for (int which : ops)
      for (size_t count : {size_t(5), size_t(1031)})
        for (bool inplace : {false, true}) {
          ++seed;
          const int root = seed % w.nranks;
          char what[96];
          std::snprintf(what, sizeof(what), "reduce %s count %zu root %d %s", op_name(which), count,
                        root, inplace ? "in-place" : "out-of-place");
          std::vector<double> in = inputs(t, which, w.rank, count, seed);
          std::vector<char> send = buffer(t, count), recv = buffer(t, count);
          fill(t, send.data(), 0, in);
          OpHolder op(w, which, t);
          // Non-roots pass a NULL output half of the time (NCCL allows it).
          void* out = inplace ? send.data() : (w.rank != root && seed % 2 ? nullptr : recv.data());
          if (ok(w, ncclReduce(send.data(), out, count, t, op.op, root, w.comm, nullptr), what)) {
            if (w.rank == root) {
              std::vector<double> want(count);
              for (size_t i = 0; i < count; ++i)
                want[i] = reference(t, ref_op(which), w.nranks, i, seed);
              check_elems(w, t, out, 0, count, want, what);
            }
            if (!inplace || w.rank != root)
              check_elems(w, t, send.data(), 0, count, in, "reduce input after call");
          }
          op.release(w);
        }
}

void test_reduce_scatter(World& w, int& seed) {
  const int ops[] = {ncclSum, ncclMin, ncclAvg, kPreMulDev};
  const int n = w.nranks;
  for (ncclDataType_t t : kAllTypes)
    for (int which : ops)
      for (size_t count : {size_t(3), size_t(517)})
        for (bool inplace : {false, true}) {
          ++seed;
          char what[96];
          std::snprintf(what, sizeof(what), "reducescatter %s recvcount %zu %s", op_name(which),
                        count, inplace ? "in-place" : "out-of-place");
          std::vector<double> in = inputs(t, which, w.rank, count * n, seed);
          std::vector<char> send = buffer(t, count * n), recv = buffer(t, count);
          fill(t, send.data(), 0, in);
          OpHolder op(w, which, t);
          char* out = inplace ? send.data() + w.rank * count * type_size(t) : recv.data();
          if (ok(w, ncclReduceScatter(send.data(), out, count, t, op.op, w.comm, nullptr), what)) {
            std::vector<double> want(count);
            for (size_t i = 0; i < count; ++i)
              want[i] = reference(t, ref_op(which), n, w.rank * count + i, seed);
            check_elems(w, t, out, 0, count, want, what);
            if (!inplace) check_elems(w, t, send.data(), 0, count * n, in, "reducescatter input");
          }
          op.release(w);
        }
}

void test_all_gather(World& w, int& seed) {
  const int n = w.nranks;
  for (ncclDataType_t t : kAllTypes)
    for (size_t count : {size_t(1), size_t(517)})
      for (bool inplace : {false, true}) {
        ++seed;
        const char* what = inplace ? "allgather in-place" : "allgather out-of-place";
        std::vector<char> send = buffer(t, count), recv = buffer(t, count * n);
        char* in = inplace ? recv.data() + w.rank * count * type_size(t) : send.data();
        for (size_t i = 0; i < count; ++i) store(t, in, i, tag_value(t, w.rank, i, seed));
        if (!ok(w, ncclAllGather(in, recv.data(), count, t, w.comm, nullptr), what)) continue;
        std::vector<double> want(count * n);
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < count; ++i) want[r * count + i] = tag_value(t, r, i, seed);
        check_elems(w, t, recv.data(), 0, count * n, want, what);
      }
}

void test_broadcast(World& w, int& seed) {
  for (ncclDataType_t t : kAllTypes)
    for (int form = 0; form < 3; ++form) {  // out of place, in place, ncclBcast
      ++seed;
      const size_t count = 1031;
      const int root = seed % w.nranks;
      const char* what = form == 0 ? "broadcast out-of-place" : form == 1 ? "broadcast in-place" : "bcast";
      std::vector<char> send = buffer(t, count), recv = buffer(t, count);
      char* buf = form == 0 ? send.data() : recv.data();
      if (w.rank == root)
        for (size_t i = 0; i < count; ++i) store(t, buf, i, tag_value(t, root, i, seed));
      ncclResult_t r = form == 2 ? ncclBcast(recv.data(), count, t, root, w.comm, nullptr)
                                 : ncclBroadcast(buf, recv.data(), count, t, root, w.comm, nullptr);
      if (!ok(w, r, what)) continue;
      std::vector<double> want(count);
      for (size_t i = 0; i < count; ++i) want[i] = tag_value(t, root, i, seed);
      check_elems(w, t, recv.data(), 0, count, want, what);
    }
}

void test_all_to_all(World& w, int& seed) {
  const int n = w.nranks;
  for (ncclDataType_t t : kAllTypes)
    for (size_t count : {size_t(1), size_t(211)})
      for (bool inplace : {false, true}) {
        ++seed;
        const char* what = inplace ? "alltoall in-place" : "alltoall out-of-place";
        std::vector<char> send = buffer(t, count * n), recv = buffer(t, count * n);
        for (size_t j = 0; j < count * n; ++j) store(t, send.data(), j, tag_value(t, w.rank, j, seed));
        char* out = inplace ? send.data() : recv.data();
        if (!ok(w, ncclAlltoAll(send.data(), out, count, t, w.comm, nullptr), what)) continue;
        std::vector<double> want(count * n);
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < count; ++i) want[r * count + i] = tag_value(t, r, w.rank * count + i, seed);
        check_elems(w, t, out, 0, count * n, want, what);
      }
}

void test_gather_scatter(World& w, int& seed) {
  const int n = w.nranks;
  const size_t count = 211;
  for (ncclDataType_t t : kAllTypes)
    for (bool inplace : {false, true}) {
      ++seed;
      const int root = seed % n;
      const bool is_root = w.rank == root;
      // gather: every rank's block to the root (non-roots: NULL output)
      std::vector<char> mine = buffer(t, count), all = buffer(t, count * n);
      char* in = inplace && is_root ? all.data() + root * count * type_size(t) : mine.data();
      for (size_t i = 0; i < count; ++i) store(t, in, i, tag_value(t, w.rank, i, seed));
      const char* what = inplace ? "gather in-place" : "gather out-of-place";
      if (ok(w, ncclGather(in, is_root ? all.data() : nullptr, count, t, root, w.comm, nullptr), what) &&
          is_root) {
        std::vector<double> want(count * n);
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < count; ++i) want[r * count + i] = tag_value(t, r, i, seed);
        check_elems(w, t, all.data(), 0, count * n, want, what);
      }
      // scatter: block r of the root's buffer to rank r (non-roots: NULL input)
      std::vector<char> src = buffer(t, count * n), dst = buffer(t, count);
      if (is_root)
        for (size_t j = 0; j < count * n; ++j) store(t, src.data(), j, tag_value(t, root, j, seed + 1));
      char* out = inplace && is_root ? src.data() + root * count * type_size(t) : dst.data();
      what = inplace ? "scatter in-place" : "scatter out-of-place";
      if (ok(w, ncclScatter(is_root ? src.data() : nullptr, out, count, t, root, w.comm, nullptr), what)) {
        std::vector<double> want(count);
        for (size_t i = 0; i < count; ++i) want[i] = tag_value(t, root, w.rank * count + i, seed + 1);
        check_elems(w, t, out, 0, count, want, what);
      }
    }
}

void test_zero_counts(World& w) {
  ok(w, ncclAllReduce(nullptr, nullptr, 0, ncclFloat32, ncclSum, w.comm, nullptr), "allreduce count 0");
  ok(w, ncclReduce(nullptr, nullptr, 0, ncclInt8, ncclMax, 0, w.comm, nullptr), "reduce count 0");
  ok(w, ncclAllGather(nullptr, nullptr, 0, ncclFloat16, w.comm, nullptr), "allgather count 0");
  ok(w, ncclReduceScatter(nullptr, nullptr, 0, ncclFloat64, ncclSum, w.comm, nullptr),
     "reducescatter count 0");
  ok(w, ncclBroadcast(nullptr, nullptr, 0, ncclUint64, 0, w.comm, nullptr), "broadcast count 0");
  ok(w, ncclAlltoAll(nullptr, nullptr, 0, ncclInt32, w.comm, nullptr), "alltoall count 0");
}

// Collectives and point-to-point of one communicator in one group.
void test_grouped(World& w, int& seed) {
  const int n = w.nranks;
  const size_t count = 333;
  const ncclDataType_t t = ncclFloat32;
  ++seed;
  std::vector<double> in = inputs(t, ncclSum, w.rank, count, seed);
  std::vector<char> ar_send = buffer(t, count), ar_recv = buffer(t, count);
  std::vector<char> pm_buf = buffer(t, count), ag_recv = buffer(t, count * n);
  std::vector<char> p2p_send = buffer(t, count), p2p_recv = buffer(t, count);
  fill(t, ar_send.data(), 0, in);
  fill(t, pm_buf.data(), 0, in);
  for (size_t i = 0; i < count; ++i) store(t, p2p_send.data(), i, tag_value(t, w.rank, i, seed));
  OpHolder pm(w, kPreMulHost, t);
  const int next = (w.rank + 1) % n, prev = (w.rank + n - 1) % n;
  ok(w, ncclGroupStart(), "ncclGroupStart");
  ok(w, ncclAllReduce(ar_send.data(), ar_recv.data(), count, t, ncclSum, w.comm, nullptr), "grouped allreduce");
  ok(w, ncclAllReduce(pm_buf.data(), pm_buf.data(), count, t, pm.op, w.comm, nullptr),
     "grouped premulsum allreduce (in place)");
  ok(w, ncclAllGather(p2p_send.data(), ag_recv.data(), count, t, w.comm, nullptr), "grouped allgather");
  ok(w, ncclSend(p2p_send.data(), count, t, next, w.comm, nullptr), "grouped send");
  ok(w, ncclRecv(p2p_recv.data(), count, t, prev, w.comm, nullptr), "grouped recv");
  pm.release(w);  // allowed before the group ends: the call took what it needs
  if (!ok(w, ncclGroupEnd(), "ncclGroupEnd")) return;
  std::vector<double> sum(count), premul(count), ag(count * n), ring(count);
  for (size_t i = 0; i < count; ++i) {
    sum[i] = reference(t, ncclSum, n, i, seed);
    premul[i] = reference(t, kPreMul, n, i, seed);
    ring[i] = tag_value(t, prev, i, seed);
    for (int r = 0; r < n; ++r) ag[r * count + i] = tag_value(t, r, i, seed);
  }
  check_elems(w, t, ar_recv.data(), 0, count, sum, "grouped allreduce");
  check_elems(w, t, pm_buf.data(), 0, count, premul, "grouped premulsum allreduce");
  check_elems(w, t, ag_recv.data(), 0, count * n, ag, "grouped allgather");
  check_elems(w, t, p2p_recv.data(), 0, count, ring, "grouped ring send/recv");
}

}  // namespace

int suite_colls(World& w) {
  int seed = 0;
  test_allreduce(w, seed);
  test_reduce(w, seed);
  test_reduce_scatter(w, seed);
  test_all_gather(w, seed);
  test_broadcast(w, seed);
  test_all_to_all(w, seed);
  test_gather_scatter(w, seed);
  test_zero_counts(w);
  test_grouped(w, seed);
  return 0;
}

}  // namespace ntest
