// fp8 (e4m3, e5m2) in lib/engine: conversions over every bit pattern and
// every fp32 in a dense sweep against a reference written here (exact
// rationals in double), saturation and NaN rules, every reduction op with
// fp32 accumulation, average, and premul_host for every data type.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/reduce.h"

namespace mycoll {
namespace {

struct F8 {
  int mbits, bias;
  bool ieee;  // e5m2: all-ones exponent is Inf/NaN; e4m3: only S.1111.111 is NaN
  double max_finite;
  float (*to_float)(uint8_t);
  uint8_t (*from_float)(float);
};
const F8 kE4M3{3, 7, false, 448.0, fp8e4m3_to_float, float_to_fp8e4m3};
const F8 kE5M2{2, 15, true, 57344.0, fp8e5m2_to_float, float_to_fp8e5m2};

// Value of a pattern: NaN, +-Inf or sign * m * 2^e exactly.
double ref_value(const F8& f, uint8_t v) {
  const int ebits = 7 - f.mbits;
  const int e = (v >> f.mbits) & ((1 << ebits) - 1), m = v & ((1 << f.mbits) - 1);
  const double s = v & 0x80 ? -1 : 1;
  if (e == (1 << ebits) - 1 && (f.ieee || m == (1 << f.mbits) - 1))
    return f.ieee && m == 0 ? s * INFINITY : NAN;
  if (e == 0) return s * m * std::ldexp(1.0, 1 - f.bias - f.mbits);
  return s * ((1 << f.mbits) + m) * std::ldexp(1.0, e - f.bias - f.mbits);
}

// Nearest pattern by exhaustive search (ties to the even mantissa),
// saturating; NaN -> 0x7f.
uint8_t ref_encode(const F8& f, double x) {
  if (std::isnan(x)) return 0x7f;
  const bool neg = std::signbit(x);
  double a = std::fabs(x);
  if (a > f.max_finite) a = f.max_finite;
  int best = 0;
  double best_d = INFINITY;
  for (int v = 0; v < 0x80; ++v) {
    const double r = ref_value(f, uint8_t(v));
    if (std::isnan(r) || std::isinf(r)) continue;
    const double d = std::fabs(r - a);
    if (d < best_d || (d == best_d && (v & 1) == 0)) best = v, best_d = d;
  }
  return uint8_t(best | (neg ? 0x80 : 0));
}

TEST(Fp8, DecodeEveryPattern) {
  for (const F8* f : {&kE4M3, &kE5M2})
    for (int v = 0; v < 256; ++v) {
      const double want = ref_value(*f, uint8_t(v));
      const float got = f->to_float(uint8_t(v));
      if (std::isnan(want))
        EXPECT_TRUE(std::isnan(got)) << v;
      else
        EXPECT_EQ(double(got), want) << "pattern " << v;
    }
}

TEST(Fp8, EncodeRoundTripsAndRoundsToNearestEven) {
  for (const F8* f : {&kE4M3, &kE5M2}) {
    for (int v = 0; v < 256; ++v) {
      const double x = ref_value(*f, uint8_t(v));
      if (std::isnan(x) || std::isinf(x)) continue;
      EXPECT_EQ(f->from_float(float(x)), uint8_t(v)) << "pattern " << v;
    }
    // Dense sweep, midpoints included: every x = k / 64 over the range and
    // tiny values in steps of the smallest subnormal / 8.
    const double tiny = ref_value(*f, 1) / 8;
    for (int k = -2000; k <= 2000; ++k) {
      for (double x : {k * tiny, k / 64.0, k * 37.0}) {
        const float fx = float(x);
        EXPECT_EQ(f->from_float(fx), ref_encode(*f, fx)) << "x = " << fx;
      }
    }
  }
}

TEST(Fp8, SaturatesAndKeepsNaN) {
  EXPECT_EQ(float_to_fp8e4m3(1e6f), 0x7e);  // 448
  EXPECT_EQ(float_to_fp8e4m3(-1e6f), 0xfe);
  EXPECT_EQ(float_to_fp8e4m3(INFINITY), 0x7e);
  EXPECT_EQ(float_to_fp8e4m3(NAN), 0x7f);
  EXPECT_EQ(float_to_fp8e5m2(1e9f), 0x7b);  // 57344
  EXPECT_EQ(float_to_fp8e5m2(-INFINITY), 0xfb);
  EXPECT_EQ(float_to_fp8e5m2(NAN), 0x7f);
  EXPECT_TRUE(std::isinf(fp8e5m2_to_float(0x7c)));
  EXPECT_TRUE(std::isnan(fp8e4m3_to_float(0xff)));
  EXPECT_EQ(fp8e4m3_to_float(0x7e), 448.0f);
}

TEST(Fp8, EveryOpComputesInFp32AndRounds) {
  const struct {
    const F8* f;
    mycollDataType_t t;
  } types[] = {{&kE4M3, mycollFloat8e4m3}, {&kE5M2, mycollFloat8e5m2}};
  for (const auto& [f, t] : types)
    for (mycollRedOp_t op : {mycollSum, mycollProd, mycollMax, mycollMin}) {
      // Every pair of finite patterns, in one call of 256 x 256 elements.
      std::vector<uint8_t> a, b, d(65536);
      for (int x = 0; x < 256; ++x)
        for (int y = 0; y < 256; ++y) a.push_back(uint8_t(x)), b.push_back(uint8_t(y));
      reduce_host(t, op, d.data(), a.data(), b.data(), a.size());
      for (size_t i = 0; i < a.size(); ++i) {
        const double x = ref_value(*f, a[i]), y = ref_value(*f, b[i]);
        if (std::isnan(x) || std::isnan(y) || std::isinf(x) || std::isinf(y)) continue;
        double r = op == mycollSum ? float(x) + float(y)
                 : op == mycollProd ? float(x) * float(y)
                 : op == mycollMax ? std::max(x, y) : std::min(x, y);
        if (op == mycollMax && x == y) r = x;  // max(-0, +0) keeps the first
        if (op == mycollMin && x == y) r = x;
        ASSERT_EQ(d[i], ref_encode(*f, r)) << dtype_name(t) << " " << redop_name(op) << " "
                                           << x << ", " << y;
      }
    }
}

TEST(Fp8, AverageDividesInFp32) {
  std::vector<uint8_t> v(256);
  for (int i = 0; i < 256; ++i) v[i] = uint8_t(i);
  std::vector<uint8_t> e4 = v, e5 = v;
  scale_avg_host(mycollFloat8e4m3, e4.data(), 256, 3);
  scale_avg_host(mycollFloat8e5m2, e5.data(), 256, 3);
  for (int i = 0; i < 256; ++i) {
    const double x4 = ref_value(kE4M3, uint8_t(i)), x5 = ref_value(kE5M2, uint8_t(i));
    if (!std::isnan(x4)) EXPECT_EQ(e4[i], ref_encode(kE4M3, float(x4) / 3.0f)) << i;
    if (!std::isnan(x5) && !std::isinf(x5)) EXPECT_EQ(e5[i], ref_encode(kE5M2, float(x5) / 3.0f)) << i;
  }
}

TEST(PreMul, EveryTypeInAndOutOfPlace) {
  const size_t n = 1001;
  for (int ti = 0; ti < mycollNumTypes; ++ti) {
    const auto t = static_cast<mycollDataType_t>(ti);
    const size_t es = dtype_size(t);
    // inputs and the scalar as the same small integers in every type
    std::vector<uint8_t> src(n * es), dst(n * es), scalar(8), b(n * es), want(n * es);
    auto put = [&](uint8_t* p, double x) {
      switch (t) {
        case mycollFloat16: { uint16_t h = float_to_half(float(x)); std::memcpy(p, &h, 2); break; }
        case mycollBfloat16: { uint16_t h = float_to_bf16(float(x)); std::memcpy(p, &h, 2); break; }
        case mycollFloat8e4m3: *p = float_to_fp8e4m3(float(x)); break;
        case mycollFloat8e5m2: *p = float_to_fp8e5m2(float(x)); break;
        case mycollFloat32: { float f = float(x); std::memcpy(p, &f, 4); break; }
        case mycollFloat64: std::memcpy(p, &x, 8); break;
        default: { int64_t v = int64_t(x); std::memcpy(p, &v, es); break; }
      }
    };
    const bool small = t == mycollFloat8e5m2 || t == mycollFloat8e4m3;
    put(scalar.data(), small ? 2 : 3);
    for (size_t i = 0; i < n; ++i) {
      const double x = t == mycollUint8 || t == mycollUint32 || t == mycollUint64
                           ? double(i % 7) : double(int(i % 7) - 3);
      put(&src[i * es], x);
      put(&want[i * es], x * (small ? 2 : 3));
    }
    premul_host(t, dst.data(), src.data(), n, scalar.data());
    EXPECT_EQ(0, std::memcmp(dst.data(), want.data(), n * es)) << dtype_name(t);
    b = src;
    premul_host(t, b.data() + 0, b.data(), n, scalar.data());  // in place
    EXPECT_EQ(0, std::memcmp(b.data(), want.data(), n * es)) << dtype_name(t) << " in place";
  }
}

}  // namespace
}  // namespace mycoll
