// A seeded random sequence of calls, the same on every rank: each step one
// call, or a group of two or three (collectives and send/recv pairs mixed),
// each of a random collective, data type, reduction, root and in-place
// choice, with counts drawn over every size class the library switches on
// (a few elements; just below, at and above 16 KiB, 64 KiB, 256 KiB, 1, 2,
// 4 and 8 MiB; odd counts). Every output element is checked against
// harness.cc's references, and the inputs of out-of-place calls against
// what was put there. What the fixed suites do not reach: large odd counts
// in every dtype and op (test_colls.cc stops at 1031 elements, the large
// calls of test_ctas.cc and test_initall.cc take a few dtypes each), and one
// call's kind after another's on the same communicator and stream.
//   NTEST_SOAK_STEPS (default 24 on host memory, 120 on GPU memory),
//   NTEST_SOAK_SEED (default 1), NTEST_SOAK_MAX_BYTES (largest buffer;
//   default 4 MiB on host memory, 40 MiB on GPU memory).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "harness.h"
#include "harness_cuda.h"
#include "suites.h"

namespace ntest {
namespace {

// splitmix64: the same numbers on every rank from the same seed.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return n ? static_cast<size_t>(next() % n) : 0; }

 private:
  uint64_t s_;
};

size_t env_size(const char* name, size_t fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  return static_cast<size_t>(std::strtoull(v, nullptr, 10));
}

enum Kind {
  AllReduce,
  Reduce,
  Broadcast,
  AllGather,
  ReduceScatter,
  AllToAll,
  Gather,
  Scatter,
  SendRecv,
  kKinds
};
const char* kind_name(int k) {
  static const char* names[] = {"allreduce", "reduce", "broadcast", "allgather", "reducescatter",
                                "alltoall",  "gather", "scatter",   "sendrecv"};
  return names[k];
}
bool reduces(int k) { return k == AllReduce || k == Reduce || k == ReduceScatter; }
// The buffer of n blocks of count elements (the rest hold count).
bool blocked(int k) {
  return k == AllGather || k == ReduceScatter || k == AllToAll || k == Gather || k == Scatter;
}

constexpr int kPreMulOp = ncclNumOps;  // our marker for PreMulSum (host scalar)

// Element count of the call: its size class drawn first, so the classes
// near every threshold get as many calls as the tiny ones. `per` is what
// one count element costs in the largest buffer (n for blocked kinds).
size_t draw_count(Rng& rng, ncclDataType_t t, size_t per, size_t max_bytes) {
  const size_t es = type_size(t);
  const size_t max_count = std::max<size_t>(1, max_bytes / (es * per));
  static const size_t edges[] = {16 << 10, 64 << 10, 256 << 10, 1 << 20,
                                 2 << 20,  4 << 20,  8 << 20,   32 << 20};
  size_t c = 1;
  switch (rng.below(4)) {
    case 0: c = 1 + rng.below(40); break;     // a few elements
    case 1: c = 41 + rng.below(6000); break;  // small
    case 2: {                                 // around a size the library switches on
      const size_t edge = edges[rng.below(sizeof(edges) / sizeof(edges[0]))] / (es * per);
      c = edge + rng.below(5);
      c = c > 2 ? c - 2 : 1;
      break;
    }
    default: {  // anywhere up to the largest, log-uniform
      size_t hi = 6000;
      while (hi < max_count && rng.below(3) != 0) hi *= 4;
      c = 1 + rng.below(std::min(hi, max_count));
      break;
    }
  }
  if (c > max_count) c = max_count | 1;
  if (c > max_count) c = max_count;
  return c;
}

// What draw() chooses for a call, the same on every rank.
struct Choice {
  int kind = AllReduce;
  ncclDataType_t t = ncclFloat32;
  int op = ncclSum;  // ncclRedOp_t value, or kPreMulOp
  size_t count = 0;
  int root = 0;
  int shift = 0;  // send/recv: to rank + shift, from rank - shift
  bool inplace = false;
  int seed = 0;
  char what[160] = {};
};

// A rank's call: the choice, its buffers and reduction.
struct Call : Choice {
  std::unique_ptr<Buf> a, b;  // a: input side, b: output side (layout per kind below)
  std::vector<double> in;     // what this rank put in its input (checked after out of place)
  ncclRedOp_t red = ncclSum;
  bool created = false;
};

void draw(Rng& rng, const World& w, Call& c, int seed, size_t max_bytes) {
  const int n = w.nranks;
  c.kind = static_cast<int>(rng.below(kKinds));
  c.t = kAllTypes[rng.below(12)];
  static const int ops[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg, kPreMulOp};
  c.op = reduces(c.kind) ? ops[rng.below(6)] : ncclSum;
  c.count = draw_count(rng, c.t, blocked(c.kind) ? n : 1, max_bytes);
  c.root = static_cast<int>(rng.below(n));
  c.shift = static_cast<int>(rng.below(n));
  c.inplace = rng.below(2) == 1;
  c.seed = seed;
  static const char* op_names[] = {"sum", "prod", "max", "min", "avg", "premulsum"};
  std::snprintf(c.what, sizeof(c.what), "soak seed %d: %s %s %s count %zu root %d shift %d %s",
                seed, kind_name(c.kind), type_name(c.t), reduces(c.kind) ? op_names[c.op] : "-",
                c.count, c.root, c.shift, c.inplace ? "in-place" : "out-of-place");
}

ncclRedOp_t input_op(const Call& c) {
  return c.op == kPreMulOp ? ncclSum : static_cast<ncclRedOp_t>(c.op);
}
int ref_op(const Call& c) { return c.op == kPreMulOp ? kPreMul : c.op; }

// Fills the buffers and puts them on the device.
void prepare(World& w, Call& c) {
  const int n = w.nranks, r = w.rank;
  const size_t k = c.count, own = static_cast<size_t>(r) * k;
  const ncclDataType_t t = c.t;
  auto bufs = [&](size_t na, size_t nb) {
    c.a = std::make_unique<Buf>(t, na);
    c.b = std::make_unique<Buf>(t, nb);
  };
  auto inputs = [&](size_t m) {  // the reductions' operands
    c.in.resize(m);
    for (size_t i = 0; i < m; ++i) c.in[i] = input(t, input_op(c), r, i, c.seed);
  };
  auto tags = [&](size_t m) {  // values naming (rank, index)
    c.in.resize(m);
    for (size_t i = 0; i < m; ++i) c.in[i] = tag_value(t, r, i, c.seed);
  };
  Buf* src = nullptr;  // where c.in goes (none: this rank sends nothing)
  switch (c.kind) {
    case AllReduce:
    case Reduce:
      bufs(k, k);
      inputs(k);
      src = c.a.get();
      break;
    case ReduceScatter:
      bufs(k * n, k);
      inputs(k * n);
      src = c.a.get();
      break;
    case Broadcast:
      bufs(k, k);
      if (r == c.root) {
        tags(k);
        src = c.inplace ? c.b.get() : c.a.get();
      }
      break;
    case AllGather:
    case Gather:
      bufs(k, k * n);
      tags(k);
      src = c.a.get();
      if (c.inplace && (c.kind == AllGather || r == c.root)) fill(t, c.b->host(), own, c.in);
      break;
    case AllToAll:
    case Scatter:
      bufs(k * n, c.kind == AllToAll ? k * n : k);
      if (c.kind == AllToAll || r == c.root) {
        tags(k * n);
        src = c.a.get();
      }
      break;
    case SendRecv:
      bufs(k, k);
      tags(k);
      src = c.a.get();
      break;
  }
  if (src) fill(t, src->host(), 0, c.in);
  c.a->put();
  c.b->put();
  if (reduces(c.kind) && c.op == kPreMulOp) {
    char scalar[8] = {};
    store(t, scalar, 0, premul_scalar(t));
    c.created =
        ok(w, ncclRedOpCreatePreMulSum(&c.red, scalar, t, ncclScalarHostImmediate, w.comm), c.what);
    store(t, scalar, 0, 7.0);  // a library that read it late gives wrong sums
  } else {
    c.red = input_op(c);
  }
}

// Issues the call (inside a group when grouped); false when it was refused.
bool issue(World& w, Call& c) {
  const int n = w.nranks, r = w.rank;
  const size_t k = c.count, own = static_cast<size_t>(r) * k;
  const bool is_root = r == c.root;
  Buf& a = *c.a;
  Buf& b = *c.b;
  if (reduces(c.kind) && c.op == kPreMulOp && !c.created) return false;
  ncclResult_t res = ncclSuccess;
  switch (c.kind) {
    case AllReduce:
      res = ncclAllReduce(a.dev(), c.inplace ? a.dev() : b.dev(), k, c.t, c.red, w.comm, w.stream);
      break;
    case Reduce:
      res = ncclReduce(a.dev(), c.inplace ? a.dev() : b.dev(), k, c.t, c.red, c.root, w.comm,
                       w.stream);
      break;
    case ReduceScatter:
      res = ncclReduceScatter(a.dev(), c.inplace ? a.dev(own) : b.dev(), k, c.t, c.red, w.comm,
                              w.stream);
      break;
    case Broadcast:
      res = ncclBroadcast(c.inplace ? b.dev() : a.dev(), b.dev(), k, c.t, c.root, w.comm, w.stream);
      break;
    case AllGather:
      res = ncclAllGather(c.inplace ? b.dev(own) : a.dev(), b.dev(), k, c.t, w.comm, w.stream);
      break;
    case Gather:
      res = ncclGather(c.inplace && is_root ? b.dev(own) : a.dev(), is_root ? b.dev() : nullptr, k,
                       c.t, c.root, w.comm, w.stream);
      break;
    case AllToAll:
      res = ncclAlltoAll(a.dev(), c.inplace ? a.dev() : b.dev(), k, c.t, w.comm, w.stream);
      break;
    case Scatter:
      res = ncclScatter(is_root ? a.dev() : nullptr,
                        c.inplace && is_root ? a.dev(static_cast<size_t>(c.root) * k) : b.dev(), k,
                        c.t, c.root, w.comm, w.stream);
      break;
    case SendRecv: {
      const int to = (r + c.shift) % n, from = (r + n - c.shift) % n;
      // Alone it needs a group of its own; inside a larger group it is part of that one.
      ncclResult_t g = ncclGroupStart();
      if (g == ncclSuccess) g = ncclSend(a.dev(), k, c.t, to, w.comm, w.stream);
      if (g == ncclSuccess) g = ncclRecv(b.dev(), k, c.t, from, w.comm, w.stream);
      const ncclResult_t e = ncclGroupEnd();
      res = g != ncclSuccess ? g : e;
      break;
    }
  }
  return ok(w, res, c.what);
}

void check(World& w, Call& c) {
  const int n = w.nranks, r = w.rank;
  const size_t k = c.count, own = static_cast<size_t>(r) * k;
  const ncclDataType_t t = c.t;
  const bool is_root = r == c.root;
  c.a->get();
  c.b->get();
  char where[200];
  auto input_kept = [&](const void* buf, const char* part) {
    std::snprintf(where, sizeof(where), "%s: %s", c.what, part);
    check_elems(w, t, buf, 0, c.in.size(), c.in, where);
  };
  std::vector<double> want;
  switch (c.kind) {
    case AllReduce:
    case Reduce:
      if (c.kind == AllReduce || is_root) {
        want.resize(k);
        for (size_t i = 0; i < k; ++i) want[i] = reference(t, ref_op(c), n, i, c.seed);
        check_elems(w, t, c.inplace ? c.a->host() : c.b->host(), 0, k, want, c.what);
      }
      if (!c.inplace || (c.kind == Reduce && !is_root)) input_kept(c.a->host(), "input after call");
      break;
    case ReduceScatter:
      want.resize(k);
      for (size_t i = 0; i < k; ++i) want[i] = reference(t, ref_op(c), n, own + i, c.seed);
      check_elems(w, t, c.inplace ? c.a->host() : c.b->host(), c.inplace ? own : 0, k, want,
                  c.what);
      if (!c.inplace) input_kept(c.a->host(), "input after call");
      break;
    case Broadcast:
      want.resize(k);
      for (size_t i = 0; i < k; ++i) want[i] = tag_value(t, c.root, i, c.seed);
      check_elems(w, t, c.b->host(), 0, k, want, c.what);
      if (!c.inplace && is_root) input_kept(c.a->host(), "root's input after call");
      break;
    case AllGather:
    case Gather:
      if (c.kind == AllGather || is_root) {
        want.resize(k * n);
        for (int q = 0; q < n; ++q)
          for (size_t i = 0; i < k; ++i) want[q * k + i] = tag_value(t, q, i, c.seed);
        check_elems(w, t, c.b->host(), 0, k * n, want, c.what);
      }
      if (!c.inplace) input_kept(c.a->host(), "input after call");
      break;
    case AllToAll:
      want.resize(k * n);
      for (int q = 0; q < n; ++q)
        for (size_t i = 0; i < k; ++i) want[q * k + i] = tag_value(t, q, own + i, c.seed);
      check_elems(w, t, c.inplace ? c.a->host() : c.b->host(), 0, k * n, want, c.what);
      if (!c.inplace) input_kept(c.a->host(), "input after call");
      break;
    case Scatter: {
      want.resize(k);
      for (size_t i = 0; i < k; ++i) want[i] = tag_value(t, c.root, own + i, c.seed);
      const bool in_root = c.inplace && is_root;
      check_elems(w, t, in_root ? c.a->host() : c.b->host(), in_root ? own : 0, k, want, c.what);
      if (is_root && !c.inplace) input_kept(c.a->host(), "root's input after call");
      break;
    }
    case SendRecv: {
      const int from = (r + n - c.shift) % n;
      want.resize(k);
      for (size_t i = 0; i < k; ++i) want[i] = tag_value(t, from, i, c.seed);
      check_elems(w, t, c.b->host(), 0, k, want, c.what);
      input_kept(c.a->host(), "send buffer after call");
      break;
    }
  }
}

}  // namespace

