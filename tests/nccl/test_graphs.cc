// CUDA graphs through nccl.h (GPU memory only; on host buffers the suite
// says it skipped): six calls of shapes never run before captured into one
// graph in global mode, as torch.cuda.graph does, with no warm-up: a
// PreMulSum all-reduce (scalar in device memory), an average
// reduce-scatter, an all-gather into stream-ordered memory allocated on the
// way (a graph allocation under capture), a broadcast, a max reduce and a
// grouped send/recv ring. Then called eagerly once before the graph's first launch
// (what the capture set up must be complete outside the graph), replayed
// three times with new inputs, and called eagerly again; every output
// element checked each time. Twice: on a communicator whose collectives
// run the plan kernel (fused, direct and LL-collective kernels off; tree
// and rhd), so its plans and scratch are first needed under capture, and
// on one with the automatic choices.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "harness.h"
#include "harness_cuda.h"
#include "suites.h"

namespace ntest {
namespace {

struct GraphCalls {
  static constexpr size_t kAr = 100003, kRs = 30011, kAg = 20011, kBc = 50001, kRd = 7001,
                          kP2p = 200003;
  World& w;
  ncclComm_t comm;
  const int n, me, next, prev, bc_root, rd_root;
  Buf ar_in{ncclFloat32, kAr}, ar_out{ncclFloat32, kAr}, scalar{ncclFloat32, 1};
  Buf rs_in{ncclBfloat16, kRs*size_t(w.nranks)}, rs_out{ncclBfloat16, kRs};
  Buf ag_in{ncclInt32, kAg}, ag_out{ncclInt32, kAg*size_t(w.nranks)};
  Buf bc{ncclFloat32, kBc};
  Buf rd_in{ncclFloat64, kRd}, rd_out{ncclFloat64, kRd};
  Buf tx{ncclFloat32, kP2p}, rx{ncclFloat32, kP2p};
  ncclRedOp_t premul = ncclSum;
  bool have_op = false;

  GraphCalls(World& world, ncclComm_t c)
      : w(world),
        comm(c),
        n(world.nranks),
        me(world.rank),
        next((world.rank + 1) % world.nranks),
        prev((world.rank + world.nranks - 1) % world.nranks),
        bc_root(world.nranks - 1),
        rd_root(0) {
    store(ncclFloat32, scalar.host(), 0, premul_scalar(ncclFloat32));
    scalar.put();
    have_op =
        ok(w, ncclRedOpCreatePreMulSum(&premul, scalar.dev(), ncclFloat32, ncclScalarDevice, comm),
           "ncclRedOpCreatePreMulSum");
  }
  ~GraphCalls() {
    if (have_op) ok(w, ncclRedOpDestroy(premul, comm), "ncclRedOpDestroy");
  }

  // Inputs of round `seed` into the GPU buffers; outputs set to 0x5a bytes.
  void prepare(int seed) {
    for (size_t i = 0; i < kAr; ++i)
      store(ncclFloat32, ar_in.host(), i, input(ncclFloat32, ncclSum, me, i, seed));
    for (size_t i = 0; i < kRs * n; ++i)
      store(ncclBfloat16, rs_in.host(), i, input(ncclBfloat16, ncclAvg, me, i, seed));
    for (size_t i = 0; i < kAg; ++i)
      store(ncclInt32, ag_in.host(), i, tag_value(ncclInt32, me, i, seed));
    for (size_t i = 0; i < kBc; ++i)
      store(ncclFloat32, bc.host(), i, me == bc_root ? tag_value(ncclFloat32, me, i, seed) : 0.0);
    for (size_t i = 0; i < kRd; ++i)
      store(ncclFloat64, rd_in.host(), i, input(ncclFloat64, ncclMax, me, i, seed));
    for (size_t i = 0; i < kP2p; ++i)
      store(ncclFloat32, tx.host(), i, tag_value(ncclFloat32, me, i, seed));
    for (Buf* b : {&ar_out, &rs_out, &ag_out, &rd_out, &rx}) {
      std::fill(b->host(), b->host() + b->bytes(), char(0x5a));
      b->put();
    }
    for (Buf* b : {&ar_in, &rs_in, &ag_in, &bc, &rd_in, &tx}) b->put();
  }

