// One process drives every rank (the single-process layout of nccl-tests
// and of programs with several GPUs per process): ncclCommInitAll (host
// memory: a group of ncclCommInitRank), then each collective issued for all ranks from one thread
// inside one group. With --mem cuda rank r is on GPU r % GPUs, so with fewer GPUs the ranks share
// one CUDA context and their kernels must run at once. Each case runs with a stream per rank and
// with one stream for all the ranks of a GPU (the group must not queue a rank's kernel behind
// another's that it waits for). With two GPUs or more, a stream of another GPU is refused before
// anything runs, and the communicators stay usable. Outputs of every rank checked element by
// element against harness.cc's references.
#include <cstring>
#include <functional>
#include <memory>

#include "harness.h"
#include "harness_cuda.h"
#include "suites.h"

namespace ntest {
namespace {

struct Ranks {
  World& w;
  int n;
  std::vector<ncclComm_t> comms;
  std::vector<int> devs;
  std::vector<std::unique_ptr<Stream>> own;  // a stream per rank, on its GPU
  bool shared = false;  // the ranks of a GPU on one stream (rank devs[r]'s: the first on it)

  cudaStream_t stream(int r) const { return own[shared ? devs[r] : r]->get(); }

  // Buffers of every rank, each on its rank's GPU.
  std::vector<std::unique_ptr<Buf>> bufs(ncclDataType_t t, size_t count) {
    std::vector<std::unique_ptr<Buf>> b(n);
    for (int r = 0; r < n; ++r) {
      on_gpu(r);
      b[r] = std::make_unique<Buf>(t, count);
    }
    return b;
  }
  void on_gpu(int r) const {
    std::string why;
    if (mem() == Mem::Cuda && !cuda::set_device(devs[r], &why))
      fail(w, "cudaSetDevice(%d): %s", devs[r], why.c_str());
  }