namespace {

// The sequence for the ranks this thread drives: its own (forked ranks), or
// every rank of the communicator (one thread, every step in one group
// around all of them).
int run_soak(World& w, std::vector<World>& ranks, const char* label) {
  const bool gpu = mem() == Mem::Cuda;
  const bool one_thread = ranks.size() > 1;
  const size_t steps = env_size("NTEST_SOAK_STEPS", gpu ? 120 : 24);
  const uint64_t seed0 = env_size("NTEST_SOAK_SEED", 1);
  const size_t max_bytes =
      env_size("NTEST_SOAK_MAX_BYTES", gpu ? size_t(40) << 20 : size_t(4) << 20);
  Rng rng(seed0 * 1000003u + static_cast<uint64_t>(w.nranks));
  int seed = static_cast<int>(seed0 % 1000) * 100000;
  size_t per_kind[kKinds] = {}, groups = 0, largest = 0, ran = 0;
  for (size_t s = 0; s < steps; ++s) {
    ++ran;
    // One call, or a group of 2-3: every rank draws the same.
    const size_t calls = rng.below(4) == 0 ? 2 + rng.below(2) : 1;
    std::vector<std::vector<Call>> group(ranks.size());
    for (auto& g : group) g.resize(calls);
    for (size_t i = 0; i < calls; ++i) {
      Call& c = group[0][i];
      draw(rng, w, c, ++seed, max_bytes / calls);
      for (size_t r = 1; r < ranks.size(); ++r) static_cast<Choice&>(group[r][i]) = c;
      ++per_kind[c.kind];
      largest = std::max(largest, c.count * type_size(c.t) * (blocked(c.kind) ? w.nranks : 1));
    }
    groups += calls > 1;
    for (size_t r = 0; r < ranks.size(); ++r) {
      std::string why;
      if (one_thread && gpu && !cuda::set_device(ranks[r].device, &why))
        fail(ranks[r], "cudaSetDevice(%d): %s", ranks[r].device, why.c_str());
      for (Call& c : group[r]) prepare(ranks[r], c);
    }
    const bool outer = one_thread || calls > 1;
    bool issued = true;
    if (outer) issued = ok(w, ncclGroupStart(), "soak ncclGroupStart");
    for (size_t r = 0; r < ranks.size(); ++r)
      for (Call& c : group[r]) issued = issue(ranks[r], c) && issued;
    if (outer) issued = ok(w, ncclGroupEnd(), "soak ncclGroupEnd") && issued;
    char what[64];
    std::snprintf(what, sizeof(what), "soak step %zu (%zu call(s))", s, calls);
    for (size_t r = 0; r < ranks.size(); ++r) {
      if (issued && finish(ranks[r], what))
        for (Call& c : group[r]) check(ranks[r], c);
      for (Call& c : group[r])
        if (c.created)
          ok(ranks[r], ncclRedOpDestroy(c.red, ranks[r].comm), "soak ncclRedOpDestroy");
    }
    if (failures() > 0) break;  // the first wrong step says it; the rest would repeat it
  }
  if (w.rank == 0) {  // what the sequence covered (the same on every rank)
    std::printf("[nccl_api_test] %s np %d seed %llu: %zu of %zu steps, %zu of them groups; calls:",
                label, w.nranks, static_cast<unsigned long long>(seed0), ran, steps, groups);
    for (int k = 0; k < kKinds; ++k) std::printf(" %s %zu", kind_name(k), per_kind[k]);
    std::printf("; largest buffer %zu B\n", largest);
  }
  return 0;
}

}  // namespace

