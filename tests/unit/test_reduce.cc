// Tests for lib/engine/reduce.{h,cc}: every dtype x op against a scalar
// reference written independently here (wider integer arithmetic, double
// arithmetic plus a frexp/nearbyint rounding for fp16/bf16), aliasing,
// odd lengths, conversions over all 65536 fp16/bf16 patterns, scale_avg,
// copy_host (streaming and plain, every alignment, overlaps).
#include <gtest/gtest.h>

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "base/error.h"
#include "engine/reduce.h"

namespace mycoll {
namespace {

// ---- independent fp16 / bf16 reference -------------------------------------
// Format: p significand bits (incl. hidden), bias, exponent field width.
struct Fmt {
  int p;
  int bias;
  int exp_bits;
  int emin() const { return 1 - bias; }
  int emax() const { return (1 << exp_bits) - 2 - bias; }
  int mant_bits() const { return p - 1; }
};
constexpr Fmt kHalf{11, 15, 5};
constexpr Fmt kBf16{8, 127, 8};

double ref_decode(const Fmt& f, uint16_t bits) {
  const int mb = f.mant_bits();
  const bool neg = bits >> 15;
  const int e = (bits >> mb) & ((1 << f.exp_bits) - 1);
  const int m = bits & ((1 << mb) - 1);
  double v;
  if (e == (1 << f.exp_bits) - 1) {
    v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (e == 0) {
    v = std::ldexp(double(m), f.emin() - mb);
  } else {
    v = std::ldexp(double(m + (1 << mb)), e - f.bias - mb);
  }
  return neg ? -v : v;
}

// Correctly rounded (nearest even) conversion of a double to the format's
// bit pattern. NaN maps to some NaN (callers only test isnan then).
uint16_t ref_encode(const Fmt& f, double v) {
  const int mb = f.mant_bits();
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const uint16_t inf = uint16_t(((1 << f.exp_bits) - 1) << mb);
  if (std::isnan(v)) return uint16_t(sign | inf | (1 << (mb - 1)));
  double a = std::fabs(v);
  if (std::isinf(a)) return sign | inf;
  if (a == 0) return sign;
  int e;
  std::frexp(a, &e);                      // a = m * 2^e, m in [0.5, 1)
  int lead = std::max(e - 1, f.emin());   // exponent of the leading bit (or subnormal)
  double q = std::ldexp(1.0, lead - mb);  // quantum at that exponent
  double r = std::nearbyint(a / q) * q;   // default rounding mode: nearest even
  if (r >= std::ldexp(1.0, f.emax() + 1)) return sign | inf;
  if (r < std::ldexp(1.0, f.emin())) {  // subnormal (or rounds to zero)
    return uint16_t(sign | uint16_t(std::ldexp(r, -(f.emin() - mb))));
  }
  std::frexp(r, &e);
  lead = e - 1;
  const int mant = int(std::ldexp(r, -lead) * (1 << mb)) - (1 << mb);
  return uint16_t(sign | ((lead + f.bias) << mb) | mant);
}

bool is_nan16(const Fmt& f, uint16_t b) {
  const int mb = f.mant_bits();
  return ((b >> mb) & ((1 << f.exp_bits) - 1)) == (1 << f.exp_bits) - 1 && (b & ((1 << mb) - 1));
}

// Runs body once per implementation this CPU supports (the baseline loops,
// AVX2, AVX2+F16C), then restores the default.
template <typename Body>
void for_each_isa(Body body) {
  const ReduceIsa saved = reduce_isa();
  for (ReduceIsa isa : {ReduceIsa::Baseline, ReduceIsa::Avx2, ReduceIsa::Avx2F16c}) {
    if (set_reduce_isa(isa) != isa) continue;
    SCOPED_TRACE("isa " + std::to_string(static_cast<int>(isa)));
    body();
    if (::testing::Test::HasFatalFailure()) break;
  }
  set_reduce_isa(saved);
}

// ---- conversions -----------------------------------------------------------

TEST(Half, AllPatternsDecodeAndRoundTrip) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint16_t h = uint16_t(i);
    const float f = half_to_float(h);
    const double ref = ref_decode(kHalf, h);
    if (std::isnan(ref)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << i;
      uint32_t fb;
      std::memcpy(&fb, &f, 4);
      EXPECT_EQ((fb >> 13) & 0x3ff, i & 0x3ffu) << "payload kept " << std::hex << i;
      EXPECT_EQ(fb >> 31, i >> 15) << "sign kept " << std::hex << i;
    } else {
      ASSERT_EQ(double(f), ref) << std::hex << i;
      ASSERT_EQ(std::signbit(f), std::signbit(ref)) << std::hex << i;
    }
    ASSERT_EQ(float_to_half(f), h) << "round trip " << std::hex << i;
  }
}

TEST(Bf16, AllPatternsDecodeAndRoundTrip) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint16_t b = uint16_t(i);
    const float f = bf16_to_float(b);
    const double ref = ref_decode(kBf16, b);
    if (std::isnan(ref)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << i;
    } else {
      ASSERT_EQ(double(f), ref) << std::hex << i;
      ASSERT_EQ(std::signbit(f), std::signbit(ref)) << std::hex << i;
    }
    ASSERT_EQ(float_to_bf16(f), b) << "round trip " << std::hex << i;
  }
}