  // Issues call(r) for every rank in one group, then waits for every rank's
  // stream and asks every communicator for an asynchronous error.
  bool group(const char* what, const std::function<ncclResult_t(int)>& call) {
    bool good = ok(w, ncclGroupStart(), "ncclGroupStart");
    for (int r = 0; r < n; ++r) good = ok(w, call(r), what) && good;
    good = ok(w, ncclGroupEnd(), what) && good;
    for (int r = 0; r < n; ++r) good = finish(w, what, comms[r], stream(r)) && good;
    return good;
  }
};

void what_of(char* out, size_t size, const char* coll, ncclDataType_t t, size_t count, bool inplace,
             const Ranks& k) {
  std::snprintf(out, size, "%s %s count %zu %s, %d ranks in one thread, %s", coll, type_name(t),
                count, inplace ? "in place" : "out of place", k.n,
                k.shared ? "one stream per GPU" : "a stream each");
}

void reductions(Ranks& k, int& seed) {
  const int n = k.n;
  const ncclDataType_t types[] = {ncclFloat32, ncclBfloat16, ncclInt32, ncclFloat8e4m3,
                                  ncclFloat64};
  const ncclRedOp_t ops[] = {ncclSum, ncclAvg, ncclMax, ncclProd};
  int i_op = 0;
  for (ncclDataType_t t : types)
    for (size_t count : {size_t(1), size_t(1031), size_t(100003)})
      for (bool inplace : {false, true}) {
        const ncclRedOp_t op = ops[i_op++ % 4];
        char what[160];
        // all-reduce
        ++seed;
        what_of(what, sizeof(what), "allreduce", t, count, inplace, k);
        auto send = k.bufs(t, count), recv = k.bufs(t, count);
        for (int r = 0; r < n; ++r) {
          for (size_t i = 0; i < count; ++i) store(t, send[r]->host(), i, input(t, op, r, i, seed));
          send[r]->put();
        }
        if (k.group(what, [&](int r) {
              return ncclAllReduce(send[r]->dev(), (inplace ? send : recv)[r]->dev(), count, t, op,
                                   k.comms[r], k.stream(r));
            })) {
          std::vector<double> want(count);
          for (size_t i = 0; i < count; ++i) want[i] = reference(t, op, n, i, seed);
          for (int r = 0; r < n; ++r) {
            Buf& out = *(inplace ? send : recv)[r];
            out.get();
            check_elems(k.w, t, out.host(), 0, count, want, what);
          }
        }
        // reduce to a root
        ++seed;
        const int root = seed % n;
        what_of(what, sizeof(what), "reduce", t, count, inplace, k);
        for (int r = 0; r < n; ++r) {
          for (size_t i = 0; i < count; ++i) store(t, send[r]->host(), i, input(t, op, r, i, seed));
          send[r]->put();
        }
        if (k.group(what, [&](int r) {
              return ncclReduce(send[r]->dev(), (inplace ? send : recv)[r]->dev(), count, t, op,
                                root, k.comms[r], k.stream(r));
            })) {
          std::vector<double> want(count);
          for (size_t i = 0; i < count; ++i) want[i] = reference(t, op, n, i, seed);
          Buf& out = *(inplace ? send : recv)[root];
          out.get();
          check_elems(k.w, t, out.host(), 0, count, want, what);
        }
        // reduce-scatter: count elements per rank
        ++seed;
        what_of(what, sizeof(what), "reducescatter", t, count, inplace, k);
        auto whole = k.bufs(t, count * n);
        for (int r = 0; r < n; ++r) {
          for (size_t i = 0; i < count * n; ++i)
            store(t, whole[r]->host(), i, input(t, op, r, i, seed));
          whole[r]->put();
        }
        if (k.group(what, [&](int r) {
              void* out = inplace ? whole[r]->dev(r * count) : recv[r]->dev();
              return ncclReduceScatter(whole[r]->dev(), out, count, t, op, k.comms[r], k.stream(r));
            })) {
          for (int r = 0; r < n; ++r) {
            std::vector<double> want(count);
            for (size_t i = 0; i < count; ++i) want[i] = reference(t, op, n, r * count + i, seed);
            Buf& out = inplace ? *whole[r] : *recv[r];
            out.get();
            check_elems(k.w, t, out.host(), inplace ? r * count : 0, count, want, what);
          }
        }
      }
}

void movements(Ranks& k, int& seed) {
  const int n = k.n;
  for (ncclDataType_t t : {ncclFloat32, ncclFloat16, ncclUint8, ncclInt64})
    for (size_t count : {size_t(1), size_t(517), size_t(100003)})
      for (bool inplace : {false, true}) {
        char what[160];
        // broadcast
        ++seed;
        const int root = seed % n;
        what_of(what, sizeof(what), "broadcast", t, count, inplace, k);
        auto a = k.bufs(t, count), b = k.bufs(t, count);
        for (size_t i = 0; i < count; ++i)
          store(t, a[root]->host(), i, tag_value(t, root, i, seed));
        a[root]->put();
        if (k.group(what, [&](int r) {
              return ncclBroadcast(a[r]->dev(), (inplace ? a : b)[r]->dev(), count, t, root,
                                   k.comms[r], k.stream(r));
            })) {
          std::vector<double> want(count);
          for (size_t i = 0; i < count; ++i) want[i] = tag_value(t, root, i, seed);
          for (int r = 0; r < n; ++r) {
            Buf& out = *(inplace ? a : b)[r];
            out.get();
            check_elems(k.w, t, out.host(), 0, count, want, what);
          }
        }
        // all-gather
        ++seed;
        what_of(what, sizeof(what), "allgather", t, count, inplace, k);
        const int ag_seed = seed;  // a[r] keeps rank r's block for gather, scatter, the ring
        auto all = k.bufs(t, count * n);
        for (int r = 0; r < n; ++r) {
          for (size_t i = 0; i < count; ++i) {
            store(t, a[r]->host(), i, tag_value(t, r, i, seed));
            store(t, all[r]->host(), r * count + i, tag_value(t, r, i, seed));
          }
          a[r]->put();
          all[r]->put();
        }
        std::vector<double> gathered(count * n);
        for (int q = 0; q < n; ++q)
          for (size_t i = 0; i < count; ++i) gathered[q * count + i] = tag_value(t, q, i, seed);
        if (k.group(what, [&](int r) {
              void* in = inplace ? all[r]->dev(r * count) : a[r]->dev();
              return ncclAllGather(in, all[r]->dev(), count, t, k.comms[r], k.stream(r));
            }))
          for (int r = 0; r < n; ++r) {
            all[r]->get();
            check_elems(k.w, t, all[r]->host(), 0, count * n, gathered, what);
          }
        // all-to-all
        ++seed;
        what_of(what, sizeof(what), "alltoall", t, count, inplace, k);
        auto x = k.bufs(t, count * n), y = k.bufs(t, count * n);
        for (int r = 0; r < n; ++r) {
          for (size_t j = 0; j < count * n; ++j)
            store(t, x[r]->host(), j, tag_value(t, r, j, seed));
          x[r]->put();
        }
        if (k.group(what, [&](int r) {
              return ncclAlltoAll(x[r]->dev(), (inplace ? x : y)[r]->dev(), count, t, k.comms[r],
                                  k.stream(r));
            }))
          for (int r = 0; r < n; ++r) {
            Buf& out = *(inplace ? x : y)[r];
            out.get();
            std::vector<double> want(count * n);
            for (int q = 0; q < n; ++q)
              for (size_t i = 0; i < count; ++i)
                want[q * count + i] = tag_value(t, q, r * count + i, seed);
            check_elems(k.w, t, out.host(), 0, count * n, want, what);
          }
        // gather to a root, then scatter from it (out of place)
        const int g = ++seed % n;
        what_of(what, sizeof(what), "gather", t, count, false, k);
        if (k.group(what, [&](int r) {
              return ncclGather(a[r]->dev(), r == g ? all[r]->dev() : nullptr, count, t, g,
                                k.comms[r], k.stream(r));
            })) {
          all[g]->get();
          std::vector<double> want(count * n);
          for (int q = 0; q < n; ++q)
            for (size_t i = 0; i < count; ++i) want[q * count + i] = tag_value(t, q, i, ag_seed);
          check_elems(k.w, t, all[g]->host(), 0, count * n, want, what);
          what_of(what, sizeof(what), "scatter", t, count, false, k);
          if (k.group(what, [&](int r) {
                return ncclScatter(r == g ? all[r]->dev() : nullptr, b[r]->dev(), count, t, g,
                                   k.comms[r], k.stream(r));
              }))
            for (int r = 0; r < n; ++r) {
              b[r]->get();
              std::vector<double> mine(count);
              for (size_t i = 0; i < count; ++i) mine[i] = tag_value(t, r, i, ag_seed);
              check_elems(k.w, t, b[r]->host(), 0, count, mine, what);
            }
        }
        // a ring of send/recv pairs, every rank's in the one group
        what_of(what, sizeof(what), "send/recv ring", t, count, false, k);
        if (k.group(what, [&](int r) {
              ncclResult_t e =
                  ncclSend(a[r]->dev(), count, t, (r + 1) % n, k.comms[r], k.stream(r));
              if (e != ncclSuccess) return e;
              return ncclRecv(b[r]->dev(), count, t, (r + n - 1) % n, k.comms[r], k.stream(r));
            }))
          for (int r = 0; r < n; ++r) {
            b[r]->get();
            std::vector<double> want(count);
            for (size_t i = 0; i < count; ++i) want[i] = tag_value(t, (r + n - 1) % n, i, ag_seed);
            check_elems(k.w, t, b[r]->host(), 0, count, want, what);
          }
      }
}

// Rank 1 handed rank 0's stream, which belongs to another GPU: ncclInvalidArgument before
// anything is launched, alone and in a group (where rank 0's kernel would otherwise wait for rank
// 1's); then the same all-reduce on the right streams gives every rank the right sum.
void wrong_gpu_stream(Ranks& k, int& seed) {
  const int n = k.n;
  const size_t count = 1031;
  const ncclDataType_t t = ncclFloat32;
  auto send = k.bufs(t, count), recv = k.bufs(t, count);
  ++seed;
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < count; ++i) store(t, send[r]->host(), i, input(t, ncclSum, r, i, seed));
    send[r]->put();
  }
  cudaStream_t gpu0 = k.own[0]->get();
  ncclResult_t e =
      ncclAllReduce(send[1]->dev(), recv[1]->dev(), count, t, ncclSum, k.comms[1], gpu0);
  expect(k.w, e == ncclInvalidArgument,
         "rank 1 (GPU %d) all-reduce on a stream of GPU %d returned %d, want ncclInvalidArgument",
         k.devs[1], k.devs[0], int(e));
  const char* msg = ncclGetLastError(k.comms[1]);
  expect(k.w, msg && std::strstr(msg, "belongs to GPU"), "the refusal names the stream's GPU: %s",
         msg ? msg : "(null)");
  ok(k.w, ncclGroupStart(), "ncclGroupStart");
  for (int r = 0; r < n; ++r)
    ncclAllReduce(send[r]->dev(), recv[r]->dev(), count, t, ncclSum, k.comms[r], gpu0);
  e = ncclGroupEnd();
  expect(k.w, e == ncclInvalidArgument,
         "a group where rank 1 names a stream of another GPU returned %d, want ncclInvalidArgument",
         int(e));
  k.shared = false;
  if (k.group("allreduce float32 count 1031 after a stream of the wrong GPU was refused",
              [&](int r) {
                return ncclAllReduce(send[r]->dev(), recv[r]->dev(), count, t, ncclSum, k.comms[r],
                                     k.stream(r));
              })) {
    std::vector<double> want(count);
    for (size_t i = 0; i < count; ++i) want[i] = reference(t, ncclSum, n, i, seed);
    for (int r = 0; r < n; ++r) {
      recv[r]->get();
      check_elems(k.w, t, recv[r]->host(), 0, count, want,
                  "allreduce after a stream of the wrong GPU was refused");
    }
  }
}

}  // namespace

int suite_initall(World& w) {
  if (w.rank != 0) return 0;  // rank 0's process drives them all
  Ranks k{w, w.nranks, {}, {}, {}, false};
  if (!init_every_rank(w, &k.comms, &k.devs)) return 1;
  for (int r = 0; r < k.n; ++r) {
    int d = -2;
    if (ok(w, ncclCommCuDevice(k.comms[r], &d), "ncclCommCuDevice"))
      expect(w, d == (mem() == Mem::Cuda ? k.devs[r] : -1),
             "rank %d of ncclCommInitAll on device %d", r, d);
    k.on_gpu(r);
    k.own.push_back(std::make_unique<Stream>());
  }
  k.on_gpu(0);
  int seed = 1000;
  if (mem() == Mem::Cuda && k.n > 1 && k.devs[1] != k.devs[0]) wrong_gpu_stream(k, seed);
  for (bool shared : {false, true}) {
    k.shared = shared;
    reductions(k, seed);
    movements(k, seed);
  }
  k.own.clear();
  for (ncclComm_t c : k.comms) ok(w, ncclCommDestroy(c), "ncclCommDestroy (InitAll)");
  return 0;
}

}  // namespace ntest
