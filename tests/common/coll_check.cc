#include "coll_check.h"

#include <cstdlib>
#include <cstring>
#include <vector>

#include "reference.h"

namespace mycoll_test {

const char* kind_str(CollKind k) {
  switch (k) {
    case CollKind::AllReduce: return "allreduce";
    case CollKind::Broadcast: return "broadcast";
    case CollKind::Reduce: return "reduce";
    case CollKind::AllGather: return "allgather";
    case CollKind::ReduceScatter: return "reducescatter";
    case CollKind::AllToAll: return "alltoall";
    case CollKind::Scatter: return "scatter";
    case CollKind::Gather: return "gather";
    case CollKind::SendRecvRing: return "sendrecv";
  }
  return "?";
}
bool kind_reduces(CollKind k) {
  return k == CollKind::AllReduce || k == CollKind::Reduce || k == CollKind::ReduceScatter;
}
bool kind_rooted(CollKind k) {
  return k == CollKind::Broadcast || k == CollKind::Reduce || k == CollKind::Scatter ||
         k == CollKind::Gather;
}

const mycollDataType_t kAllTypes[10] = {mycollInt8,    mycollUint8,   mycollInt32,   mycollUint32,
                                        mycollInt64,   mycollUint64,  mycollFloat16, mycollFloat32,
                                        mycollFloat64, mycollBfloat16};
const mycollRedOp_t kAllOps[5] = {mycollSum, mycollProd, mycollMax, mycollMin, mycollAvg};
const CollKind kAllKinds[9] = {
    CollKind::AllReduce, CollKind::Broadcast,     CollKind::Reduce,
    CollKind::AllGather, CollKind::ReduceScatter, CollKind::AllToAll,
    CollKind::Scatter,   CollKind::Gather,        CollKind::SendRecvRing};

bool algo_serves(const std::string& algo, CollKind k) {
  using K = CollKind;
  if (algo == "auto") return true;
  if (algo == "ring")
    return k == K::AllReduce || k == K::ReduceScatter || k == K::AllGather || k == K::Broadcast ||
           k == K::Reduce;
  if (algo == "tree")
    return k == K::AllReduce || k == K::Broadcast || k == K::Reduce || k == K::Scatter ||
           k == K::Gather;
  if (algo == "rhd") return k == K::AllReduce || k == K::ReduceScatter || k == K::AllGather;
  if (algo == "direct")
    return k == K::AllReduce || k == K::AllGather || k == K::ReduceScatter || k == K::AllToAll ||
           k == K::Scatter || k == K::Gather;
  if (algo == "twoshot" || algo == "doubling") return k == K::AllReduce;
  if (algo == "hier") return k == K::AllReduce || k == K::Broadcast || k == K::Reduce;
  return false;
}

std::string describe(const CheckCase& c) {
  std::string s = std::string(kind_str(c.kind)) + " " + type_str(c.dtype);
  if (kind_reduces(c.kind)) s += std::string(" ") + op_str(c.op);
  s += " count " + std::to_string(c.count);
  if (kind_rooted(c.kind)) s += " root " + std::to_string(c.root);
  s += c.in_place ? " in-place" : " out-of-place";
  return s;
}

MemOps host_mem() {
  MemOps m;
  m.alloc = [](size_t n) { return std::malloc(n ? n : 1); };
  m.release = [](void* p) { std::free(p); };
  m.upload = [](void* d, const void* s, size_t n) { std::memcpy(d, s, n); };
  m.download = [](void* d, const void* s, size_t n) { std::memcpy(d, s, n); };
  m.sync = [] {};
  return m;
}

bool run_and_check(mycollComm_t comm, const CheckCase& c, const MemOps& mem, std::string* err) {
  int rank = 0, n = 1;
  mycollCommUserRank(comm, &rank);
  mycollCommCount(comm, &n);
  const size_t es = elem_size(c.dtype);
  const size_t cnt = c.count;
  const bool red = kind_reduces(c.kind);
  const bool root = rank == c.root;
  // Element counts of the send and receive buffers on this rank.
  size_t scount = cnt, rcount = cnt;
  switch (c.kind) {
    case CollKind::AllGather: rcount = cnt * n; break;
    case CollKind::ReduceScatter: scount = cnt * n; break;
    case CollKind::AllToAll: scount = rcount = cnt * n; break;
    case CollKind::Scatter: scount = cnt * n; break;
    case CollKind::Gather: rcount = cnt * n; break;
    default: break;
  }
  // Host images: input (what this rank sends), output (poisoned receive buffer).
  std::vector<unsigned char> in(scount * es + 1), out(rcount * es + 1);
  for (size_t i = 0; i < scount; ++i)
    store(c.dtype, in.data(), i, input_value(c.dtype, c.op, red, rank, i, c.seed));
  poison(out.data(), out.size());

  // Device (or host) buffers; in-place variants share one allocation.
  void* sbuf = nullptr;
  void* rbuf = nullptr;
  void* big = nullptr;
  if (c.in_place) {
    size_t total = std::max(scount, rcount) * es;
    big = mem.alloc(total + 64);
    std::vector<unsigned char> img(total + 64);
    poison(img.data(), img.size());
    size_t soff = 0, roff = 0;
    switch (c.kind) {
      case CollKind::AllGather: soff = rank * cnt * es; break;
      case CollKind::ReduceScatter: roff = rank * cnt * es; break;
      case CollKind::Scatter: roff = c.root * cnt * es; break;
      case CollKind::Gather: soff = c.root * cnt * es; break;
      default: break;
    }
    // Non-root ranks of scatter/gather have no in-place form: plain buffers.
    bool alias = !((c.kind == CollKind::Scatter || c.kind == CollKind::Gather) && !root);
    if (alias) {
      std::memcpy(img.data() + soff, in.data(), scount * es);
      mem.upload(big, img.data(), img.size());
      sbuf = static_cast<char*>(big) + soff;
      rbuf = static_cast<char*>(big) + roff;
    }
  }
  void* own_s = nullptr;
  void* own_r = nullptr;
  if (!sbuf) {
    own_s = mem.alloc(scount * es + 64);
    own_r = mem.alloc(rcount * es + 64);
    mem.upload(own_s, in.data(), scount * es);
    std::vector<unsigned char> pz(rcount * es + 64);
    poison(pz.data(), pz.size());
    mem.upload(own_r, pz.data(), pz.size());
    sbuf = own_s;
    rbuf = own_r;
  }

  mycollResult_t r = mycollSuccess;
  mycollStream_t st = mem.stream;
  switch (c.kind) {
    case CollKind::AllReduce: r = mycollAllReduce(sbuf, rbuf, cnt, c.dtype, c.op, comm, st); break;
    case CollKind::Broadcast:
      r = mycollBroadcast(sbuf, rbuf, cnt, c.dtype, c.root, comm, st);
      break;
    case CollKind::Reduce:
      r = mycollReduce(sbuf, rbuf, cnt, c.dtype, c.op, c.root, comm, st);
      break;
    case CollKind::AllGather: r = mycollAllGather(sbuf, rbuf, cnt, c.dtype, comm, st); break;
    case CollKind::ReduceScatter:
      r = mycollReduceScatter(sbuf, rbuf, cnt, c.dtype, c.op, comm, st);
      break;
    case CollKind::AllToAll: r = mycollAllToAll(sbuf, rbuf, cnt, c.dtype, comm, st); break;
    case CollKind::Scatter: r = mycollScatter(sbuf, rbuf, cnt, c.dtype, c.root, comm, st); break;
    case CollKind::Gather: r = mycollGather(sbuf, rbuf, cnt, c.dtype, c.root, comm, st); break;
    case CollKind::SendRecvRing: {
      // Receive posted before send on purpose: the group must make it safe.
      mycollGroupStart();
      mycollRecv(rbuf, cnt, c.dtype, (rank - 1 + n) % n, comm, st);
      mycollSend(sbuf, cnt, c.dtype, (rank + 1) % n, comm, st);
      r = mycollGroupEnd();
      break;
    }
  }
  mem.sync();
  bool ok = true;
  mycollResult_t async = mycollSuccess;
  if (r == mycollSuccess) mycollCommGetAsyncError(comm, &async);
  if (r != mycollSuccess) {
    *err = describe(c) + ": returned " + mycollGetErrorString(r) + ": " + mycollGetLastError(comm);
    ok = false;
  } else if (async != mycollSuccess) {
    // A kernel that gave up (timeout, abort) leaves its output unspecified:
    // report why rather than the elements it did not write.
    *err = describe(c) + ": asynchronous error " + mycollGetErrorString(async) + ": " +
           mycollGetLastError(comm);
    ok = false;
  } else {
    mem.download(out.data(), rbuf, rcount * es);
    std::vector<unsigned char> exp(es);
    int bad = 0;
    auto expect = [&](size_t i, int src_rank, size_t src_index) {
      store(c.dtype, exp.data(), 0, input_value(c.dtype, c.op, false, src_rank, src_index, c.seed));
    };
    bool check_out = true;
    if ((c.kind == CollKind::Reduce || c.kind == CollKind::Gather) && !root) check_out = false;
    for (size_t i = 0; check_out && i < rcount; ++i) {
      switch (c.kind) {
        case CollKind::AllReduce:
        case CollKind::Reduce: reference_reduce(c.dtype, c.op, n, i, c.seed, exp.data()); break;
        case CollKind::ReduceScatter:
          reference_reduce(c.dtype, c.op, n, rank * cnt + i, c.seed, exp.data());
          break;
        case CollKind::Broadcast: expect(i, c.root, i); break;
        case CollKind::AllGather:
        case CollKind::Gather: expect(i, static_cast<int>(i / cnt), i % cnt); break;
        case CollKind::AllToAll: expect(i, static_cast<int>(i / cnt), rank * cnt + i % cnt); break;
        case CollKind::Scatter: expect(i, c.root, rank * cnt + i); break;
        case CollKind::SendRecvRing: expect(i, (rank - 1 + n) % n, i); break;
      }
      if (std::memcmp(out.data() + i * es, exp.data(), es) != 0) {
        if (bad < 3)
          *err += (bad ? "; " : describe(c) + " on rank " + std::to_string(rank) + ": ") +
                  describe_elem(c.dtype, out.data() + i * es, exp.data(), i);
        ++bad;
      }
    }
    if (!check_out && !c.in_place) {
      // Outputs a rank does not own must stay untouched.
      mem.download(out.data(), rbuf, rcount * es);
      if (!is_poison(out.data(), rcount * es)) {
        *err += describe(c) + " on rank " + std::to_string(rank) +
                ": non-root receive buffer was written";
        ++bad;
      }
    }
    if (bad > 3) *err += "; " + std::to_string(bad) + " elements wrong in all";
    ok = bad == 0;
  }
  if (big) mem.release(big);
  if (own_s) mem.release(own_s);
  if (own_r) mem.release(own_r);
  return ok;
}

}  // namespace mycoll_test
