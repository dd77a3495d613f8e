// Settings every rank must share (MYCOLL_ALGO, and between GPU ranks the
// MYCOLL_GPU_* shapes of the inbox and the kernel choice, MYCOLL_PROTO):
// one rank that differs fails the init on every rank with
// ncclInvalidUsage naming the variable and both values, never a hang or a
// peer writing past another's inbox; spellings that mean the same agree;
// on host buffers the GPU settings are free to differ; GPU ranks and a
// host-memory rank are refused together; and after every
// refused init a communicator built with alike settings computes right.
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "harness.h"
#include "suites.h"

namespace ntest {
namespace {

bool contains(const char* s, const std::string& part) {
  return s && std::strstr(s, part.c_str()) != nullptr;
}

// An all-reduce of an odd count on comm, every element checked.
void checked_allreduce(World& w, ncclComm_t comm, const char* what, int seed) {
  const ncclDataType_t t = ncclFloat32;
  const size_t count = 70001;
  Buf in(t, count), out(t, count);
  for (size_t i = 0; i < count; ++i) store(t, in.host(), i, input(t, ncclSum, w.rank, i, seed));
  in.put();
  if (ok(w, ncclAllReduce(in.dev(), out.dev(), count, t, ncclSum, comm, w.stream), what) &&
      finish(w, what, comm)) {
    out.get();
    std::vector<double> want(count);
    for (size_t i = 0; i < count; ++i) want[i] = reference(t, ncclSum, w.nranks, i, seed);
    check_elems(w, t, out.host(), 0, count, want, what);
  }
}

// Init with `var` set to `value` on rank `odd` only (var null: the
// environment is set already; MYCOLL_ALGO is cleared after). refused: every rank's
// init must fail with ncclInvalidUsage whose message names `names` and
// this rank's and the other's value (mine / theirs as seen from rank odd);
// else it must work and compute right.
void one_differs(World& w, int slot, const char* var, const char* value, int odd, bool refused,
                 const std::string& names, const std::string& odd_has,
                 const std::string& others_have) {
  if (var && w.rank == odd) setenv(var, value, 1);
  ncclComm_t c = nullptr;
  const ncclResult_t got = ncclCommInitRank(&c, w.nranks, shared_id(w, slot), w.rank);
  unsetenv(var ? var : "MYCOLL_ALGO");
  char what[160];
  std::snprintf(what, sizeof(what), "%s=%s on rank %d only", var ? var : "(set before)", value,
                odd);
  if (!refused) {
    if (ok(w, got, what)) {
      checked_allreduce(w, c, what, slot);
      ok(w, ncclCommDestroy(c), "ncclCommDestroy");
    }
    return;
  }
  expect(w, got == ncclInvalidUsage, "%s: init returned %d, want %d (ncclInvalidUsage)", what,
         int(got), int(ncclInvalidUsage));
  expect(w, c == nullptr, "%s: a refused init left a communicator", what);
  const std::string here = w.rank == odd ? odd_has : others_have;
  const std::string there = w.rank == odd ? others_have : odd_has;
  const std::string want = names + " differs between ranks: this rank has " + here + ", rank ";
  const char* last = ncclGetLastError(nullptr);
  expect(w, contains(last, want) && contains(last, " has " + there + ";"),
         "%s: last error '%s' does not say '%s... has %s;'", what, last ? last : "(null)",
         want.c_str(), there.c_str());
}

}  // namespace

int suite_agree(World& w) {
  for (const char* v :
       {"MYCOLL_ALGO", "NCCL_ALGO", "MYCOLL_PROTO", "NCCL_PROTO", "MYCOLL_GPU_SLOTS",
        "MYCOLL_GPU_CALL_CHECK", "MYCOLL_CHUNK_BYTES", "MYCOLL_SHM_READ_SPEED_CHECK"})
    unsetenv(v);
  const bool gpu = mem() == Mem::Cuda;
  const int last = w.nranks - 1;
  int slot = 0;
  // The algorithm, on every kind of communicator: NCCL_ALGO on the last
  // rank (translated to MYCOLL_ALGO at this process's first nccl* call, so
  // set before it), then MYCOLL_ALGO on rank 0.
  if (w.rank == last) setenv("NCCL_ALGO", "Tree", 1);
  const char* algo = "MYCOLL_ALGO (NCCL_ALGO sets it through libnccl.so.2)";
  one_differs(w, slot++, nullptr, "NCCL_ALGO=Tree", last, true, algo, "'tree'", "'auto'");
  unsetenv("NCCL_ALGO");
  one_differs(w, slot++, "MYCOLL_ALGO", "ring", 0, true, algo, "'ring'", "'auto'");
  one_differs(w, slot++, "MYCOLL_CHUNK_BYTES", "64K", last, true, "MYCOLL_CHUNK_BYTES", "65536",
              "524288");
  // Whether a host's shm single copy follows its process_vm_readv speed.
  one_differs(w, slot++, "MYCOLL_SHM_READ_SPEED_CHECK", "0", 0, true, "MYCOLL_SHM_READ_SPEED_CHECK",
              "0", "1");
  // The FIFO geometry and the protocol: GPU communicators only.
  one_differs(w, slot++, "MYCOLL_GPU_SLOTS", "8", 0, gpu, "MYCOLL_GPU_SLOTS", "8", "16");
  one_differs(w, slot++, "MYCOLL_PROTO", "simple", last, gpu,
              "MYCOLL_GPU_LL_BYTES (or MYCOLL_PROTO)", "0", "16384");
  one_differs(w, slot++, "MYCOLL_GPU_CALL_CHECK", "strict", 0, gpu, "MYCOLL_GPU_CALL_CHECK",
              "strict", "1");
  // Spellings of the same choice agree: "Ring" on rank 0, "ring" elsewhere;
  // "auto" on one rank, unset on the others.
  setenv("MYCOLL_ALGO", w.rank == 0 ? "Ring" : "ring", 1);
  one_differs(w, slot++, "MYCOLL_CHUNK_BYTES", "512K", 0, false, "", "", "");
  unsetenv("MYCOLL_ALGO");
  one_differs(w, slot++, "MYCOLL_ALGO", "auto", last, false, "", "", "");
  // Ranks on GPUs and a rank on host memory (MYCOLL_HOST_COMM=1 on rank 0
  // only) in one communicator: refused on every rank.
  if (gpu) {
    if (w.rank == 0) setenv("MYCOLL_HOST_COMM", "1", 1);
    ncclComm_t mixed = nullptr;
    const ncclResult_t got = ncclCommInitRank(&mixed, w.nranks, shared_id(w, slot++), w.rank);
    unsetenv("MYCOLL_HOST_COMM");
    const std::string want = w.rank == 0 ? "this rank uses host memory and rank 1 a GPU"
                                         : "this rank drives a GPU and rank 0 host memory";
    expect(w, got == ncclInvalidUsage, "GPU and host ranks: init returned %d, want %d", int(got),
           int(ncclInvalidUsage));
    expect(w, contains(ncclGetLastError(nullptr), want), "GPU and host ranks: last error '%s'",
           ncclGetLastError(nullptr));
    if (mixed) ncclCommDestroy(mixed);  // accepted against the expectation above
  }
  // Nothing was left behind: alike settings work.
  ncclComm_t c = nullptr;
  if (ok(w, ncclCommInitRank(&c, w.nranks, shared_id(w, slot++), w.rank), "init, alike")) {
    checked_allreduce(w, c, "allreduce, alike", 99);
    ok(w, ncclCommDestroy(c), "ncclCommDestroy");
  }
  return 0;
}

}  // namespace ntest
