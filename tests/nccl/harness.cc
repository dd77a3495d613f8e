#include "harness.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "harness_cuda.h"

namespace ntest {
namespace {

struct Shared {
  volatile int ready[kIdSlots];
  ncclUniqueId ids[kIdSlots];
};
Shared* g_shared = nullptr;
int g_failures = 0;
Mem g_mem = Mem::Host;
World* g_world = nullptr;  // this rank's, for failures found without one at hand

void vreport(const World& w, const char* fmt, va_list ap) {
  if (g_failures < 25) {
    char buf[1024];
    std::vsnprintf(buf, sizeof(buf), fmt, ap);
    std::fprintf(stderr, "[rank %d/%d] FAILED: %s\n", w.rank, w.nranks, buf);
  }
  ++g_failures;
}

// A binary floating format: M mantissa bits, exponent bias, largest finite
// value, whether the all-ones exponent is Inf/NaN (else only all-ones
// exponent and mantissa is NaN, as in e4m3), saturation on overflow.
struct Fmt {
  int ebits, mbits, bias;
  double max_finite;
  bool ieee_specials;
  bool saturate;
};
constexpr Fmt kHalf{5, 10, 15, 65504.0, true, false};
constexpr Fmt kBf16{8, 7, 127, 3.3895313892515355e38, true, false};
constexpr Fmt kE4M3{4, 3, 7, 448.0, false, true};
constexpr Fmt kE5M2{5, 2, 15, 57344.0, true, true};

uint32_t encode(const Fmt& f, double x) {
  const int total = 1 + f.ebits + f.mbits;
  const uint32_t sign = std::signbit(x) ? 1u << (total - 1) : 0u;
  double a = std::fabs(x);
  const int emin = 1 - f.bias;
  int e2 = 0;
  std::frexp(a, &e2);
  const int e = a == 0 ? emin : std::max(e2 - 1, emin);
  const double quantum = std::ldexp(1.0, e - f.mbits);
  double r = std::nearbyint(a / quantum) * quantum;  // nearest even
  const uint32_t emax_field = (1u << f.ebits) - 1;
  if (r > f.max_finite) {
    if (!f.saturate) return sign | (emax_field << f.mbits);  // infinity
    r = f.max_finite;
  }
  if (r < std::ldexp(1.0, emin)) return sign | uint32_t(r / std::ldexp(1.0, emin - f.mbits));
  std::frexp(r, &e2);
  const int re = e2 - 1;
  const uint32_t m = uint32_t(r / std::ldexp(1.0, re - f.mbits)) - (1u << f.mbits);
  return sign | (uint32_t(re + f.bias) << f.mbits) | m;
}

double decode(const Fmt& f, uint32_t bits) {
  const int total = 1 + f.ebits + f.mbits;
  const double sign = (bits >> (total - 1)) & 1 ? -1.0 : 1.0;
  const uint32_t e = (bits >> f.mbits) & ((1u << f.ebits) - 1);
  const uint32_t m = bits & ((1u << f.mbits) - 1);
  if (f.ieee_specials && e == (1u << f.ebits) - 1) return m ? NAN : sign * INFINITY;
  if (!f.ieee_specials && e == (1u << f.ebits) - 1 && m == (1u << f.mbits) - 1) return NAN;
  if (e == 0) return sign * std::ldexp(double(m), 1 - f.bias - f.mbits);
  return sign * std::ldexp(double((1u << f.mbits) | m), int(e) - f.bias - f.mbits);
}

const Fmt* float_fmt(ncclDataType_t t) {
  switch (t) {
    case ncclFloat16: return &kHalf;
    case ncclBfloat16: return &kBf16;
    case ncclFloat8e4m3: return &kE4M3;
    case ncclFloat8e5m2: return &kE5M2;
    default: return nullptr;
  }
}

}  // namespace

const ncclDataType_t kAllTypes[12] = {ncclInt8,    ncclUint8,    ncclInt32,      ncclUint32,
                                      ncclInt64,   ncclUint64,   ncclFloat16,    ncclFloat32,
                                      ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};

size_t type_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    default: return 8;
  }
}

const char* type_name(ncclDataType_t t) {
  static const char* names[] = {"int8",    "uint8",   "int32",   "uint32",   "int64",   "uint64",
                                "float16", "float32", "float64", "bfloat16", "fp8e4m3", "fp8e5m2"};
  return t >= 0 && t < 12 ? names[t] : "?";
}