  bool enqueue(const char* what) {
    char m[128];
    auto call = [&](ncclResult_t r, const char* name) {
      std::snprintf(m, sizeof(m), "%s (%s)", name, what);
      return ok(w, r, m);
    };
    bool good = have_op && call(ncclAllReduce(ar_in.dev(), ar_out.dev(), kAr, ncclFloat32, premul,
                                              comm, w.stream),
                                "ncclAllReduce premulsum");
    good = good && call(ncclReduceScatter(rs_in.dev(), rs_out.dev(), kRs, ncclBfloat16, ncclAvg,
                                          comm, w.stream),
                        "ncclReduceScatter avg");
    // The all-gather lands in stream-ordered memory allocated on the way (a
    // graph allocation under capture, as PyTorch's cudaMallocAsync backend
    // makes), copied out, then freed.
    std::string why;
    void* tmp = good ? cuda::alloc_async(ag_out.bytes(), w.stream, &why) : nullptr;
    good = good && expect(w, tmp != nullptr, "cudaMallocAsync (%s): %s", what, why.c_str());
    good = good && call(ncclAllGather(ag_in.dev(), tmp, kAg, ncclInt32, comm, w.stream),
                        "ncclAllGather into stream-ordered memory");
    if (tmp) {
      good = good && expect(w, cuda::copy_async(ag_out.dev(), tmp, ag_out.bytes(), w.stream, &why),
                            "copy (%s): %s", what, why.c_str());
      good = expect(w, cuda::free_async(tmp, w.stream, &why), "cudaFreeAsync (%s): %s", what,
                    why.c_str()) &&
             good;
    }
    good =
        good && call(ncclBroadcast(bc.dev(), bc.dev(), kBc, ncclFloat32, bc_root, comm, w.stream),
                     "ncclBroadcast in place");
    good = good && call(ncclReduce(rd_in.dev(), rd_out.dev(), kRd, ncclFloat64, ncclMax, rd_root,
                                   comm, w.stream),
                        "ncclReduce max");
    good = good && call(ncclGroupStart(), "ncclGroupStart");
    if (good) {
      call(ncclSend(tx.dev(), kP2p, ncclFloat32, next, comm, w.stream), "ncclSend");
      call(ncclRecv(rx.dev(), kP2p, ncclFloat32, prev, comm, w.stream), "ncclRecv");
      good = call(ncclGroupEnd(), "ncclGroupEnd send/recv");
    }
    return good;
  }