float next_toward(float x, float dir) { return std::nextafter(x, dir); }

// Every rounding boundary: for each finite pattern v and its successor w,
// the midpoint (a tie) and one fp32 ulp either side of it, plus random floats.
void check_float_to_16(const Fmt& fmt, uint16_t (*conv)(float), float (*back)(uint16_t)) {
  auto check = [&](float x) {
    const uint16_t got = conv(x);
    const uint16_t want = ref_encode(fmt, double(x));
    if (std::isnan(x)) {
      ASSERT_TRUE(is_nan16(fmt, got)) << x;
    } else {
      ASSERT_EQ(got, want) << "x=" << x << std::hex << " got 0x" << got << " want 0x" << want;
    }
  };
  const uint16_t inf = uint16_t(((1 << fmt.exp_bits) - 1) << fmt.mant_bits());
  for (uint32_t i = 0; i < inf; ++i) {  // positive finite patterns; negatives by symmetry below
    const float v = back(uint16_t(i));
    // Successor (for the largest finite: the value where Inf begins).
    const double w = i + 1 < inf ? double(back(uint16_t(i + 1))) : std::ldexp(1.0, fmt.emax() + 1);
    const float mid = float((double(v) + w) / 2);  // exact in fp32 (p <= 11 < 24)
    for (float x : {v, mid, next_toward(mid, 0.f), next_toward(mid, 1e30f)}) {
      check(x);
      check(-x);
    }
  }
  std::mt19937 rng(1234);
  for (int k = 0; k < 200000; ++k) {
    uint32_t bits = rng();
    float x;
    std::memcpy(&x, &bits, 4);
    check(x);
  }
  for (float x : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::max(),
                  std::numeric_limits<float>::denorm_min(), 1e-45f, 0.f, -0.f})
    check(x);
}

TEST(Half, FloatToHalfRoundsToNearestEven) {
  check_float_to_16(kHalf, float_to_half, half_to_float);
  EXPECT_EQ(float_to_half(65504.f), 0x7bff);
  EXPECT_EQ(float_to_half(65519.99f), 0x7bff);
  EXPECT_EQ(float_to_half(65520.f), 0x7c00);                // tie rounds to even = Inf
  EXPECT_EQ(float_to_half(1.0f + 1.0f / 2048), 0x3c00);     // tie to even (down)
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000);  // half of min subnormal: tie to 0
  EXPECT_EQ(float_to_half(std::ldexp(1.5f, -25)), 0x0001);
}

TEST(Bf16, FloatToBf16RoundsToNearestEven) {
  check_float_to_16(kBf16, float_to_bf16, bf16_to_float);
  EXPECT_EQ(float_to_bf16(1.0f + 1.0f / 256), 0x3f80);  // tie to even (down)
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7f80);
}