bool is_float(ncclDataType_t t) {
  return t == ncclFloat16 || t == ncclFloat32 || t == ncclFloat64 || t == ncclBfloat16 ||
         t == ncclFloat8e4m3 || t == ncclFloat8e5m2;
}
bool is_unsigned(ncclDataType_t t) { return t == ncclUint8 || t == ncclUint32 || t == ncclUint64; }

void store(ncclDataType_t t, void* buf, size_t i, double x) {
  char* p = static_cast<char*>(buf) + i * type_size(t);
  if (const Fmt* f = float_fmt(t)) {
    const uint32_t b = encode(*f, x);
    std::memcpy(p, &b, type_size(t));  // little endian: the low bytes
  } else if (t == ncclFloat32) {
    const float v = static_cast<float>(x);
    std::memcpy(p, &v, 4);
  } else if (t == ncclFloat64) {
    std::memcpy(p, &x, 8);
  } else {
    const int64_t v = static_cast<int64_t>(std::trunc(x));
    std::memcpy(p, &v, type_size(t));
  }
}

double load(ncclDataType_t t, const void* buf, size_t i) {
  const char* p = static_cast<const char*>(buf) + i * type_size(t);
  if (const Fmt* f = float_fmt(t)) {
    uint32_t b = 0;
    std::memcpy(&b, p, type_size(t));
    return decode(*f, b);
  }
  switch (t) {
    case ncclInt8: return *reinterpret_cast<const int8_t*>(p);
    case ncclUint8: return *reinterpret_cast<const uint8_t*>(p);
    case ncclInt32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case ncclUint32: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case ncclInt64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return double(v);
    }
    case ncclUint64: {
      uint64_t v;
      std::memcpy(&v, p, 8);
      return double(v);
    }
    case ncclFloat32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    default: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
  }
}

double input(ncclDataType_t t, ncclRedOp_t op, int r, size_t i, int seed) {
  const uint64_t h = uint64_t(r) * 7 + i * 3 + uint64_t(seed) * 5;
  if (op == ncclProd) return (uint64_t(r) + i + uint64_t(seed)) % 3 == 0 ? 2.0 : 1.0;
  if (is_unsigned(t)) return double(h % 4);
  if (t == ncclFloat8e5m2) return double(h % 3) - 1.0;
  return double(h % 5) - 2.0;
}

double tag_value(ncclDataType_t t, int r, size_t i, int seed) {
  uint64_t m = 1000003, off = 500000;
  switch (t) {
    case ncclInt8: m = 100, off = 50; break;
    case ncclUint8: m = 200, off = 0; break;
    case ncclFloat8e4m3: m = 17, off = 8; break;
    case ncclFloat8e5m2: m = 9, off = 4; break;
    case ncclBfloat16: m = 256, off = 128; break;
    case ncclFloat16: m = 2048, off = 1024; break;
    case ncclUint32:
    case ncclUint64: off = 0; break;
    default: break;
  }
  return double((uint64_t(r) * 37 + i * 11 + uint64_t(seed)) % m) - double(off);
}

double premul_scalar(ncclDataType_t t) {
  return t == ncclFloat8e4m3 || t == ncclFloat8e5m2 ? 2.0 : 3.0;
}

double reference(ncclDataType_t t, int op, int n, size_t i, int seed) {
  const ncclRedOp_t in_op = op == kPreMul ? ncclSum : static_cast<ncclRedOp_t>(op);
  const double k = op == kPreMul ? premul_scalar(t) : 1.0;
  double acc = input(t, in_op, 0, i, seed) * k;
  for (int r = 1; r < n; ++r) {
    const double v = input(t, in_op, r, i, seed) * k;
    switch (op) {
      case ncclProd: acc *= v; break;
      case ncclMax: acc = std::max(acc, v); break;
      case ncclMin: acc = std::min(acc, v); break;
      default: acc += v; break;  // sum, avg, premul
    }
  }
  if (op == ncclAvg) acc = is_float(t) ? acc / n : std::trunc(acc / n);
  return acc;
}

void fill(ncclDataType_t t, void* buf, size_t off, const std::vector<double>& v) {
  for (size_t i = 0; i < v.size(); ++i) store(t, buf, off + i, v[i]);
}

