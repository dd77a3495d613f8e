// Every collective on host buffers (or GPU buffers with --mem cuda), every
// data type, in place and out of place, odd counts, every root; outputs
// checked element by element against harness.cc's references. Inputs of
// out-of-place calls are checked to be left as they were (PreMulSum must
// scale into scratch, not the input).
#include <cstring>

#include "harness.h"
#include "suites.h"

namespace ntest {
namespace {

constexpr int kPreMulHost = kPreMul;     // ncclScalarHostImmediate
constexpr int kPreMulDev = kPreMul + 1;  // ncclScalarDevice (host memory on a host comm)

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
// the wrong time gives wrong sums. The device scalar is in GPU memory with
// --mem cuda (in host memory on a host communicator).
struct OpHolder {
  ncclRedOp_t op = ncclSum;
  bool created = false;
  ncclComm_t comm = nullptr;
  char scalar[8] = {};
  Buf dev_scalar;
  OpHolder(World& w, int which, ncclDataType_t t) : comm(w.comm), dev_scalar(t, 1) {
    if (which < kPreMul) {
      op = static_cast<ncclRedOp_t>(which);
      return;
    }
    const bool dev = which == kPreMulDev;
    store(t, scalar, 0, premul_scalar(t));
    store(t, dev_scalar.host(), 0, 0.0);
    dev_scalar.put();
    created =
        ok(w,
           ncclRedOpCreatePreMulSum(&op, dev ? static_cast<void*>(dev_scalar.dev()) : scalar, t,
                                    dev ? ncclScalarDevice : ncclScalarHostImmediate, comm),
           "ncclRedOpCreatePreMulSum");
    expect(w, !created || op >= ncclNumOps, "PreMulSum op %d is a built-in value", int(op));
    store(t, scalar, 0, 7.0);
    store(t, dev_scalar.host(), 0, premul_scalar(t));
    dev_scalar.put();
  }
  void release(World& w) {
    if (created) ok(w, ncclRedOpDestroy(op, comm), "ncclRedOpDestroy");
    created = false;
  }
};

int ref_op(int which) { return which >= kPreMul ? kPreMul : which; }
ncclRedOp_t input_op(int which) {
  return which >= kPreMul ? ncclSum : static_cast<ncclRedOp_t>(which);
}

std::vector<double> inputs(ncclDataType_t t, int which, int r, size_t n, int seed) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = input(t, input_op(which), r, i, seed);
  return v;
}

// Every call below: inputs filled on the host and put(), the call on the
// rank's stream, finish() (the stream drained), outputs and inputs get()
// and checked on the host.

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
          Buf send(t, count), recv(t, count);
          fill(t, send.host(), 0, in);
          send.put();
          OpHolder op(w, which, t);
          Buf& out = inplace ? send : recv;
          if (ok(w, ncclAllReduce(send.dev(), out.dev(), count, t, op.op, w.comm, w.stream),
                 what) &&
              finish(w, what)) {
            send.get();
            recv.get();
            std::vector<double> want(count);
            for (size_t i = 0; i < count; ++i)
              want[i] = reference(t, ref_op(which), w.nranks, i, seed);
            check_elems(w, t, out.host(), 0, count, want, what);
            if (!inplace)
              check_elems(w, t, send.host(), 0, count, in, "allreduce input after call");
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
          Buf send(t, count), recv(t, count);
          fill(t, send.host(), 0, in);
          send.put();
          OpHolder op(w, which, t);
          // Non-roots pass a NULL output half of the time (NCCL allows it).
          Buf& out = inplace ? send : recv;
          void* outp = !inplace && w.rank != root && seed % 2 ? nullptr : out.dev();
          if (ok(w, ncclReduce(send.dev(), outp, count, t, op.op, root, w.comm, w.stream), what) &&
              finish(w, what)) {
            send.get();
            recv.get();
            if (w.rank == root) {
              std::vector<double> want(count);
              for (size_t i = 0; i < count; ++i)
                want[i] = reference(t, ref_op(which), w.nranks, i, seed);
              check_elems(w, t, out.host(), 0, count, want, what);
            }
            if (!inplace || w.rank != root)
              check_elems(w, t, send.host(), 0, count, in, "reduce input after call");
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
          Buf send(t, count * n), recv(t, count);
          fill(t, send.host(), 0, in);
          send.put();
          OpHolder op(w, which, t);
          const size_t own = w.rank * count;  // the in-place output: the rank's block of the input
          void* out = inplace ? send.dev(own) : recv.dev();
          if (ok(w, ncclReduceScatter(send.dev(), out, count, t, op.op, w.comm, w.stream), what) &&
              finish(w, what)) {
            send.get();
            recv.get();
            std::vector<double> want(count);
            for (size_t i = 0; i < count; ++i)
              want[i] = reference(t, ref_op(which), n, own + i, seed);
            check_elems(w, t, inplace ? send.host() : recv.host(), inplace ? own : 0, count, want,
                        what);
            if (!inplace) check_elems(w, t, send.host(), 0, count * n, in, "reducescatter input");
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
        Buf send(t, count), recv(t, count * n);
        const size_t own = w.rank * count;
        for (size_t i = 0; i < count; ++i) {
          store(t, send.host(), i, tag_value(t, w.rank, i, seed));
          store(t, recv.host(), own + i, tag_value(t, w.rank, i, seed));
        }
        send.put();
        recv.put();
        void* in = inplace ? recv.dev(own) : send.dev();
        if (!ok(w, ncclAllGather(in, recv.dev(), count, t, w.comm, w.stream), what) ||
            !finish(w, what))
          continue;
        recv.get();
        std::vector<double> want(count * n);
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < count; ++i) want[r * count + i] = tag_value(t, r, i, seed);
        check_elems(w, t, recv.host(), 0, count * n, want, what);
      }
}

void test_broadcast(World& w, int& seed) {
  for (ncclDataType_t t : kAllTypes)
    for (int form = 0; form < 3; ++form) {  // out of place, in place, ncclBcast
      ++seed;
      const size_t count = 1031;
      const int root = seed % w.nranks;
      const char* what = form == 0   ? "broadcast out-of-place"
                         : form == 1 ? "broadcast in-place"
                                     : "bcast";
      Buf send(t, count), recv(t, count);
      Buf& buf = form == 0 ? send : recv;
      if (w.rank == root)
        for (size_t i = 0; i < count; ++i) store(t, buf.host(), i, tag_value(t, root, i, seed));
      buf.put();
      ncclResult_t r = form == 2
                           ? ncclBcast(recv.dev(), count, t, root, w.comm, w.stream)
                           : ncclBroadcast(buf.dev(), recv.dev(), count, t, root, w.comm, w.stream);
      if (!ok(w, r, what) || !finish(w, what)) continue;
      recv.get();
      std::vector<double> want(count);
      for (size_t i = 0; i < count; ++i) want[i] = tag_value(t, root, i, seed);
      check_elems(w, t, recv.host(), 0, count, want, what);
    }
}

void test_all_to_all(World& w, int& seed) {
  const int n = w.nranks;
  for (ncclDataType_t t : kAllTypes)
    for (size_t count : {size_t(1), size_t(211)})
      for (bool inplace : {false, true}) {
        ++seed;
        const char* what = inplace ? "alltoall in-place" : "alltoall out-of-place";
        Buf send(t, count * n), recv(t, count * n);
        for (size_t j = 0; j < count * n; ++j)
          store(t, send.host(), j, tag_value(t, w.rank, j, seed));
        send.put();
        Buf& out = inplace ? send : recv;
        if (!ok(w, ncclAlltoAll(send.dev(), out.dev(), count, t, w.comm, w.stream), what) ||
            !finish(w, what))
          continue;
        out.get();
        std::vector<double> want(count * n);
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < count; ++i)
            want[r * count + i] = tag_value(t, r, w.rank * count + i, seed);
        check_elems(w, t, out.host(), 0, count * n, want, what);
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
      const bool root_in_place = inplace && is_root;
      // gather: every rank's block to the root (non-roots: NULL output)
      Buf mine(t, count), all(t, count * n);
      for (size_t i = 0; i < count; ++i) {
        store(t, mine.host(), i, tag_value(t, w.rank, i, seed));
        if (root_in_place) store(t, all.host(), root * count + i, tag_value(t, w.rank, i, seed));
      }
      mine.put();
      all.put();
      void* in = root_in_place ? all.dev(root * count) : mine.dev();
      const char* what = inplace ? "gather in-place" : "gather out-of-place";
      if (ok(w, ncclGather(in, is_root ? all.dev() : nullptr, count, t, root, w.comm, w.stream),
             what) &&
          finish(w, what) && is_root) {
        all.get();
        std::vector<double> want(count * n);
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < count; ++i) want[r * count + i] = tag_value(t, r, i, seed);
        check_elems(w, t, all.host(), 0, count * n, want, what);
      }
      // scatter: block r of the root's buffer to rank r (non-roots: NULL input)
      Buf src(t, count * n), dst(t, count);
      if (is_root)
        for (size_t j = 0; j < count * n; ++j)
          store(t, src.host(), j, tag_value(t, root, j, seed + 1));
      src.put();
      void* out = root_in_place ? src.dev(root * count) : dst.dev();
      what = inplace ? "scatter in-place" : "scatter out-of-place";
      if (ok(w, ncclScatter(is_root ? src.dev() : nullptr, out, count, t, root, w.comm, w.stream),
             what) &&
          finish(w, what)) {
        src.get();
        dst.get();
        std::vector<double> want(count);
        for (size_t i = 0; i < count; ++i)
          want[i] = tag_value(t, root, w.rank * count + i, seed + 1);
        check_elems(w, t, root_in_place ? src.host() : dst.host(), root_in_place ? root * count : 0,
                    count, want, what);
      }
    }
}

