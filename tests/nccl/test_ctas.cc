// ncclConfig_t.maxCTAs / minCTAs and NCCL_MAX_CTAS: bad values refused at
// init, a capped communicator (and its split child) running every
// collective correctly, large messages included, ranks asking for different
// caps agreeing on the smallest, and the log naming the cap; on host
// buffers the cap is accepted and said to have no effect.
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "harness.h"
#include "suites.h"

namespace ntest {
namespace {

bool contains(const char* s, const char* part) { return s && std::strstr(s, part) != nullptr; }

// Large calls of every kind on comm (megabytes: every channel a kernel may
// have is used unless something caps them), each output checked element by
// element against values computed here.
void large_calls(World& w, ncclComm_t comm, const char* tag, int seed) {
  const int n = w.nranks, r = w.rank;
  char what[128];
  auto name = [&](const char* call) {
    std::snprintf(what, sizeof(what), "%s (%s)", call, tag);
    return what;
  };
  {  // all-reduce, float32 sum, in place
    const ncclDataType_t t = ncclFloat32;
    const size_t count = (size_t(1) << 20) + 3;
    Buf buf(t, count);
    for (size_t i = 0; i < count; ++i) store(t, buf.host(), i, input(t, ncclSum, r, i, seed));
    buf.put();
    if (ok(w, ncclAllReduce(buf.dev(), buf.dev(), count, t, ncclSum, comm, w.stream),
           name("allreduce")) &&
        finish(w, what, comm)) {
      buf.get();
      std::vector<double> want(count);
      for (size_t i = 0; i < count; ++i) want[i] = reference(t, ncclSum, n, i, seed);
      check_elems(w, t, buf.host(), 0, count, want, what);
    }
  }
  {  // reduce, int32 max, out of place, root 1 % n
    const ncclDataType_t t = ncclInt32;
    const size_t count = (size_t(1) << 20) + 5;
    const int root = 1 % n;
    Buf in(t, count), out(t, count);
    for (size_t i = 0; i < count; ++i) store(t, in.host(), i, input(t, ncclMax, r, i, seed + 1));
    in.put();
    if (ok(w, ncclReduce(in.dev(), out.dev(), count, t, ncclMax, root, comm, w.stream),
           name("reduce")) &&
        finish(w, what, comm) && r == root) {
      out.get();
      std::vector<double> want(count);
      for (size_t i = 0; i < count; ++i) want[i] = reference(t, ncclMax, n, i, seed + 1);
      check_elems(w, t, out.host(), 0, count, want, what);
    }
  }
  {  // broadcast, bfloat16, root n - 1
    const ncclDataType_t t = ncclBfloat16;
    const size_t count = (size_t(1) << 21) + 7;
    const int root = n - 1;
    Buf buf(t, count);
    if (r == root)
      for (size_t i = 0; i < count; ++i) store(t, buf.host(), i, tag_value(t, root, i, seed));
    buf.put();
    if (ok(w, ncclBroadcast(buf.dev(), buf.dev(), count, t, root, comm, w.stream),
           name("broadcast")) &&
        finish(w, what, comm)) {
      buf.get();
      std::vector<double> want(count);
      for (size_t i = 0; i < count; ++i) want[i] = tag_value(t, root, i, seed);
      check_elems(w, t, buf.host(), 0, count, want, what);
    }
  }
  {  // all-gather and reduce-scatter, float32
    const ncclDataType_t t = ncclFloat32;
    const size_t count = (size_t(1) << 18) + 5;
    Buf mine(t, count), all(t, count * n);
    for (size_t i = 0; i < count; ++i) store(t, mine.host(), i, tag_value(t, r, i, seed));
    mine.put();
    if (ok(w, ncclAllGather(mine.dev(), all.dev(), count, t, comm, w.stream), name("allgather")) &&
        finish(w, what, comm)) {
      all.get();
      std::vector<double> want(count * n);
      for (int p = 0; p < n; ++p)
        for (size_t i = 0; i < count; ++i) want[p * count + i] = tag_value(t, p, i, seed);
      check_elems(w, t, all.host(), 0, count * n, want, what);
    }
    Buf in(t, count * n), out(t, count);
    for (size_t i = 0; i < count * n; ++i)
      store(t, in.host(), i, input(t, ncclSum, r, i, seed + 2));
    in.put();
    if (ok(w, ncclReduceScatter(in.dev(), out.dev(), count, t, ncclSum, comm, w.stream),
           name("reducescatter")) &&
        finish(w, what, comm)) {
      out.get();
      std::vector<double> want(count);
      for (size_t i = 0; i < count; ++i)
        want[i] = reference(t, ncclSum, n, r * count + i, seed + 2);
      check_elems(w, t, out.host(), 0, count, want, what);
    }
  }
  {  // all-to-all, int32
    const ncclDataType_t t = ncclInt32;
    const size_t count = (size_t(1) << 16) + 7;
    Buf send(t, count * n), recv(t, count * n);
    for (size_t j = 0; j < count * n; ++j) store(t, send.host(), j, tag_value(t, r, j, seed));
    send.put();
    if (ok(w, ncclAlltoAll(send.dev(), recv.dev(), count, t, comm, w.stream), name("alltoall")) &&
        finish(w, what, comm)) {
      recv.get();
      std::vector<double> want(count * n);
      for (int p = 0; p < n; ++p)
        for (size_t i = 0; i < count; ++i)
          want[p * count + i] = tag_value(t, p, r * count + i, seed);
      check_elems(w, t, recv.host(), 0, count * n, want, what);
    }
  }
  {  // send/recv around the ring, uint8, in one group
    const ncclDataType_t t = ncclUint8;
    const size_t count = (size_t(1) << 22) + 1;
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    Buf out(t, count), in(t, count);
    for (size_t i = 0; i < count; ++i) store(t, out.host(), i, tag_value(t, r, i, seed));
    out.put();
    ok(w, ncclGroupStart(), "ncclGroupStart");
    ok(w, ncclSend(out.dev(), count, t, next, comm, w.stream), name("send"));
    ok(w, ncclRecv(in.dev(), count, t, prev, comm, w.stream), name("recv"));
    if (ok(w, ncclGroupEnd(), name("ring send/recv")) && finish(w, what, comm)) {
      in.get();
      std::vector<double> want(count);
      for (size_t i = 0; i < count; ++i) want[i] = tag_value(t, prev, i, seed);
      check_elems(w, t, in.host(), 0, count, want, what);
    }
  }
}

}  // namespace

int suite_ctas(World& w) {
  const char* dir = std::getenv("NTEST_TMPDIR");
  if (!expect(w, dir != nullptr, "NTEST_TMPDIR unset")) return 1;
  // Before this process's first nccl* call (shared_id's on rank 0).
  for (const char* v : {"MYCOLL_DEBUG", "MYCOLL_DEBUG_FILE", "MYCOLL_NCHANNELS"}) unsetenv(v);
  const std::string log_pattern = std::string(dir) + "/ctas.%p.log";
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_FILE", log_pattern.c_str(), 1);
  setenv("NCCL_MAX_CTAS", "5", 1);
  setenv("NCCL_MIN_NCHANNELS", "2", 1);

  // Bad values are refused before any communication.
  auto refused = [&](int min_ctas, int max_ctas, const char* mentions) {
    ncclUniqueId zero{};
    ncclComm_t c = nullptr;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.minCTAs = min_ctas;
    cfg.maxCTAs = max_ctas;
    const ncclResult_t got = ncclCommInitRankConfig(&c, w.nranks, zero, w.rank, &cfg);
    expect(w, got == ncclInvalidArgument, "minCTAs %d maxCTAs %d: returned %d, want %d", min_ctas,
           max_ctas, int(got), int(ncclInvalidArgument));
    expect(w, contains(ncclGetLastError(nullptr), mentions),
           "minCTAs %d maxCTAs %d: last error '%s' does not mention '%s'", min_ctas, max_ctas,
           ncclGetLastError(nullptr), mentions);
    expect(w, c == nullptr, "a refused config left a communicator");
  };
  const int undef = NCCL_CONFIG_UNDEF_INT;
  refused(undef, 0, "maxCTAs is 0");
  refused(-3, undef, "minCTAs is -3");
  refused(8, 4, "minCTAs 8 is above config->maxCTAs 4");

  // A communicator capped at one block (two where the call check runs),
  // every collective of the suite on it, then large calls on it and on a
  // child split without a config (which inherits the cap).
  ncclConfig_t one = NCCL_CONFIG_INITIALIZER;
  one.minCTAs = 1;
  one.maxCTAs = 1;
  ncclComm_t capped = nullptr;
  if (!ok(w, ncclCommInitRankConfig(&capped, w.nranks, shared_id(w, 0), w.rank, &one),
          "ncclCommInitRankConfig (maxCTAs 1)"))
    return 1;
  w.comm = capped;
  suite_colls(w);
  large_calls(w, capped, "maxCTAs 1", 11);
  ncclComm_t child = nullptr;
  if (ok(w, ncclCommSplit(capped, 0, w.nranks - w.rank, &child, nullptr),
         "ncclCommSplit (maxCTAs 1, no config)")) {
    World cw = w;
    cw.comm = child;
    cw.rank = w.nranks - 1 - w.rank;
    large_calls(cw, child, "split child of maxCTAs 1", 12);
    ok(w, ncclCommDestroy(child), "ncclCommDestroy (child)");
  }
  ok(w, ncclCommDestroy(capped), "ncclCommDestroy (maxCTAs 1)");
  w.comm = nullptr;

  // No maxCTAs: NCCL_MAX_CTAS=5 caps it.
  ncclComm_t env_capped = nullptr;
  if (ok(w, ncclCommInitRank(&env_capped, w.nranks, shared_id(w, 1), w.rank),
         "ncclCommInitRank (NCCL_MAX_CTAS=5)")) {
    large_calls(w, env_capped, "NCCL_MAX_CTAS=5", 13);
    ok(w, ncclCommDestroy(env_capped), "ncclCommDestroy (NCCL_MAX_CTAS=5)");
  }

  // Ranks asking for different caps and channel counts (rank 0: maxCTAs 3
  // and MYCOLL_NCHANNELS=48; the others: maxCTAs 9, which NCCL_MAX_CTAS=5
  // lowers, and 64 channels) all take the smallest: their FIFOs and grids
  // must agree, or the large calls below hang or go wrong.
  ncclConfig_t mixed = NCCL_CONFIG_INITIALIZER;
  mixed.maxCTAs = w.rank == 0 ? 3 : 9;
  if (w.rank == 0) setenv("MYCOLL_NCHANNELS", "48", 1);
  ncclComm_t uneven = nullptr;
  if (ok(w, ncclCommInitRankConfig(&uneven, w.nranks, shared_id(w, 2), w.rank, &mixed),
         "ncclCommInitRankConfig (maxCTAs 3 on rank 0, 9 elsewhere)")) {
    large_calls(w, uneven, "maxCTAs 3 on rank 0, 9 elsewhere", 14);
    ok(w, ncclCommDestroy(uneven), "ncclCommDestroy (uneven caps)");
  }
  unsetenv("MYCOLL_NCHANNELS");

  const std::string log = read_own_log(w, dir, "ctas");
  if (log.empty()) return 1;
  auto at_least = [&](const std::string& s, size_t times) {
    const size_t n = occurrences(log, s);
    expect(w, n >= times, "log has '%s' %zu times (want at least %zu)", s.c_str(), n, times);
  };
  at_least("NCCL_MAX_CTAS=5: every communicator's GPU kernels run at most 5 thread blocks", 1);
  at_least("NCCL_MIN_NCHANNELS=2 ignored", 1);
  at_least("minCTAs=1 (no channel floor", 1);
  auto capped_at = [](int blocks, int asked) {
    return "at most " + std::to_string(blocks) +
           " thread blocks per kernel (ncclConfig_t.maxCTAs, NCCL_MAX_CTAS or "
           "NCCL_MAX_NCHANNELS asked for " +
           std::to_string(asked) + ";";
  };
  if (mem() == Mem::Cuda) {
    // The capped communicator and its child, the one NCCL_MAX_CTAS capped,
    // the one whose ranks asked for different caps.
    at_least(capped_at(2, 1), 2);
    at_least(capped_at(5, 5), 1);
    at_least(capped_at(3, 3), 1);
    if (w.rank != 0)
      at_least(
          "MYCOLL_NCHANNELS differs between ranks (this rank 64, rank 0 48): every rank "
          "uses 48",
          1);
  } else {
    at_least("a cap of 1 thread blocks per kernel", 2);
    at_least("a cap of 5 thread blocks per kernel", w.rank == 0 ? 1 : 2);
    if (w.rank == 0) at_least("a cap of 3 thread blocks per kernel", 1);
  }
  return 0;
}

}  // namespace ntest