bool check_elems(const World& w, ncclDataType_t t, const void* got, size_t off, size_t count,
                 const std::vector<double>& want, const char* what) {
  const size_t es = type_size(t);
  int bad = 0;
  for (size_t i = 0; i < count; ++i) {
    char expect_bytes[8];
    store(t, expect_bytes, 0, want[i]);
    const char* g = static_cast<const char*>(got) + (off + i) * es;
    if (std::memcmp(expect_bytes, g, es) != 0) {
      if (bad < 3)
        fail(w, "%s %s: element %zu is %g, want %g", what, type_name(t), off + i,
             load(t, got, off + i), load(t, expect_bytes, 0));
      ++bad;
    }
  }
  if (bad > 3) fail(w, "%s %s: %d of %zu elements wrong", what, type_name(t), bad, count);
  return bad == 0;
}

std::vector<char> buffer(ncclDataType_t t, size_t count) {
  return std::vector<char>(type_size(t) * (count ? count : 1), char(0x5a));
}

Mem mem() { return g_mem; }
void set_mem(Mem m) { g_mem = m; }
int gpu_count(std::string* why) { return cuda::device_count(why); }

Buf::Buf(ncclDataType_t t, size_t count) : host_(buffer(t, count)), elem_(type_size(t)) {
  if (g_mem != Mem::Cuda) return;
  std::string why;
  gpu_ = cuda::alloc(host_.size(), &why);
  if (!gpu_) {
    fail(*g_world, "cudaMalloc of %zu bytes: %s", host_.size(), why.c_str());
    return;
  }
  put();
}

Buf::~Buf() { cuda::release(gpu_); }

void Buf::put() {
  std::string why;
  if (gpu_ && !cuda::copy(gpu_, host_.data(), host_.size(), true, g_world->stream, &why))
    fail(*g_world, "copy of %zu bytes to the GPU: %s", host_.size(), why.c_str());
}

void Buf::get() {
  std::string why;
  if (gpu_ && !cuda::copy(host_.data(), gpu_, host_.size(), false, g_world->stream, &why))
    fail(*g_world, "copy of %zu bytes from the GPU: %s", host_.size(), why.c_str());
}

bool finish(World& w, const char* what, ncclComm_t comm, cudaStream_t stream) {
  std::string why;
  if (g_mem == Mem::Cuda && !cuda::sync(stream ? stream : w.stream, &why)) {
    fail(w, "%s: waiting for the stream: %s", what, why.c_str());
    return false;
  }
  if (!comm) comm = w.comm;
  ncclResult_t state = ncclSuccess;
  if (comm && (ncclCommGetAsyncError(comm, &state) != ncclSuccess || state != ncclSuccess)) {
    fail(w, "%s: ncclCommGetAsyncError reports %d (%s): %s", what, int(state),
         ncclGetErrorString(state), ncclGetLastError(comm));
    return false;
  }
  return true;
}

Stream::Stream() {
  std::string why;
  if (g_mem == Mem::Cuda && !cuda::new_stream(&s_, &why))
    fail(*g_world, "cudaStreamCreate: %s", why.c_str());
}

Stream::~Stream() { cuda::release_stream(s_); }

void fail(const World& w, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport(w, fmt, ap);
  va_end(ap);
}

bool expect(const World& w, bool cond, const char* fmt, ...) {
  if (cond) return true;
  va_list ap;
  va_start(ap, fmt);
  vreport(w, fmt, ap);
  va_end(ap);
  return false;
}

bool ok(const World& w, ncclResult_t r, const char* what) {
  return expect(w, r == ncclSuccess, "%s returned %d (%s): %s", what, int(r), ncclGetErrorString(r),
                ncclGetLastError(nullptr));
}

int failures() { return g_failures; }

std::string read_own_log(const World& w, const std::string& dir, const std::string& stem) {
  const std::string path = dir + "/" + stem + "." + std::to_string(getpid()) + ".log";
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string log = ss.str();
  expect(w, !log.empty(), "NCCL_DEBUG_FILE %s is missing or empty", path.c_str());
  return log;
}

size_t occurrences(const std::string& text, const std::string& part) {
  size_t k = 0;
  for (size_t p = text.find(part); p != std::string::npos; p = text.find(part, p + 1)) ++k;
  return k;
}

ncclUniqueId shared_id(const World& w, int slot) {
  ncclUniqueId id{};
  if (slot < 0 || slot >= kIdSlots) {
    fail(w, "id slot %d out of range", slot);
    return id;
  }
  if (w.rank == 0) {
    ok(w, ncclGetUniqueId(&g_shared->ids[slot]), "ncclGetUniqueId");
    __sync_synchronize();
    g_shared->ready[slot] = 1;
    return g_shared->ids[slot];
  }
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!g_shared->ready[slot]) {
    if (std::chrono::steady_clock::now() > until) {
      fail(w, "no id from rank 0 in slot %d after 120 s", slot);
      return id;
    }
    usleep(500);
  }
  __sync_synchronize();
  return g_shared->ids[slot];
}