TEST(Half, NanPayloadAndQuieting) {
  // A NaN whose top payload bits are zero must stay NaN (made quiet).
  float snan;
  uint32_t bits = 0x7f800001u;
  std::memcpy(&snan, &bits, 4);
  EXPECT_TRUE(is_nan16(kHalf, float_to_half(snan)));
  EXPECT_TRUE(is_nan16(kBf16, float_to_bf16(snan)));
  bits = 0xff800001u;
  std::memcpy(&snan, &bits, 4);
  EXPECT_EQ(float_to_half(snan) & 0x8000, 0x8000);
  EXPECT_EQ(float_to_bf16(snan) & 0x8000, 0x8000);
}

#if defined(__x86_64__)
// Conversions must not depend on the FTZ/DAZ bits a host process may set.
TEST(Half, IndependentOfFlushToZeroMode) {
  for_each_isa([] {
    const unsigned saved = _mm_getcsr();
    _mm_setcsr(saved | 0x8040);  // FTZ | DAZ
    bool ok = true;
    for (uint32_t i = 1; i < 0x400 && ok; ++i) {  // fp16 subnormals
      const float f = half_to_float(uint16_t(i));
      ok = double(f) == ref_decode(kHalf, uint16_t(i)) && float_to_half(f) == i;
    }
    std::vector<uint16_t> a(1000), b(1000), d(1000), s(1000);
    for (size_t i = 0; i < a.size(); ++i) a[i] = uint16_t(1 + i % 0x3fe), b[i] = 0x0001;
    reduce_host(mycollFloat16, mycollSum, d.data(), a.data(), b.data(), a.size());
    reduce_host(mycollFloat16, mycollSum, s.data(), a.data(), a.data(), a.size());
    scale_avg_host(mycollFloat16, s.data(), s.size(), 2);
    _mm_setcsr(saved);
    EXPECT_TRUE(ok);
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(d[i], a[i] + 1) << i;
      ASSERT_EQ(s[i], a[i]) << i;
    }
  });
}
#endif

// ---- reductions ------------------------------------------------------------

// Reference op on doubles with the documented NaN rule for Max/Min.
double ref_fop(mycollRedOp_t op, double a, double b) {
  switch (op) {
    case mycollSum:
    case mycollAvg: return a + b;
    case mycollProd: return a * b;
    case mycollMax:
      if (std::isnan(b)) return b;
      if (std::isnan(a)) return a;
      return b > a ? b : a;
    case mycollMin:
      if (std::isnan(b)) return b;
      if (std::isnan(a)) return a;
      return b < a ? b : a;
    default: return 0;
  }
}

// Integer reference: arithmetic modulo 2^128 (unsigned __int128, so no
// overflow), then reduced modulo 2^bits by truncation.
template <typename T>
T ref_iop(mycollRedOp_t op, T a, T b) {
  using W = unsigned __int128;
  const W x = static_cast<W>(a), y = static_cast<W>(b);  // residues mod 2^128
  W r;
  switch (op) {
    case mycollSum:
    case mycollAvg: r = x + y; break;
    case mycollProd: r = x * y; break;
    case mycollMax: return a > b ? a : b;
    case mycollMin: return a < b ? a : b;
    default: r = 0;
  }
  using U = std::make_unsigned_t<T>;
  const U low = static_cast<U>(r);
  T out;
  std::memcpy(&out, &low, sizeof(T));
  return out;
}

// Random inputs; floats get a mix of ordinary values, specials and raw bits.
template <typename T>
T random_value(std::mt19937_64& rng) {
  const uint64_t r = rng();
  if constexpr (std::is_floating_point_v<T>) {
    switch (r % 16) {
      case 0: return std::numeric_limits<T>::quiet_NaN();
      case 1:
        return (r & 256) ? std::numeric_limits<T>::infinity() : -std::numeric_limits<T>::infinity();
      case 2: return (r & 256) ? T(0) : -T(0);
      case 3: return std::numeric_limits<T>::denorm_min() * T(r >> 40);
      case 4:
      case 5:
      case 6: {
        T x;
        std::memcpy(&x, &r, sizeof(T));
        return x;
      }
      default: return T(int64_t(r >> 20) % 2000001 - 1000000) / T(1024);
    }
  } else {
    T x;
    std::memcpy(&x, &r, sizeof(T));
    if ((r >> 60) < 8) x = T(x % 100);  // half of the values small, to hit ordinary products
    return x;
  }
}