  // Waits for the stream, then checks every output of round `seed`.
  bool verify(int seed, const char* what) {
    if (!finish(w, what, comm)) return false;
    for (Buf* b : {&ar_out, &rs_out, &ag_out, &bc, &rd_out, &rx}) b->get();
    char m[128];
    auto name = [&](const char* coll) {
      std::snprintf(m, sizeof(m), "%s: %s", what, coll);
      return m;
    };
    std::vector<double> want(kAr);
    for (size_t i = 0; i < kAr; ++i) want[i] = reference(ncclFloat32, kPreMul, n, i, seed);
    bool good =
        check_elems(w, ncclFloat32, ar_out.host(), 0, kAr, want, name("premulsum allreduce"));
    want.assign(kRs, 0);
    for (size_t i = 0; i < kRs; ++i)
      want[i] = reference(ncclBfloat16, ncclAvg, n, me * kRs + i, seed);
    good &= check_elems(w, ncclBfloat16, rs_out.host(), 0, kRs, want, name("avg reducescatter"));
    want.assign(kAg * n, 0);
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < kAg; ++i) want[r * kAg + i] = tag_value(ncclInt32, r, i, seed);
    good &= check_elems(w, ncclInt32, ag_out.host(), 0, kAg * n, want, name("allgather"));
    want.assign(kBc, 0);
    for (size_t i = 0; i < kBc; ++i) want[i] = tag_value(ncclFloat32, bc_root, i, seed);
    good &= check_elems(w, ncclFloat32, bc.host(), 0, kBc, want, name("broadcast"));
    if (me == rd_root) {
      want.assign(kRd, 0);
      for (size_t i = 0; i < kRd; ++i) want[i] = reference(ncclFloat64, ncclMax, n, i, seed);
      good &= check_elems(w, ncclFloat64, rd_out.host(), 0, kRd, want, name("max reduce"));
    }
    want.assign(kP2p, 0);
    for (size_t i = 0; i < kP2p; ++i) want[i] = tag_value(ncclFloat32, prev, i, seed);
    good &= check_elems(w, ncclFloat32, rx.host(), 0, kP2p, want, name("send/recv ring"));
    return good;
  }
};

void capture_and_replay(World& w, ncclComm_t comm, const char* label) {
  GraphCalls g(w, comm);
  char what[128];
  std::string why;
  if (!expect(w, cuda::begin_capture(w.stream, &why), "%s: begin capture: %s", label, why.c_str()))
    return;
  std::snprintf(what, sizeof(what), "%s, under capture", label);
  const bool posted = g.enqueue(what);
  void* graph = cuda::end_capture(w.stream, &why);
  if (!expect(w, graph != nullptr, "%s: end capture / instantiate: %s", label, why.c_str()) ||
      !posted) {
    cuda::release_graph(graph);
    return;
  }
  bool good = true;
  std::snprintf(what, sizeof(what), "%s, eager before the first replay", label);
  g.prepare(1000);
  good = g.enqueue(what) && g.verify(1000, what);
  for (int seed = 1; good && seed <= 3; ++seed) {
    std::snprintf(what, sizeof(what), "%s, replay %d", label, seed);
    g.prepare(seed);
    good =
        expect(w, cuda::launch_graph(graph, w.stream, &why), "%s: launch: %s", what, why.c_str()) &&
        g.verify(seed, what);
  }
  std::snprintf(what, sizeof(what), "%s, eager after the replays", label);
  if (good) {
    g.prepare(50);
    if (g.enqueue(what)) g.verify(50, what);
  }
  cuda::release_graph(graph);
}

}  // namespace

int suite_graphs(World& w) {
  if (mem() != Mem::Cuda) {
    if (w.rank == 0) std::printf("[nccl_api_test] graphs: CUDA graphs need --mem cuda (skipped)\n");
    return 0;
  }
  // The plan kernel for every collective (MYCOLL_* settings are read at
  // each communicator's init).
  setenv("MYCOLL_GPU_RING_BYTES", "0", 1);
  setenv("MYCOLL_GPU_DIRECT_BYTES", "0", 1);
  setenv("MYCOLL_GPU_LL_COLL_BYTES", "0", 1);
  setenv("MYCOLL_ALGO", "allreduce:tree,reducescatter:rhd,allgather:rhd,broadcast:tree,reduce:tree",
         1);
  ncclComm_t plan = nullptr;
  if (ok(w, ncclCommInitRank(&plan, w.nranks, shared_id(w, 0), w.rank),
         "ncclCommInitRank (plan kernel)")) {
    capture_and_replay(w, plan, "plan kernel");
    ok(w, ncclCommDestroy(plan), "ncclCommDestroy (plan kernel)");
  }
  for (const char* v : {"MYCOLL_GPU_RING_BYTES", "MYCOLL_GPU_DIRECT_BYTES",
                        "MYCOLL_GPU_LL_COLL_BYTES", "MYCOLL_ALGO"})
    unsetenv(v);
  if (ok(w, ncclCommInitRank(&w.comm, w.nranks, shared_id(w, 1), w.rank),
         "ncclCommInitRank (automatic)"))
    capture_and_replay(w, w.comm, "automatic");
  return 0;
}

}  // namespace ntest
