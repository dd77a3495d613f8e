// 8-bit floats (OCP FP8) on the host: e4m3 (4 exponent bits, bias 7, no
// infinities, S.1111.111 is NaN, largest finite 448) and e5m2 (5 exponent
// bits, bias 15, IEEE-like infinities and NaNs, largest finite 57344).
//
// Conversions from fp32 round to nearest even and saturate: any magnitude
// above the largest finite value (infinities included) becomes that value
// with its sign; NaN becomes the canonical NaN 0x7f. This is what CUDA's
// __nv_fp8_e4m3 / __nv_fp8_e5m2 constructors do (__NV_SATFINITE), so host
// and GPU reductions agree.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace mycoll {
namespace fp8 {

// Format parameters: exponent bits E, mantissa bits M, bias, whether the
// all-ones exponent encodes Inf/NaN (e5m2) or only S.1111.111 is NaN (e4m3).
template <int E, int M, int Bias, bool IeeeSpecials>
struct Format {
  static constexpr int kExpBits = E, kManBits = M, kBias = Bias;
  static constexpr uint8_t kMaxFinite = IeeeSpecials ? uint8_t(((1 << E) - 2) << M | ((1 << M) - 1))
                                                     : uint8_t(((1 << E) - 1) << M | ((1 << M) - 2));
  static constexpr uint8_t kNaN = 0x7f;

  static float decode(uint8_t v) {
    const float sign = (v & 0x80) ? -1.0f : 1.0f;
    const int e = (v >> M) & ((1 << E) - 1);
    const int m = v & ((1 << M) - 1);
    if (IeeeSpecials && e == (1 << E) - 1) return m == 0 ? sign * INFINITY : NAN;
    if (!IeeeSpecials && e == (1 << E) - 1 && m == (1 << M) - 1) return NAN;
    if (e == 0) return sign * std::ldexp(float(m), 1 - Bias - M);
    return sign * std::ldexp(float((1 << M) | m), e - Bias - M);
  }

  static uint8_t encode(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    const uint8_t sign = uint8_t((x >> 24) & 0x80u);
    const uint32_t a = x & 0x7fffffffu;
    if (a > 0x7f800000u) return kNaN;
    float af;
    std::memcpy(&af, &a, 4);
    if (af > decode(kMaxFinite)) return uint8_t(sign | kMaxFinite);  // saturate (Inf too)
    const int e = int(a >> 23) - 127;                                 // unbiased exponent
    if (e >= 1 - Bias) {
      // Normal: keep M mantissa bits, round to nearest even; a carry out of
      // the mantissa correctly bumps the exponent (never past kMaxFinite,
      // larger values were saturated above).
      constexpr int shift = 23 - M;
      const uint32_t r = a + ((1u << (shift - 1)) - 1) + ((a >> shift) & 1u);
      return uint8_t(sign | ((r >> shift) - (uint32_t(127 - Bias) << M)));
    }
    // Subnormal: the value is m * 2^(1 - Bias - M); scale by a power of two
    // (exact) and round to the nearest even integer. m == 2^M is the
    // smallest normal, whose encoding is the same number.
    const float scaled = std::ldexp(af, Bias - 1 + M);
    return uint8_t(sign | uint32_t(std::nearbyint(scaled)));
  }
};

using E4M3 = Format<4, 3, 7, false>;
using E5M2 = Format<5, 2, 15, true>;

}  // namespace fp8
}  // namespace mycoll