template <typename T>
void fill(std::vector<T>& v, size_t n, std::mt19937_64& rng, mycollDataType_t t) {
  v.resize(n);
  for (auto& x : v) x = random_value<T>(rng);
}

// Bit-exact match, except that any NaN matches any NaN.
template <typename T>
bool same(T got, T want) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(want)) return std::isnan(got);
  }
  return std::memcmp(&got, &want, sizeof(T)) == 0;
}

// Runs all four aliasing forms and compares each element with want(i).
template <typename T, typename Want>
void check_all_forms(mycollDataType_t t, mycollRedOp_t op, const std::vector<T>& a,
                     const std::vector<T>& b, Want want, bool self_check) {
  const size_t n = a.size();
  const std::string what =
      std::string(dtype_name(t)) + " " + redop_name(op) + " n=" + std::to_string(n);
  std::vector<T> d(n + 1);
  d[n] = T(7);  // guard: must stay untouched
  reduce_host(t, op, d.data(), a.data(), b.data(), n);
  for (size_t i = 0; i < n; ++i)
    ASSERT_TRUE(same(d[i], want(a[i], b[i]))) << what << " distinct, i=" << i;
  ASSERT_TRUE(same(d[n], T(7))) << what << " wrote past the end";

  std::vector<T> da = a;  // dst == a
  reduce_host(t, op, da.data(), da.data(), b.data(), n);
  for (size_t i = 0; i < n; ++i)
    ASSERT_TRUE(same(da[i], want(a[i], b[i]))) << what << " dst==a, i=" << i;

  std::vector<T> db = b;  // dst == b
  reduce_host(t, op, db.data(), a.data(), db.data(), n);
  for (size_t i = 0; i < n; ++i)
    ASSERT_TRUE(same(db[i], want(a[i], b[i]))) << what << " dst==b, i=" << i;

  if (self_check) {
    std::vector<T> dd = a;  // dst == a == b
    reduce_host(t, op, dd.data(), dd.data(), dd.data(), n);
    for (size_t i = 0; i < n; ++i)
      ASSERT_TRUE(same(dd[i], want(a[i], a[i]))) << what << " dst==a==b, i=" << i;
  }
}

const size_t kSizes[] = {0, 1, 7, 1023, 100003};
const mycollRedOp_t kOps[] = {mycollSum, mycollProd, mycollMax, mycollMin, mycollAvg};

