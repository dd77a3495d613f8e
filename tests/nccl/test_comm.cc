// Point-to-point, communicator management (split, shrink, non-blocking
// init, finalize, revoke, abort, registration), errors and bad arguments,
// and the NCCL_* environment variables; on host buffers, or GPU buffers
// with --mem cuda.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "harness.h"
#include "suites.h"

// The device API is declared in nccl_device.h (not nccl.h); its pointers
// are opaque here.
extern "C" ncclResult_t ncclDevCommCreate(ncclComm_t, const void* reqs, void* outDevComm);

namespace ntest {
namespace {

bool contains(const char* s, const char* part) { return s && std::strstr(s, part) != nullptr; }

// Allreduce of each rank's value (float64 sum) on comm; checks the result.
void check_allreduce(World& w, ncclComm_t comm, double mine, double want, const char* what) {
  Buf v(ncclFloat64, 1), out(ncclFloat64, 1);
  store(ncclFloat64, v.host(), 0, mine);
  v.put();
  if (ok(w, ncclAllReduce(v.dev(), out.dev(), 1, ncclFloat64, ncclSum, comm, w.stream), what) &&
      finish(w, what, comm)) {
    out.get();
    const double got = load(ncclFloat64, out.host(), 0);
    expect(w, got == want, "%s: sum is %g, want %g", what, got, want);
  }
}

// Polls a non-blocking communicator until it leaves ncclInProgress (60 s at most).
ncclResult_t wait_ready(World& w, ncclComm_t comm) {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  ncclResult_t state = ncclInProgress;
  while (state == ncclInProgress && std::chrono::steady_clock::now() < until) {
    if (!ok(w, ncclCommGetAsyncError(comm, &state), "ncclCommGetAsyncError"))
      return ncclInternalError;
    if (state == ncclInProgress) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return state;
}

// Communicators destroyed in different orders on different ranks, as
// PyTorch destroys its groups at exit (each rank its own set, in its own
// order): two communicators of every rank, even ranks destroying the first
// first and odd ranks the second, with a two-rank one (ranks 0 and 1, as
// send/recv makes) between them. On GPU communicators with ranks in other
// processes each destroy meets its peers before freeing; none may wait for
// a peer that waits in another destroy (that took MYCOLL_TIMEOUT, 60 s
// here). The world communicator is checked afterwards.
void test_destroy_orders(World& w) {
  const int n = w.nranks, me = w.rank;
  ncclComm_t both[2] = {nullptr, nullptr}, pair = nullptr;
  for (int k = 0; k < 2; ++k)
    if (ok(w, ncclCommSplit(w.comm, 0, me, &both[k], nullptr), "ncclCommSplit (destroy orders)"))
      check_allreduce(w, both[k], me + k, n * (n - 1) / 2.0 + n * k, "allreduce before destroy");
  if (ok(w, ncclCommSplit(w.comm, me < 2 ? 0 : NCCL_SPLIT_NOCOLOR, me, &pair, nullptr),
         "ncclCommSplit (pair)") &&
      me < 2)
    check_allreduce(w, pair, 1.0, 2.0, "allreduce on the pair before destroy");
  const auto t0 = std::chrono::steady_clock::now();
  ncclComm_t order[3] = {both[me % 2], pair, both[1 - me % 2]};
  for (ncclComm_t c : order)
    if (c) ok(w, ncclCommDestroy(c), "ncclCommDestroy (another order than a peer's)");
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  expect(w, took < 10.0,
         "destroying three communicators in another order than the peers took %.1f s (a "
         "destroy waited for a peer that waited in another one)",
         took);
  check_allreduce(w, w.comm, me, n * (n - 1) / 2.0, "allreduce after the destroys");
}

// ---- point-to-point -----------------------------------------------------------

void test_all_pairs(World& w, ncclDataType_t t, int seed) {
  const int n = w.nranks;
  auto count = [](int from, int to) { return size_t(1 + (from * 5 + to * 3) % 17 * 61); };
  std::vector<std::unique_ptr<Buf>> out(n), in(n);
  ok(w, ncclGroupStart(), "ncclGroupStart");
  for (int p = 0; p < n; ++p) {
    out[p] = std::make_unique<Buf>(t, count(w.rank, p));
    in[p] = std::make_unique<Buf>(t, count(p, w.rank));
    for (size_t i = 0; i < count(w.rank, p); ++i)
      store(t, out[p]->host(), i, tag_value(t, w.rank, p * 1000 + i, seed));
    out[p]->put();
    ok(w, ncclSend(out[p]->dev(), count(w.rank, p), t, p, w.comm, w.stream), "ncclSend");
    ok(w, ncclRecv(in[p]->dev(), count(p, w.rank), t, p, w.comm, w.stream), "ncclRecv");
  }
  if (!ok(w, ncclGroupEnd(), "ncclGroupEnd (all pairs)") || !finish(w, "all-pairs send/recv"))
    return;
  for (int p = 0; p < n; ++p) {
    in[p]->get();
    std::vector<double> want(count(p, w.rank));
    for (size_t i = 0; i < want.size(); ++i) want[i] = tag_value(t, p, w.rank * 1000 + i, seed);
    check_elems(w, t, in[p]->host(), 0, want.size(), want, "all-pairs send/recv (self included)");
  }
}

}  // namespace

int suite_p2p(World& w) {
  int seed = 0;
  for (ncclDataType_t t : {ncclFloat32, ncclInt8, ncclFloat8e5m2, ncclFloat64, ncclBfloat16})
    test_all_pairs(w, t, ++seed);
  // Ungrouped pairs: even ranks send then receive, odd ranks the reverse.
  const int partner = w.rank ^ 1;
  if (partner < w.nranks) {
    const size_t count = 4099;
    Buf out(ncclInt32, count), in(ncclInt32, count);
    for (size_t i = 0; i < count; ++i) store(ncclInt32, out.host(), i, double(w.rank * 100000 + i));
    out.put();
    const bool first = w.rank % 2 == 0;
    for (int step = 0; step < 2; ++step) {
      if ((step == 0) == first)
        ok(w, ncclSend(out.dev(), count, ncclInt32, partner, w.comm, w.stream), "ncclSend (plain)");
      else
        ok(w, ncclRecv(in.dev(), count, ncclInt32, partner, w.comm, w.stream), "ncclRecv (plain)");
    }
    if (finish(w, "plain send/recv")) {
      in.get();
      std::vector<double> want(count);
      for (size_t i = 0; i < count; ++i) want[i] = double(partner * 100000 + i);
      check_elems(w, ncclInt32, in.host(), 0, count, want, "plain recv");
    }
  }
  return 0;
}

int suite_comm(World& w) {
  const int n = w.nranks, me = w.rank;
  int v = -1;
  if (ok(w, ncclCommCount(w.comm, &v), "ncclCommCount")) expect(w, v == n, "count %d", v);
  if (ok(w, ncclCommUserRank(w.comm, &v), "ncclCommUserRank")) expect(w, v == me, "rank %d", v);
  if (ok(w, ncclCommCuDevice(w.comm, &v), "ncclCommCuDevice"))
    expect(w, v == w.device, "communicator reports device %d, want %d", v, w.device);

  // Split by parity, keys reversing the order.
  ncclComm_t half = nullptr;
  if (ok(w, ncclCommSplit(w.comm, me % 2, n - me, &half, nullptr), "ncclCommSplit")) {
    int size = 0, rank = -1, want_rank = 0;
    double sum = 0;
    for (int r = me % 2; r < n; r += 2) {
      ++size;
      sum += r;
      if (r > me) ++want_rank;
    }
    ok(w, ncclCommCount(half, &v), "ncclCommCount (split)");
    expect(w, v == size, "split size %d, want %d", v, size);
    ok(w, ncclCommUserRank(half, &rank), "ncclCommUserRank (split)");
    expect(w, rank == want_rank, "split rank %d, want %d", rank, want_rank);
    check_allreduce(w, half, me, sum, "allreduce on split communicator");
    ok(w, ncclCommDestroy(half), "ncclCommDestroy (split)");
  }
  // NCCL_SPLIT_NOCOLOR: rank 0 gets no communicator; the others one of n-1
  // ranks, non-blocking by config.
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclComm_t rest = nullptr;
  ncclResult_t r = ncclCommSplit(w.comm, me == 0 ? NCCL_SPLIT_NOCOLOR : 1, 0, &rest, &cfg);
  expect(w, r == ncclSuccess || r == ncclInProgress, "ncclCommSplit (nocolor) returned %d", int(r));
  if (me == 0) {
    expect(w, rest == nullptr, "NCCL_SPLIT_NOCOLOR gave a communicator");
  } else if (expect(w, rest != nullptr, "split gave no communicator")) {
    expect(w, wait_ready(w, rest) == ncclSuccess, "non-blocking split did not become ready");
    check_allreduce(w, rest, 1, n - 1, "allreduce on nocolor split");
    ok(w, ncclCommDestroy(rest), "ncclCommDestroy (nocolor split)");
  }
  test_destroy_orders(w);

  // Non-blocking init, then finalize closes the communicator to new work.
  ncclUniqueId id = shared_id(w, 1);
  ncclConfig_t nb = NCCL_CONFIG_INITIALIZER;
  nb.blocking = 0;
  nb.commName = "nonblocking-test";
  ncclComm_t c = nullptr;
  r = ncclCommInitRankConfig(&c, n, id, me, &nb);
  expect(w, r == ncclInProgress || r == ncclSuccess, "non-blocking init returned %d", int(r));
  if (expect(w, c != nullptr, "non-blocking init gave no handle")) {
    expect(w, wait_ready(w, c) == ncclSuccess, "non-blocking init failed: %s", ncclGetLastError(c));
    check_allreduce(w, c, me + 1, n * (n + 1) / 2.0, "allreduce after non-blocking init");
    ok(w, ncclCommFinalize(c), "ncclCommFinalize");
    Buf x(ncclFloat64, 1), y(ncclFloat64, 1);
    r = ncclAllReduce(x.dev(), y.dev(), 1, ncclFloat64, ncclSum, c, w.stream);
    expect(w, r == ncclInvalidUsage, "allreduce after finalize returned %d", int(r));
    expect(w, contains(ncclGetLastError(c), "finalized"), "last error: %s", ncclGetLastError(c));
    ok(w, ncclCommDestroy(c), "ncclCommDestroy (finalized)");
  }

  // One thread creates both ranks of a communicator inside a group (as
  // single-process multi-device programs do) and runs a collective on both
  // in one group.
  if (me == 0) {
    ncclUniqueId solo;
    ncclComm_t pair[2] = {nullptr, nullptr};
    ok(w, ncclGetUniqueId(&solo), "ncclGetUniqueId (grouped init)");
    ok(w, ncclGroupStart(), "ncclGroupStart (grouped init)");
    for (int r = 0; r < 2; ++r)
      ok(w, ncclCommInitRank(&pair[r], 2, solo, r), "grouped ncclCommInitRank");
    if (ok(w, ncclGroupEnd(), "ncclGroupEnd (grouped init)") && pair[0] && pair[1]) {
      // Twice: a stream each, then both on one stream (each rank's kernel
      // waits for the other's, so the library must not queue one behind
      // the other).
      Stream streams[2];
      for (int shared = 0; shared < 2; ++shared) {
        Buf in(ncclFloat64, 2), outv(ncclFloat64, 2);
        store(ncclFloat64, in.host(), 0, 3 + shared);
        store(ncclFloat64, in.host(), 1, 4);
        in.put();
        cudaStream_t st[2] = {streams[0].get(), streams[shared ? 0 : 1].get()};
        const char* what = shared ? "allreduce of one thread's two ranks on one stream"
                                  : "allreduce of one thread's two ranks";
        ok(w, ncclGroupStart(), "ncclGroupStart (two ranks)");
        for (int r = 0; r < 2; ++r)
          ok(w, ncclAllReduce(in.dev(r), outv.dev(r), 1, ncclFloat64, ncclSum, pair[r], st[r]),
             what);
        ok(w, ncclGroupEnd(), "ncclGroupEnd (two ranks)");
        for (int r = 0; r < 2; ++r) finish(w, what, pair[r], st[r]);
        outv.get();
        const double o0 = load(ncclFloat64, outv.host(), 0), o1 = load(ncclFloat64, outv.host(), 1);
        const double want = 7 + shared;
        expect(w, o0 == want && o1 == want, "%s: got %g, %g, want %g", what, o0, o1, want);
      }
    }
    for (ncclComm_t p : pair)
      if (p) ok(w, ncclCommDestroy(p), "ncclCommDestroy (grouped init)");
  }

  // Scalable init with two ids.
  ncclUniqueId ids[2] = {shared_id(w, 2), shared_id(w, 3)};
  ncclComm_t sc = nullptr;
  if (ok(w, ncclCommInitRankScalable(&sc, n, me, 2, ids, nullptr), "ncclCommInitRankScalable")) {
    check_allreduce(w, sc, 2.0, 2.0 * n, "allreduce after scalable init");
    ok(w, ncclCommDestroy(sc), "ncclCommDestroy (scalable)");
  }

  // ncclGroupSimulateEnd estimates and runs nothing; the next group is unaffected.
  const size_t big = 1 << 16;
  Buf a(ncclFloat32, big), b(ncclFloat32, big);
  for (size_t i = 0; i < big; ++i) {
    store(ncclFloat32, a.host(), i, 1.0);
    store(ncclFloat32, b.host(), i, -5.0);
  }
  a.put();
  b.put();
  auto b_untouched = [&] {
    b.get();
    return load(ncclFloat32, b.host(), 0) == -5.0 && load(ncclFloat32, b.host(), big - 1) == -5.0;
  };
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  ok(w, ncclGroupStart(), "ncclGroupStart (simulate)");
  ok(w, ncclAllReduce(a.dev(), b.dev(), big, ncclFloat32, ncclSum, w.comm, w.stream),
     "allreduce in simulated group");
  if (ok(w, ncclGroupSimulateEnd(&sim), "ncclGroupSimulateEnd"))
    expect(w, sim.estimatedTime > 0, "estimatedTime %g", sim.estimatedTime);
  finish(w, "simulated group");
  expect(w, b_untouched(), "simulated allreduce ran");
  Buf sum(ncclFloat32, 1);
  ok(w, ncclGroupStart(), "ncclGroupStart");
  ok(w, ncclAllReduce(a.dev(), sum.dev(), 1, ncclFloat32, ncclSum, w.comm, w.stream),
     "grouped allreduce");
  ok(w, ncclGroupEnd(), "ncclGroupEnd");
  finish(w, "allreduce after a simulated group");
  sum.get();
  expect(w, load(ncclFloat32, sum.host(), 0) == n, "allreduce after a simulated group gave %g",
         load(ncclFloat32, sum.host(), 0));
  expect(w, b_untouched(), "the simulated call ran at a later ncclGroupEnd");

  // Registration: recorded and validated.
  void* handle = nullptr;
  if (ok(w, ncclCommRegister(w.comm, a.dev(), a.bytes(), &handle), "ncclCommRegister")) {
    expect(w, handle != nullptr, "ncclCommRegister gave a NULL handle");
    ok(w, ncclCommDeregister(w.comm, handle), "ncclCommDeregister");
    expect(w, ncclCommDeregister(w.comm, handle) == ncclInvalidArgument,
           "double deregister accepted");
  }
  ncclWindow_t win = nullptr;
  if (ok(w, ncclCommWindowRegister(w.comm, a.dev(), a.bytes(), &win, NCCL_WIN_COLL_SYMMETRIC),
         "ncclCommWindowRegister"))
    ok(w, ncclCommWindowDeregister(w.comm, win), "ncclCommWindowDeregister");
  expect(w, ncclCommWindowRegister(w.comm, a.dev(), 16, &win, 0x10) == ncclInvalidArgument,
         "unknown window flags accepted");
  expect(w, ncclCommRegister(w.comm, nullptr, 16, &handle) == ncclInvalidArgument,
         "NULL buffer registered");

  // GPU memory: served where the library has CUDA and a GPU, refused clearly otherwise.
  void* mem = nullptr;
  r = ncclMemAlloc(&mem, 4096);
  if (ntest::mem() == Mem::Cuda)
    expect(w, r == ncclSuccess, "ncclMemAlloc with a GPU returned %d", int(r));
  if (r == ncclSuccess) {
    expect(w, mem != nullptr, "ncclMemAlloc gave NULL");
    ok(w, ncclMemFree(mem), "ncclMemFree");
  } else {
    expect(w,
           (r == ncclInvalidUsage || r == ncclUnhandledCudaError) &&
               contains(ncclGetLastError(nullptr), "ncclMemAlloc"),
           "ncclMemAlloc returned %d: %s", int(r), ncclGetLastError(nullptr));
  }
  // The device API is refused with a reason.
  r = ncclDevCommCreate(w.comm, nullptr, nullptr);
  expect(w, r == ncclInvalidUsage && contains(ncclGetLastError(nullptr), "device API"),
         "ncclDevCommCreate returned %d: %s", int(r), ncclGetLastError(nullptr));

  // Revoke: later calls are refused; destroy still works.
  ncclComm_t dup = nullptr;
  if (ok(w, ncclCommSplit(w.comm, 0, me, &dup, nullptr), "ncclCommSplit (dup)")) {
    check_allreduce(w, dup, 1, n, "allreduce on duplicate");
    ok(w, ncclCommRevoke(dup, NCCL_REVOKE_DEFAULT), "ncclCommRevoke");
    Buf x(ncclFloat64, 1), y(ncclFloat64, 1);
    r = ncclAllReduce(x.dev(), y.dev(), 1, ncclFloat64, ncclSum, dup, w.stream);
    expect(w, r == ncclInvalidUsage, "allreduce after revoke returned %d", int(r));
    ok(w, ncclCommDestroy(dup), "ncclCommDestroy (revoked)");
  }
  // Abort of a healthy communicator; the world is unaffected. (The
  // allreduce first: an abort tells the other ranks, which must not still
  // be inside the split's init then.)
  if (ok(w, ncclCommSplit(w.comm, 0, me, &dup, nullptr), "ncclCommSplit (dup 2)")) {
    check_allreduce(w, dup, 1, n, "allreduce before abort");
    ok(w, ncclCommAbort(dup), "ncclCommAbort");
  }
  check_allreduce(w, w.comm, 1, n, "world allreduce after abort of a split");

  // Abort while a non-blocking init waits for a rank that never comes: it
  // returns at once.
  ncclUniqueId lone = shared_id(w, 4);
  if (me < n - 1) {
    ncclComm_t pending = nullptr;
    r = ncclCommInitRankConfig(&pending, n, lone, me, &nb);
    expect(w, r == ncclInProgress, "init without the last rank returned %d", int(r));
    ncclResult_t state = ncclSuccess;
    ok(w, ncclCommGetAsyncError(pending, &state), "ncclCommGetAsyncError (pending)");
    expect(w, state == ncclInProgress, "pending init reports %d", int(state));
    auto t0 = std::chrono::steady_clock::now();
    ok(w, ncclCommAbort(pending), "ncclCommAbort (pending init)");
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    expect(w, s < 5, "ncclCommAbort of a pending init took %.1f s", s);
  }
  check_allreduce(w, w.comm, 2, 2.0 * n, "world allreduce at the end");
  return 0;
}

int suite_errors(World& w) {
  const int n = w.nranks;
  int version = 0;
  if (ok(w, ncclGetVersion(&version), "ncclGetVersion"))
    expect(w, version == 22809 && version == NCCL_VERSION_CODE, "version %d", version);
  for (int a = 0; a < ncclNumResults; ++a) {
    const char* s = ncclGetErrorString(static_cast<ncclResult_t>(a));
    expect(w, s && *s && !contains(s, "unknown"), "no string for result %d", a);
    for (int b = 0; b < a; ++b)
      expect(w, std::strcmp(s, ncclGetErrorString(static_cast<ncclResult_t>(b))) != 0,
             "results %d and %d share a string", a, b);
  }
  expect(w, contains(ncclGetErrorString(ncclNumResults), "unknown"), "string for ncclNumResults");
  expect(w, contains(ncclGetErrorString(static_cast<ncclResult_t>(12345)), "unknown"),
         "string for 12345");

  float scalar[4] = {1, 2, 3, 4};
  Buf xb(ncclFloat32, 4), yb(ncclFloat32, 4);
  void *x = xb.dev(), *y = yb.dev();
  ncclRedOp_t fop = ncclSum;
  ok(w, ncclRedOpCreatePreMulSum(&fop, scalar, ncclFloat32, ncclScalarHostImmediate, w.comm),
     "premulsum op");
  auto check_msg = [&](ncclResult_t got, ncclResult_t want, const char* mentions,
                       const char* what) {
    expect(w, got == want, "%s: returned %d, want %d", what, int(got), int(want));
    expect(w, contains(ncclGetLastError(nullptr), mentions),
           "%s: last error '%s' does not mention '%s'", what, ncclGetLastError(nullptr), mentions);
  };
  check_msg(ncclAllReduce(x, y, 4, ncclFloat32, ncclSum, nullptr, nullptr), ncclInvalidArgument,
            "comm is NULL", "NULL comm");
  check_msg(ncclAllReduce(x, y, 4, static_cast<ncclDataType_t>(99), ncclSum, w.comm, nullptr),
            ncclInvalidArgument, "datatype", "datatype 99");
  expect(w, contains(ncclGetLastError(w.comm), "ncclAllReduce"), "comm's last error: %s",
         ncclGetLastError(w.comm));
  check_msg(ncclAllReduce(x, y, 4, ncclFloat32, static_cast<ncclRedOp_t>(77), w.comm, nullptr),
            ncclInvalidArgument, "op 77", "op 77");
  check_msg(ncclAllReduce(x, y, 4, ncclInt32, fop, w.comm, nullptr), ncclInvalidArgument,
            "datatype", "PreMulSum op of another datatype");
  check_msg(ncclBroadcast(x, y, 4, ncclFloat32, n, w.comm, nullptr), ncclInvalidArgument, "root",
            "root out of range");
  check_msg(ncclSend(x, 4, ncclFloat32, n + 3, w.comm, nullptr), ncclInvalidArgument, "peer",
            "peer out of range");
  check_msg(ncclAllReduce(nullptr, y, 4, ncclFloat32, ncclSum, w.comm, nullptr),
            ncclInvalidArgument, "sendbuff", "NULL sendbuff");
  check_msg(ncclRedOpDestroy(ncclSum, w.comm), ncclInvalidArgument, "built-in", "destroy ncclSum");
  check_msg(ncclRedOpCreatePreMulSum(&fop, scalar, static_cast<ncclDataType_t>(42),
                                     ncclScalarHostImmediate, w.comm),
            ncclInvalidArgument, "datatype", "premulsum of datatype 42");
  check_msg(ncclRedOpCreatePreMulSum(&fop, scalar, ncclFloat32,
                                     static_cast<ncclScalarResidence_t>(9), w.comm),
            ncclInvalidArgument, "residence", "premulsum residence 9");
  ok(w, ncclRedOpDestroy(fop, w.comm), "ncclRedOpDestroy");
  check_msg(ncclRedOpDestroy(fop, w.comm), ncclInvalidArgument, "live", "destroy it twice");
  check_msg(ncclGroupEnd(), ncclInvalidUsage, "ncclGroupStart", "ncclGroupEnd without start");

  // Bad configs and ids are refused before any communication.
  ncclUniqueId zero{};
  ncclComm_t c = nullptr;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.magic = 0x1234;
  check_msg(ncclCommInitRankConfig(&c, n, zero, w.rank, &cfg), ncclInvalidArgument, "magic",
            "bad magic");
  cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 7;
  check_msg(ncclCommInitRankConfig(&c, n, zero, w.rank, &cfg), ncclInvalidArgument, "blocking",
            "blocking 7");
  check_msg(ncclCommInitRank(&c, n, zero, w.rank), ncclInvalidArgument, "unique id", "zero id");
  check_msg(ncclCommInitRank(&c, n, zero, n), ncclInvalidArgument, "rank", "rank out of range");
  expect(w, c == nullptr, "failed init left a communicator");
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  sim.magic = 1;
  ok(w, ncclGroupStart(), "ncclGroupStart");
  check_msg(ncclGroupSimulateEnd(&sim), ncclInvalidArgument, "NCCL_SIM_INFO_INITIALIZER",
            "bad simInfo");
  ok(w, ncclGroupEnd(), "ncclGroupEnd (after a refused simulate)");

  // A bad call inside a group fails at once; the rest of the group runs.
  Buf one(ncclFloat32, 1), sum(ncclFloat32, 1);
  store(ncclFloat32, one.host(), 0, 1.0);
  one.put();
  ok(w, ncclGroupStart(), "ncclGroupStart");
  expect(w,
         ncclAllReduce(x, y, 4, static_cast<ncclDataType_t>(-1), ncclSum, w.comm, w.stream) ==
             ncclInvalidArgument,
         "bad grouped call accepted");
  ok(w, ncclAllReduce(one.dev(), sum.dev(), 1, ncclFloat32, ncclSum, w.comm, w.stream),
     "good grouped call");
  ok(w, ncclGroupEnd(), "ncclGroupEnd");
  finish(w, "grouped allreduce after a refused call");
  sum.get();
  expect(w, load(ncclFloat32, sum.host(), 0) == n, "grouped allreduce after a refused call gave %g",
         load(ncclFloat32, sum.host(), 0));
  // The communicator stays usable after argument errors.
  check_allreduce(w, w.comm, 1, n, "allreduce after argument errors");
  return 0;
}

// The last rank dies (exits without a word); the others shrink it away
// after their communicator failed for it (GPUs: the peer watch; host
// buffers: a collective).
int suite_shrink(World& w) {
  const int n = w.nranks, me = w.rank;
  if (n < 3) return 0;
  int excluded = n - 1;
  ncclComm_t nc = nullptr;
  check_allreduce(w, w.comm, 1, n, "world allreduce before a rank dies");  // every init is done
  if (me == excluded) {
    std::fflush(stderr);
    _exit(failures() ? 1 : 0);  // a rank that died
  }
  if (mem() == Mem::Cuda) {
    // A GPU communicator watches the other processes: the death fails it
    // (every survivor hears within seconds), and the shrink comes after.
    ncclResult_t state = ncclSuccess;
    for (int i = 0; i < 1000 && state == ncclSuccess; ++i) {
      ncclCommGetAsyncError(w.comm, &state);
      if (state == ncclSuccess) usleep(10000);
    }
    expect(w, state == ncclRemoteError, "world communicator after rank %d died: state %d", excluded,
           int(state));
  } else {
    // On host buffers the death shows in the next collective, which fails
    // the communicator (and its bootstrap) the same way.
    Buf v(ncclFloat64, 1), out(ncclFloat64, 1);
    store(ncclFloat64, v.host(), 0, 1.0);
    v.put();
    const ncclResult_t e =
        ncclAllReduce(v.dev(), out.dev(), 1, ncclFloat64, ncclSum, w.comm, w.stream);
    expect(w, e == ncclRemoteError, "world allreduce after rank %d died returned %d", excluded,
           int(e));
  }
  int self = me;
  expect(w,
         ncclCommShrink(w.comm, &self, 1, &nc, nullptr, NCCL_SHRINK_DEFAULT) == ncclInvalidArgument,
         "a rank excluding itself was accepted");
  if (ok(w, ncclCommShrink(w.comm, &excluded, 1, &nc, nullptr, NCCL_SHRINK_ABORT),
         "ncclCommShrink")) {
    int v = -1;
    ok(w, ncclCommCount(nc, &v), "ncclCommCount (shrunk)");
    expect(w, v == n - 1, "shrunk size %d", v);
    ok(w, ncclCommUserRank(nc, &v), "ncclCommUserRank (shrunk)");
    expect(w, v == me, "shrunk rank %d, want %d", v, me);
    check_allreduce(w, nc, me, (n - 1) * (n - 2) / 2.0, "allreduce on shrunk communicator");
    ok(w, ncclCommDestroy(nc), "ncclCommDestroy (shrunk)");
  }
  ok(w, ncclCommAbort(w.comm), "ncclCommAbort (world with a dead rank)");
  w.comm = nullptr;
  return 0;
}

int suite_env(World& w) {
  const char* dir = std::getenv("NTEST_TMPDIR");
  if (!expect(w, dir != nullptr, "NTEST_TMPDIR unset")) return 1;
  for (const char* v : {"MYCOLL_DEBUG", "MYCOLL_DEBUG_FILE", "MYCOLL_ALGO"}) unsetenv(v);
  const std::string log_pattern = std::string(dir) + "/nccl.%p.log";
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_FILE", log_pattern.c_str(), 1);
  setenv("NCCL_ALGO", "Tree", 1);
  setenv("NCCL_DEBUG_SUBSYS", "ALL", 1);  // per-call lines (COLL) are off by default
  setenv("NCCL_SOCKET_IFNAME", "bogus0", 1);
  setenv("MYCOLL_SOCKET_IFNAME", "lo", 1);
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  setenv("NCCL_MADE_UP_SETTING", "1", 1);
  ncclUniqueId id = shared_id(w, 0);
  if (!ok(w, ncclCommInitRank(&w.comm, w.nranks, id, w.rank), "ncclCommInitRank (env)")) return 1;
  const size_t elems = 4096;
  Buf a(ncclFloat32, elems), b(ncclFloat32, elems);
  for (size_t i = 0; i < elems; ++i) store(ncclFloat32, a.host(), i, 1.0);
  a.put();
  if (ok(w, ncclAllReduce(a.dev(), b.dev(), elems, ncclFloat32, ncclSum, w.comm, w.stream),
         "allreduce") &&
      finish(w, "allreduce")) {
    b.get();
    check_elems(w, ncclFloat32, b.host(), 0, elems, std::vector<double>(elems, w.nranks),
                "allreduce (env)");
  }
  ok(w, ncclCommDestroy(w.comm), "ncclCommDestroy (env)");
  w.comm = nullptr;
  const std::string log = read_own_log(w, dir, "nccl");
  if (log.empty()) return 1;
  auto count = [&](const std::string& s) { return occurrences(log, s); };
  const char* once[] = {
      "NCCL API 2.28.9 served by mycoll",
      "NCCL_ALGO=Tree -> MYCOLL_ALGO=tree",
      "NCCL_DEBUG=INFO -> MYCOLL_DEBUG=INFO",
      "NCCL_SOCKET_IFNAME=bogus0 not applied: MYCOLL_SOCKET_IFNAME=lo is set and wins",
      "NCCL_NVLS_ENABLE=0 ignored",
      "NCCL_MADE_UP_SETTING=1 ignored"};
  for (const char* s : once)
    expect(w, count(s) == 1, "log has '%s' %zu times (want once)", s, count(s));
  expect(w, count("algo tree") >= 1, "the allreduce did not run the tree algorithm (NCCL_ALGO)");
  return 0;
}

}  // namespace ntest