void test_zero_counts(World& w) {
  ok(w, ncclAllReduce(nullptr, nullptr, 0, ncclFloat32, ncclSum, w.comm, w.stream),
     "allreduce count 0");
  ok(w, ncclReduce(nullptr, nullptr, 0, ncclInt8, ncclMax, 0, w.comm, w.stream), "reduce count 0");
  ok(w, ncclAllGather(nullptr, nullptr, 0, ncclFloat16, w.comm, w.stream), "allgather count 0");
  ok(w, ncclReduceScatter(nullptr, nullptr, 0, ncclFloat64, ncclSum, w.comm, w.stream),
     "reducescatter count 0");
  ok(w, ncclBroadcast(nullptr, nullptr, 0, ncclUint64, 0, w.comm, w.stream), "broadcast count 0");
  ok(w, ncclAlltoAll(nullptr, nullptr, 0, ncclInt32, w.comm, w.stream), "alltoall count 0");
  finish(w, "zero-count calls");
}

// Collectives and point-to-point of one communicator in one group.
void test_grouped(World& w, int& seed) {
  const int n = w.nranks;
  const size_t count = 333;
  const ncclDataType_t t = ncclFloat32;
  ++seed;
  std::vector<double> in = inputs(t, ncclSum, w.rank, count, seed);
  Buf ar_send(t, count), ar_recv(t, count);
  Buf pm_buf(t, count), ag_recv(t, count * n);
  Buf p2p_send(t, count), p2p_recv(t, count);
  fill(t, ar_send.host(), 0, in);
  fill(t, pm_buf.host(), 0, in);
  for (size_t i = 0; i < count; ++i) store(t, p2p_send.host(), i, tag_value(t, w.rank, i, seed));
  ar_send.put();
  pm_buf.put();
  p2p_send.put();
  OpHolder pm(w, kPreMulHost, t);
  const int next = (w.rank + 1) % n, prev = (w.rank + n - 1) % n;
  ok(w, ncclGroupStart(), "ncclGroupStart");
  ok(w, ncclAllReduce(ar_send.dev(), ar_recv.dev(), count, t, ncclSum, w.comm, w.stream),
     "grouped allreduce");
  ok(w, ncclAllReduce(pm_buf.dev(), pm_buf.dev(), count, t, pm.op, w.comm, w.stream),
     "grouped premulsum allreduce (in place)");
  ok(w, ncclAllGather(p2p_send.dev(), ag_recv.dev(), count, t, w.comm, w.stream),
     "grouped allgather");
  ok(w, ncclSend(p2p_send.dev(), count, t, next, w.comm, w.stream), "grouped send");
  ok(w, ncclRecv(p2p_recv.dev(), count, t, prev, w.comm, w.stream), "grouped recv");
  pm.release(w);  // allowed before the group ends: the call took what it needs
  if (!ok(w, ncclGroupEnd(), "ncclGroupEnd") || !finish(w, "grouped calls")) return;
  for (Buf* b : {&ar_recv, &pm_buf, &ag_recv, &p2p_recv}) b->get();
  std::vector<double> sum(count), premul(count), ag(count * n), ring(count);
  for (size_t i = 0; i < count; ++i) {
    sum[i] = reference(t, ncclSum, n, i, seed);
    premul[i] = reference(t, kPreMul, n, i, seed);
    ring[i] = tag_value(t, prev, i, seed);
    for (int r = 0; r < n; ++r) ag[r * count + i] = tag_value(t, r, i, seed);
  }
  check_elems(w, t, ar_recv.host(), 0, count, sum, "grouped allreduce");
  check_elems(w, t, pm_buf.host(), 0, count, premul, "grouped premulsum allreduce");
  check_elems(w, t, ag_recv.host(), 0, count * n, ag, "grouped allgather");
  check_elems(w, t, p2p_recv.host(), 0, count, ring, "grouped ring send/recv");
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