static int child(int rank, int nranks, Suite suite, bool init_world) {
  World w;
  w.rank = rank;
  w.nranks = nranks;
  g_world = &w;
  if (g_mem == Mem::Cuda) {
    std::string why;
    const int gpus = cuda::device_count(&why);
    if (gpus <= 0) {
      fail(w, "--mem cuda: %s", why.c_str());
      return 2;
    }
    w.device = rank % gpus;
    if (!cuda::use_device(w.device, &w.stream, &why)) {
      fail(w, "GPU %d: %s", w.device, why.c_str());
      return 2;
    }
  }
  if (init_world) {
    ncclUniqueId id = shared_id(w, 0);
    if (!ok(w, ncclCommInitRank(&w.comm, nranks, id, rank), "ncclCommInitRank (world)")) return 2;
  }
  int rc = suite(w);
  if (w.comm && !ok(w, ncclCommDestroy(w.comm), "ncclCommDestroy (world)")) rc = 1;
  cuda::release_stream(w.stream);
  g_world = nullptr;
  return rc != 0 || g_failures > 0 ? 1 : 0;
}

bool init_every_rank(const World& w, std::vector<ncclComm_t>* comms, std::vector<int>* devs) {
  const int n = w.nranks;
  comms->assign(n, nullptr);
  devs->assign(n, 0);
  if (g_mem == Mem::Cuda) {
    std::string why;
    const int gpus = gpu_count(&why);
    for (int r = 0; r < n; ++r) (*devs)[r] = r % (gpus > 0 ? gpus : 1);
    return ok(w, ncclCommInitAll(comms->data(), n, devs->data()), "ncclCommInitAll");
  }
  // ncclCommInitAll is for GPUs; host communicators come from one id and
  // a group of ncclCommInitRank (the same thread creating every rank).
  ncclUniqueId id;
  if (!ok(w, ncclGetUniqueId(&id), "ncclGetUniqueId")) return false;
  ok(w, ncclGroupStart(), "ncclGroupStart (init)");
  for (int r = 0; r < n; ++r) ok(w, ncclCommInitRank(&(*comms)[r], n, id, r), "ncclCommInitRank");
  return ok(w, ncclGroupEnd(), "ncclGroupEnd (init)");
}

int run_suite(const char* name, int nranks, Suite suite, bool init_world, double timeout_s) {
  void* mem =
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    std::perror("mmap");
    return nranks;
  }
  g_shared = new (mem) Shared{};
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<pid_t> pids(nranks, -1);
  for (int r = 0; r < nranks; ++r) {
    pid_t p = fork();
    if (p == 0) {
      int rc = child(r, nranks, suite, init_world);
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(rc);
    }
    pids[r] = p;
  }
  int failed = 0, left = nranks;
  std::vector<bool> done(nranks, false);
  const auto until = t0 + std::chrono::duration<double>(timeout_s);
  while (left > 0) {
    for (int r = 0; r < nranks; ++r) {
      if (done[r]) continue;
      int status = 0;
      if (waitpid(pids[r], &status, WNOHANG) != pids[r]) continue;
      done[r] = true;
      --left;
      if (WIFSIGNALED(status)) {
        std::fprintf(stderr, "[%s] rank %d killed by signal %d\n", name, r, WTERMSIG(status));
        ++failed;
      } else if (WEXITSTATUS(status) != 0) {
        std::fprintf(stderr, "[%s] rank %d exited with %d\n", name, r, WEXITSTATUS(status));
        ++failed;
      }
    }
    if (left > 0 && std::chrono::steady_clock::now() > until) {
      std::fprintf(stderr, "[%s] timed out after %.0f s: killing %d rank(s)\n", name, timeout_s,
                   left);
      for (int r = 0; r < nranks; ++r)
        if (!done[r]) kill(pids[r], SIGKILL);
    }
    if (left > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  munmap(mem, sizeof(Shared));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[nccl_api_test] %-8s np %d %s memory: %s (%.1f s)\n", name, nranks,
              g_mem == Mem::Cuda ? "GPU" : "host", failed ? "FAIL" : "PASS", s);
  std::fflush(stdout);
  return failed;
}

}  // namespace ntest