int suite_soak(World& w) {
  std::vector<World> ranks{w};
  return run_soak(w, ranks, "soak");
}

// Rank 0's process drives every rank from one thread (ncclCommInitAll on
// GPUs, rank r on GPU r % GPUs, a stream each; host memory: a group of
// ncclCommInitRank), each step one group around every rank's calls.
int suite_soak1(World& w) {
  if (w.rank != 0) return 0;
  const int n = w.nranks;
  std::vector<ncclComm_t> comms;
  std::vector<int> devs;
  if (!init_every_rank(w, &comms, &devs)) return 1;
  std::vector<std::unique_ptr<Stream>> streams;
  std::vector<World> ranks(n);
  for (int r = 0; r < n; ++r) {
    std::string why;
    if (mem() == Mem::Cuda && !cuda::set_device(devs[r], &why))
      fail(w, "cudaSetDevice(%d): %s", devs[r], why.c_str());
    streams.push_back(std::make_unique<Stream>());
    ranks[r] = World{r, n, comms[r], mem() == Mem::Cuda ? devs[r] : -1, streams.back()->get()};
  }
  run_soak(w, ranks, "soak1");
  streams.clear();
  for (ncclComm_t c : comms) ok(w, ncclCommDestroy(c), "ncclCommDestroy (soak1)");
  return 0;
}

}  // namespace ntest