template <typename T>
void run_native(mycollDataType_t t) {
  std::mt19937_64 rng(42 + t);
  for (size_t n : kSizes) {
    std::vector<T> a, b;
    fill(a, n, rng, t);
    fill(b, n, rng, t);
    for (auto op : kOps) {
      if constexpr (std::is_floating_point_v<T>) {
        // fp32: double result rounded once to float (exact: 53 >= 2*24+2).
        check_all_forms<T>(
            t, op, a, b, [op](T x, T y) { return T(ref_fop(op, double(x), double(y))); }, true);
      } else {
        check_all_forms<T>(
            t, op, a, b, [op](T x, T y) { return ref_iop<T>(op, x, y); }, true);
      }
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

void run_16(mycollDataType_t t, const Fmt& fmt) {
  std::mt19937_64 rng(7 + t);
  for (size_t n : kSizes) {
    std::vector<uint16_t> a(n), b(n);
    for (size_t i = 0; i < n; ++i) {
      a[i] = uint16_t(rng());
      b[i] = uint16_t(rng());
      if (i % 3 == 0) b[i] = uint16_t((a[i] ^ 0x8000) + (rng() % 5) - 2);  // near-cancellation
    }
    for (auto op : kOps) {
      auto want = [&fmt, op](uint16_t x, uint16_t y) -> uint16_t {
        const double r = ref_fop(op, ref_decode(fmt, x), ref_decode(fmt, y));
        // Max/Min return an operand unchanged (NaNs included).
        if (op == mycollMax || op == mycollMin) {
          if (is_nan16(fmt, y)) return y;
          if (is_nan16(fmt, x)) return x;
        }
        return ref_encode(fmt, r);
      };
      const size_t nn = a.size();
      const std::string what =
          std::string(dtype_name(t)) + " " + redop_name(op) + " n=" + std::to_string(nn);
      std::vector<uint16_t> d(nn), da = a, db = b, dd = a;
      reduce_host(t, op, d.data(), a.data(), b.data(), nn);
      reduce_host(t, op, da.data(), da.data(), b.data(), nn);
      reduce_host(t, op, db.data(), a.data(), db.data(), nn);
      reduce_host(t, op, dd.data(), dd.data(), dd.data(), nn);
      for (size_t i = 0; i < nn; ++i) {
        const uint16_t w = want(a[i], b[i]);
        const uint16_t ws = want(a[i], a[i]);
        struct Form {
          uint16_t got, exp;
          const char* form;
        };
        const Form forms[] = {{d[i], w, "distinct"},
                              {da[i], w, "dst==a"},
                              {db[i], w, "dst==b"},
                              {dd[i], ws, "dst==a==b"}};
        for (const auto& [got, exp, form] : forms) {
          if (is_nan16(fmt, exp)) {
            ASSERT_TRUE(is_nan16(fmt, got)) << what << " " << form << " i=" << i;
          } else {
            ASSERT_EQ(got, exp) << what << " " << form << " i=" << i << std::hex << " a=0x" << a[i]
                                << " b=0x" << b[i];
          }
        }
      }
    }
  }
}

TEST(Reduce, Int8) {
  for_each_isa([] { run_native<int8_t>(mycollInt8); });
}
TEST(Reduce, Uint8) {
  for_each_isa([] { run_native<uint8_t>(mycollUint8); });
}
TEST(Reduce, Int32) {
  for_each_isa([] { run_native<int32_t>(mycollInt32); });
}
TEST(Reduce, Uint32) {
  for_each_isa([] { run_native<uint32_t>(mycollUint32); });
}
TEST(Reduce, Int64) {
  for_each_isa([] { run_native<int64_t>(mycollInt64); });
}
TEST(Reduce, Uint64) {
  for_each_isa([] { run_native<uint64_t>(mycollUint64); });
}
TEST(Reduce, Float32) {
  for_each_isa([] { run_native<float>(mycollFloat32); });
}
TEST(Reduce, Float64) {
  for_each_isa([] { run_native<double>(mycollFloat64); });
}
TEST(Reduce, Float16) {
  for_each_isa([] { run_16(mycollFloat16, kHalf); });
}
TEST(Reduce, Bfloat16) {
  for_each_isa([] { run_16(mycollBfloat16, kBf16); });
}

// Any byte address works (ring buffers hand out such pointers) and gives the
// same bytes as the aligned call, in every aliasing form.
TEST(Reduce, MisalignedPointers) {
  for_each_isa([] {
    std::mt19937_64 rng(3);
    const size_t n = 10007;  // spans several bounce blocks for every element size
    for (int ti = 0; ti < mycollNumTypes; ++ti) {
      const auto t = static_cast<mycollDataType_t>(ti);
      const size_t es = dtype_size(t), bytes = n * es;
      std::vector<uint8_t> a(bytes), b(bytes);
      for (auto& x : a) x = uint8_t(rng());
      for (auto& x : b) x = uint8_t(rng());
      for (auto op : kOps) {
        std::vector<uint8_t> want(bytes);
        reduce_host(t, op, want.data(), a.data(), b.data(), n);
        for (size_t off : {size_t(1), size_t(3), es + 1}) {
          std::vector<uint8_t> ma(bytes + 16), mb(bytes + 16), md(bytes + 16);
          uint8_t* pa = ma.data() + off;
          uint8_t* pb = mb.data() + (off + 2) % 8 + 1;  // differently misaligned
          uint8_t* pd = md.data() + off;
          std::memcpy(pa, a.data(), bytes);
          std::memcpy(pb, b.data(), bytes);
          reduce_host(t, op, pd, pa, pb, n);
          ASSERT_EQ(0, std::memcmp(pd, want.data(), bytes))
              << dtype_name(t) << " " << redop_name(op) << " off " << off;
          reduce_host(t, op, pa, pa, pb, n);  // dst == a
          ASSERT_EQ(0, std::memcmp(pa, want.data(), bytes)) << dtype_name(t) << " dst==a";
        }
      }
      std::vector<uint8_t> sw = a, sm(bytes + 8);
      scale_avg_host(t, sw.data(), n, 3);
      std::memcpy(sm.data() + 1, a.data(), bytes);
      scale_avg_host(t, sm.data() + 1, n, 3);
      ASSERT_EQ(0, std::memcmp(sm.data() + 1, sw.data(), bytes)) << dtype_name(t) << " scale";
    }
  });
}

TEST(Reduce, IntegerOverflowWraps) {
  int8_t a8[] = {127, -128, 100}, b8[] = {1, -1, 100}, d8[3];
  reduce_host(mycollInt8, mycollSum, d8, a8, b8, 3);
  EXPECT_EQ(d8[0], -128);
  EXPECT_EQ(d8[1], 127);
  EXPECT_EQ(d8[2], -56);
  int32_t a32[] = {INT32_MAX, INT32_MIN}, b32[] = {2, -1}, d32[2];
  reduce_host(mycollInt32, mycollProd, d32, a32, b32, 2);
  EXPECT_EQ(d32[0], -2);
  EXPECT_EQ(d32[1], INT32_MIN);
  int64_t a64[] = {INT64_MAX}, b64[] = {1}, d64[1];
  reduce_host(mycollInt64, mycollSum, d64, a64, b64, 1);
  EXPECT_EQ(d64[0], INT64_MIN);
}

TEST(Reduce, FloatMaxMinNanPropagates) {
  for_each_isa([] {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    float a[] = {nan, 1.f, nan, -0.f, 3.f};
    float b[] = {1.f, nan, nan, 0.f, 2.f};
    float mx[5], mn[5];
    reduce_host(mycollFloat32, mycollMax, mx, a, b, 5);
    reduce_host(mycollFloat32, mycollMin, mn, a, b, 5);
    for (int i = 0; i < 3; ++i) {
      EXPECT_TRUE(std::isnan(mx[i])) << i;
      EXPECT_TRUE(std::isnan(mn[i])) << i;
    }
    EXPECT_EQ(mx[4], 3.f);
    EXPECT_EQ(mn[4], 2.f);
    EXPECT_TRUE(std::signbit(mx[3])) << "equal operands: a is returned";
    EXPECT_TRUE(std::signbit(mn[3]));
    // fp16 the same way (through whichever conversion path is active).
    const uint16_t hnan = 0x7e01;
    uint16_t ha[] = {hnan, 0x3c00, 0x8000, 0x4200}, hb[] = {0x3c00, hnan, 0x0000, 0x4000};
    uint16_t hmx[4], hmn[4];
    reduce_host(mycollFloat16, mycollMax, hmx, ha, hb, 4);
    reduce_host(mycollFloat16, mycollMin, hmn, ha, hb, 4);
    for (int i = 0; i < 2; ++i) {
      EXPECT_TRUE(is_nan16(kHalf, hmx[i])) << i;
      EXPECT_TRUE(is_nan16(kHalf, hmn[i])) << i;
    }
    EXPECT_EQ(hmx[2], 0x8000);
    EXPECT_EQ(hmn[2], 0x8000);
    EXPECT_EQ(hmx[3], 0x4200);
    EXPECT_EQ(hmn[3], 0x4000);
  });
}

TEST(Reduce, RejectsBadArguments) {
  float buf[8] = {};
  try {
    reduce_host(static_cast<mycollDataType_t>(mycollNumTypes), mycollSum, buf, buf, buf, 1);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), mycollInvalidArgument);
  }
  EXPECT_THROW(reduce_host(mycollFloat32, static_cast<mycollRedOp_t>(5), buf, buf, buf, 1), Error);
  EXPECT_THROW(reduce_host(mycollFloat32, mycollSum, buf + 1, buf, buf + 4, 3), Error);
  EXPECT_THROW(scale_avg_host(mycollFloat32, buf, 2, 0), Error);
  EXPECT_NO_THROW(reduce_host(mycollFloat32, mycollSum, nullptr, nullptr, nullptr, 0));
}

TEST(Reduce, Names) {
  EXPECT_EQ(dtype_size(mycollInt8), 1u);
  EXPECT_EQ(dtype_size(mycollFloat16), 2u);
  EXPECT_EQ(dtype_size(mycollBfloat16), 2u);
  EXPECT_EQ(dtype_size(mycollUint32), 4u);
  EXPECT_EQ(dtype_size(mycollFloat64), 8u);
  EXPECT_EQ(dtype_size(mycollFloat8e4m3), 1u);
  EXPECT_EQ(dtype_size(mycollFloat8e5m2), 1u);
  EXPECT_EQ(dtype_size(static_cast<mycollDataType_t>(mycollNumTypes)), 0u);
  EXPECT_STREQ(dtype_name(mycollBfloat16), "bfloat16");
  EXPECT_STREQ(dtype_name(mycollFloat8e4m3), "float8e4m3");
  EXPECT_STREQ(redop_name(mycollAvg), "avg");
}

// core/dtype.h: the kind of every type, and every valid type has a size and a name.
TEST(Dtype, KindsAndCompleteness) {
  static_assert(dtype_size(mycollFloat32) == 4, "constexpr");
  for (int i = 0; i < mycollNumTypes; ++i) {
    const auto t = static_cast<mycollDataType_t>(i);
    EXPECT_TRUE(dtype_valid(t));
    EXPECT_GT(dtype_size(t), 0u) << i;
    EXPECT_STRNE(dtype_name(t), "invalid-type") << i;
  }
  EXPECT_FALSE(dtype_valid(static_cast<mycollDataType_t>(-1)));
  EXPECT_FALSE(dtype_valid(static_cast<mycollDataType_t>(mycollNumTypes)));
  for (auto t : {mycollFloat16, mycollFloat32, mycollFloat64, mycollBfloat16, mycollFloat8e4m3,
                 mycollFloat8e5m2})
    EXPECT_TRUE(dtype_is_float(t) && dtype_is_signed(t)) << dtype_name(t);
  for (auto t : {mycollInt8, mycollInt32, mycollInt64})
    EXPECT_TRUE(!dtype_is_float(t) && dtype_is_signed(t)) << dtype_name(t);
  for (auto t : {mycollUint8, mycollUint32, mycollUint64})
    EXPECT_TRUE(!dtype_is_float(t) && !dtype_is_signed(t)) << dtype_name(t);
}

// ---- scale_avg ---------------------------------------------------------------

// Truncation toward zero written without relying on C's '/' on negatives.
template <typename T>
T ref_trunc_div(T x, int d) {
  const bool neg = x < 0;
  const unsigned __int128 mag = neg ? (unsigned __int128)(-(__int128)x) : (unsigned __int128)x;
  const __int128 q = (__int128)(mag / (unsigned)d);
  return T(neg ? -q : q);
}

template <typename T>
void run_scale_int(mycollDataType_t t) {
  std::mt19937_64 rng(99 + t);
  for (int div : {1, 2, 3, 7, 8, 1000}) {
    for (size_t n : kSizes) {
      std::vector<T> v;
      fill(v, n, rng, t);
      if (n > 3) {
        v[0] = std::numeric_limits<T>::min();
        v[1] = std::numeric_limits<T>::max();
        if constexpr (std::is_signed_v<T>) v[2] = T(-7);
      }
      std::vector<T> d = v;
      scale_avg_host(t, d.data(), n, div);
      for (size_t i = 0; i < n; ++i)
        ASSERT_EQ(d[i], ref_trunc_div<T>(v[i], div))
            << dtype_name(t) << " div=" << div << " i=" << i << " v=" << +v[i];
    }
  }
}

TEST(Reduce, ScaleAvgIntegers) {
  for_each_isa([] {
    int8_t x[] = {-7, 7, -1, -128};
    scale_avg_host(mycollInt8, x, 4, 2);
    EXPECT_EQ(x[0], -3);
    EXPECT_EQ(x[1], 3);
    EXPECT_EQ(x[2], 0);
    EXPECT_EQ(x[3], -64);
    run_scale_int<int8_t>(mycollInt8);
    run_scale_int<uint8_t>(mycollUint8);
    run_scale_int<int32_t>(mycollInt32);
    run_scale_int<uint32_t>(mycollUint32);
    run_scale_int<int64_t>(mycollInt64);
    run_scale_int<uint64_t>(mycollUint64);
  });
}

TEST(Reduce, ScaleAvgFloats) {
  for_each_isa([] {
    std::mt19937_64 rng(5);
    for (int div : {1, 2, 3, 7, 1000}) {
      for (size_t n : kSizes) {
        std::vector<float> f;
        std::vector<double> g;
        fill(f, n, rng, mycollFloat32);
        fill(g, n, rng, mycollFloat64);
        std::vector<float> df = f;
        std::vector<double> dg = g;
        scale_avg_host(mycollFloat32, df.data(), n, div);
        scale_avg_host(mycollFloat64, dg.data(), n, div);
        for (size_t i = 0; i < n; ++i) {
          ASSERT_TRUE(same(df[i], float(double(f[i]) / div))) << "f32 div=" << div << " i=" << i;
          ASSERT_TRUE(same(dg[i], g[i] / div)) << "f64 div=" << div << " i=" << i;
        }
        // fp16 / bf16: every pattern once per size class, against double / div rounded once.
        for (const auto& [t, fmt] : {std::pair{mycollFloat16, kHalf}, {mycollBfloat16, kBf16}}) {
          std::vector<uint16_t> h(n);
          for (auto& x : h) x = uint16_t(rng());
          std::vector<uint16_t> dh = h;
          scale_avg_host(t, dh.data(), n, div);
          for (size_t i = 0; i < n; ++i) {
            const uint16_t want = ref_encode(fmt, ref_decode(fmt, h[i]) / div);
            if (is_nan16(fmt, h[i]))
              ASSERT_TRUE(is_nan16(fmt, dh[i]));
            else
              ASSERT_EQ(dh[i], want)
                  << dtype_name(t) << " div=" << div << std::hex << " x=0x" << h[i];
          }
        }
      }
    }
  });
}

// copy_host: every byte of the destination and of a guard band around it
// checked against the source, for lengths around the streaming loop's 64-byte
// steps, every dst and src offset mod 16, streaming forced (stream_min 1)
// and off (0); overlapping ranges (both directions) take memmove's path.
TEST(CopyHost, EveryByteEveryAlignment) {
  std::mt19937 rng(7);
  const size_t kGuard = 80;
  for (size_t n : {size_t(0), size_t(1), size_t(15), size_t(127), size_t(128), size_t(129),
                   size_t(191), size_t(1000), size_t(4097), size_t(65536 + 33)}) {
    std::vector<uint8_t> src(n + 32);
    for (auto& b : src) b = uint8_t(rng());
    for (size_t so = 0; so < 16; so += 3) {
      for (size_t dof = 0; dof < 16; ++dof) {
        for (size_t smin : {size_t(0), size_t(1), n + 1}) {
          std::vector<uint8_t> dst(n + 2 * kGuard, 0xA5);
          copy_host(dst.data() + kGuard + dof, src.data() + so, n, smin);
          for (size_t i = 0; i < dst.size(); ++i) {
            const bool in = i >= kGuard + dof && i < kGuard + dof + n;
            const uint8_t want = in ? src[so + i - kGuard - dof] : 0xA5;
            ASSERT_EQ(dst[i], want) << "n=" << n << " src+" << so << " dst+" << dof
                                    << " stream_min=" << smin << " byte " << i;
          }
        }
      }
    }
  }
}

TEST(CopyHost, OverlapsActAsMemmove) {
  for (size_t n : {size_t(200), size_t(5000)}) {
    for (long shift : {-65L, -1L, 1L, 17L, 64L}) {
      std::vector<uint8_t> buf(n + 200), want;
      for (size_t i = 0; i < buf.size(); ++i) buf[i] = uint8_t(i * 31 + 7);
      want = buf;
      const size_t from = 100, to = size_t(long(from) + shift);
      std::memmove(want.data() + to, want.data() + from, n);
      copy_host(buf.data() + to, buf.data() + from, n, 1);
      ASSERT_EQ(buf, want) << "n=" << n << " shift=" << shift;
    }
  }
}

}  // namespace
}  // namespace mycoll
