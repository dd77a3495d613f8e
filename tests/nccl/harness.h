// Harness of the nccl.h test program (nccl_api_test): forked ranks, ids
// passed through shared memory, failure counting, the buffers handed to
// NCCL (host memory, or GPU memory with --mem cuda), and element codecs and
// reference values computed independently of mycoll (own fp16/bf16/fp8
// rounding). Uses only nccl.h, the C/C++ standard libraries and, for GPU
// memory, the CUDA runtime (harness_cuda.cc).
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ntest {

// ---- ranks -------------------------------------------------------------------

struct World {
  int rank = 0;
  int nranks = 1;
  ncclComm_t comm = nullptr;      // the world communicator (blocking init)
  int device = -1;                // GPU of this rank (rank % GPUs) with --mem cuda
  cudaStream_t stream = nullptr;  // the stream every call of the rank goes on
};

// ---- memory ------------------------------------------------------------------

// Where the buffers handed to NCCL live. Host: host-memory communicators
// (MYCOLL_HOST_COMM=1). Cuda: each rank on GPU rank % GPUs (so several ranks
// share a GPU when there are fewer GPUs than ranks), its calls on a stream of
// its own, results copied back to the host to be checked.
enum class Mem { Host, Cuda };
Mem mem();
void set_mem(Mem m);
// Whether this build can use GPU memory, and how many GPUs the process sees
// (call in a rank, never in the parent before fork); 0 with a reason in why.
int gpu_count(std::string* why);

// A buffer of count elements of t (at least one), 0x5a bytes on both sides:
// host() is what the test fills and checks, dev() what NCCL gets (the same
// memory on the host; GPU memory with --mem cuda). put() copies host ->
// GPU, get() GPU -> host (both on the rank's stream, waited for; no-ops on the host).
class Buf {
 public:
  Buf(ncclDataType_t t, size_t count);
  ~Buf();
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  char* host() { return host_.data(); }
  char* dev(size_t elem_off = 0) { return base() + elem_off * elem_; }
  size_t bytes() const { return host_.size(); }
  void put();
  void get();

 private:
  char* base() { return gpu_ ? static_cast<char*>(gpu_) : host_.data(); }
  std::vector<char> host_;
  size_t elem_;
  void* gpu_ = nullptr;
};

// Waits for stream (default: the rank's) and asks comm (default: the
// world's) for an asynchronous error (a kernel that gave up records one);
// false, with a failure naming what, when either reports an error.
bool finish(World& w, const char* what, ncclComm_t comm = nullptr, cudaStream_t stream = nullptr);

// A stream of its own (GPU memory; nullptr on the host), for a second rank
// driven by the same thread.
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

// A fresh id from rank 0 to every rank (slot: 0..kIdSlots-1, each used once).
constexpr int kIdSlots = 16;
ncclUniqueId shared_id(const World& w, int slot);

// Failure reporting: counts, prints the first few with the rank.
void fail(const World& w, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
bool expect(const World& w, bool cond, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
// ncclSuccess expected; on failure prints what and ncclGetLastError.
bool ok(const World& w, ncclResult_t r, const char* what);
int failures();

// Runs suite(w) in nranks forked processes (each with a world communicator
// from ncclCommInitRank unless init_world is false); returns the number of
// ranks that failed (crash, nonzero exit, timeout after timeout_s).
using Suite = int (*)(World& w);
int run_suite(const char* name, int nranks, Suite suite, bool init_world, double timeout_s);

// ---- logs ----------------------------------------------------------------------

// The NCCL_DEBUG_FILE this process wrote under pattern's directory as
// "<dir>/<stem>.<pid>.log" (the pattern "<dir>/<stem>.%p.log"), read whole;
// a failure naming it when it is missing or empty (then "").
std::string read_own_log(const World& w, const std::string& dir, const std::string& stem);
// How many times part occurs in text.
size_t occurrences(const std::string& text, const std::string& part);

// ---- element codecs and references --------------------------------------

extern const ncclDataType_t kAllTypes[12];
size_t type_size(ncclDataType_t t);
const char* type_name(ncclDataType_t t);
bool is_float(ncclDataType_t t);
bool is_unsigned(ncclDataType_t t);

// Rounds x to the nearest value of t (nearest even; fp8 saturates to the
// largest finite value, fp16/bf16 overflow to infinity; integers truncate
// toward zero and wrap) and stores it at buf[i].
void store(ncclDataType_t t, void* buf, size_t i, double x);
double load(ncclDataType_t t, const void* buf, size_t i);

// Input of rank r at index i for op (small values whose sums, products and
// partial sums are exact in every type, so any reduction order gives the
// same bits). seed varies tests.
double input(ncclDataType_t t, ncclRedOp_t op, int r, size_t i, int seed);
// Values that identify (rank, index) as far as t allows (data movement).
double tag_value(ncclDataType_t t, int r, size_t i, int seed);
// PreMulSum scalar used by the tests for t (exactness as above).
double premul_scalar(ncclDataType_t t);

// Reference of op over ranks 0..n-1 at index i (op: a built-in op, or
// kPreMul for PreMulSum with premul_scalar(t)); returns the value to store.
constexpr int kPreMul = 100;
double reference(ncclDataType_t t, int op, int n, size_t i, int seed);

// Compares count elements of got at [off..) with want(i) bit for bit (as
// stored by store()); reports the first mismatches naming what.
bool check_elems(const World& w, ncclDataType_t t, const void* got, size_t off, size_t count,
                 const std::vector<double>& want, const char* what);

std::vector<char> buffer(ncclDataType_t t, size_t count);

// Stores v[i] at buf[off + i] for every i (as store()).
void fill(ncclDataType_t t, void* buf, size_t off, const std::vector<double>& v);

// ---- one thread, every rank ---------------------------------------------------

// Rank 0's process creates every rank of a communicator of w.nranks:
// ncclCommInitAll on GPUs (rank r on GPU r % GPUs, devs[r]), a group of
// ncclCommInitRank on host memory (devs all 0). False, with a failure, when
// creation failed.
bool init_every_rank(const World& w, std::vector<ncclComm_t>* comms, std::vector<int>* devs);

}  // namespace ntest
