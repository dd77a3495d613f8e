// CPU reductions for every data type x operation (see reduce.h).
//
// Design:
//  - One templated element loop per (type, op, aliasing case). Each loop runs
//    over plain arrays with __restrict on every pointer that is really
//    distinct, so GCC vectorises it without runtime alias checks. The three
//    legal aliasing cases (dst == a, dst == b, dst == a == b) get their own
//    loop where the aliased operand is read through dst itself.
//  - Every loop is compiled twice: for the baseline ISA and for AVX2 (chosen
//    once at first use with __builtin_cpu_supports). Both use the same scalar
//    code, so results are bit-identical whichever runs. The AVX2 table swaps
//    in hand-written loops for bf16 (same integer rounding, bit-identical)
//    and, with F16C, for fp16 (hardware conversions, much faster than the
//    software ones, docs/performance.md; a signalling NaN comes out quiet).
//    Tests run every path (set_reduce_isa).
//  - Misaligned pointers (legal: transports hand out ring positions) go
//    through aligned bounce buffers.
//  - fp16/bf16 are computed in fp32 and rounded to nearest even. The
//    conversions are branch-free integer code (plus one exact fp32 add or
//    subtract for subnormals) so they vectorise and ignore FTZ/DAZ modes.
//    fp32 holds >= 2p+2 bits of an fp16 (p=11) or bf16 (p=8) significand,
//    so one +, *, / in fp32 followed by rounding equals the correctly
//    rounded result (no double-rounding error).
//
// Rules the tests check:
//  - Integer Sum/Prod wrap modulo 2^bits (computed in unsigned arithmetic).
//  - Float Max/Min: NaN propagates. max(a,b) = b if b is NaN, else a if a is
//    NaN, else the larger (a when equal, so max(-0,+0) = -0; min likewise).
//  - NaN conversions keep the sign and the top payload bits; a payload that
//    would become zero is made quiet (fp16 0x200, bf16 0x40) so the value
//    stays NaN. Hence fp16/bf16 -> fp32 -> fp16/bf16 is the identity for all
//    65536 bit patterns.
#include "engine/reduce.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <type_traits>

#include "base/error.h"
#include "engine/fp8.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#endif

// RelWithDebInfo builds with -O2, where GCC 12 only vectorises loops that
// need no scalar epilogue; these loops are the hot path, so ask for -O3.
#pragma GCC optimize("O3")

namespace mycoll {
namespace {

#define MYCOLL_INLINE inline __attribute__((always_inline))

template <typename To, typename From>
MYCOLL_INLINE To bit_cast_(From f) {
  static_assert(sizeof(To) == sizeof(From), "size mismatch");
  To t;
  std::memcpy(&t, &f, sizeof(To));
  return t;
}

// ---- fp16 / bf16 <-> fp32, branch-free -------------------------------------

// Bitwise select. Plain ?: lets GCC turn the fp32 add/subtract below into a
// branch (it may trap), which blocks vectorisation; masks keep it straight.
MYCOLL_INLINE uint32_t sel(bool c, uint32_t x, uint32_t y) {
  const uint32_t m = 0u - uint32_t(c);
  return (x & m) | (y & ~m);
}

MYCOLL_INLINE float h2f(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t em = uint32_t(h & 0x7fffu) << 13;  // exponent+mantissa at fp32 position
  const uint32_t exp = em & 0x0f800000u;
  const uint32_t normal = em + (112u << 23);  // rebias 15 -> 127
  const uint32_t infnan = em + (224u << 23);  // exponent 31 -> 255
  // Subnormal (and zero): m * 2^-24 computed exactly as (1 + m/1024) * 2^-14 - 2^-14;
  // every operand and the result are normal fp32, so FTZ/DAZ cannot interfere.
  const float sub = bit_cast_<float>(em + (113u << 23)) - bit_cast_<float>(113u << 23);
  uint32_t r = sel(exp == 0x0f800000u, infnan, normal);
  r = sel(exp == 0, bit_cast_<uint32_t>(sub), r);
  return bit_cast_<float>(r | sign);
}

MYCOLL_INLINE uint16_t f2h(float f) {
  const uint32_t x = bit_cast_<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t a = x & 0x7fffffffu;
  // NaN: keep the top 10 payload bits, make quiet if they are all zero.
  const uint32_t payload = (a >> 13) & 0x3ffu;
  const uint32_t nan = 0x7c00u | payload | (payload == 0 ? 0x200u : 0u);
  // Normal half range: rebias and round to nearest even on the 13 dropped
  // bits; a carry out of the mantissa correctly bumps the exponent (up to
  // 0x7c00 = Inf for values in [65520, 65536)).
  const uint32_t normal = (a - (112u << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13;
  // Below 2^-14 (half subnormal or zero): adding 0.5 makes the fp32 ulp
  // 2^-24, the half subnormal step, so the FPU rounds (nearest even); the
  // low mantissa bits are then the half's bits (0x400 when it rounds up to
  // the smallest normal).
  const uint32_t sub = bit_cast_<uint32_t>(bit_cast_<float>(a) + 0.5f) - bit_cast_<uint32_t>(0.5f);
  uint32_t r = sel(a >= 0x38800000u, normal, sub);
  r = sel(a >= 0x47800000u, 0x7c00u, r);  // >= 65536: Inf
  r = sel(a > 0x7f800000u, nan, r);
  return uint16_t(r | sign);
}

MYCOLL_INLINE float bf2f(uint16_t b) { return bit_cast_<float>(uint32_t(b) << 16); }

MYCOLL_INLINE uint16_t f2bf(float f) {
  const uint32_t x = bit_cast_<uint32_t>(f);
  const uint32_t hi = x >> 16;
  const uint32_t nan = hi | ((hi & 0x7fu) == 0 ? 0x40u : 0u);
  // Round to nearest even on the low 16 bits; the carry may reach the
  // exponent (and Inf), never past the sign for non-NaN inputs.
  const uint32_t rounded = (x + 0x7fffu + (hi & 1u)) >> 16;
  return uint16_t(sel((x & 0x7fffffffu) > 0x7f800000u, nan, rounded));
}

// ---- element types ---------------------------------------------------------
// Storage: what is in memory. Compute: what the operation works on.

template <typename T>
struct Native {
  using Storage = T;
  using Compute = T;
  static MYCOLL_INLINE T load(T v) { return v; }
  static MYCOLL_INLINE T store(T v) { return v; }
};
struct Fp16 {
  using Storage = uint16_t;
  using Compute = float;
  static MYCOLL_INLINE float load(uint16_t v) { return h2f(v); }
  static MYCOLL_INLINE uint16_t store(float v) { return f2h(v); }
};
struct Bf16 {
  using Storage = uint16_t;
  using Compute = float;
  static MYCOLL_INLINE float load(uint16_t v) { return bf2f(v); }
  static MYCOLL_INLINE uint16_t store(float v) { return f2bf(v); }
};
// fp8: computed in fp32, rounded to nearest even with saturation (fp8.h).
template <typename F>
struct Fp8 {
  using Storage = uint8_t;
  using Compute = float;
  static MYCOLL_INLINE float load(uint8_t v) { return F::decode(v); }
  static MYCOLL_INLINE uint8_t store(float v) { return F::encode(v); }
};

// ---- operations ------------------------------------------------------------

struct OpSum {
  template <typename T>
  static MYCOLL_INLINE T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return T(U(a) + U(b));  // wraps, no signed-overflow UB
    } else {
      return a + b;
    }
  }
};
struct OpProd {
  template <typename T>
  static MYCOLL_INLINE T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      // uint8 promotes to int (255*255 fits); 32/64-bit stay unsigned.
      using U = std::make_unsigned_t<T>;
      return T(U(a) * U(b));
    } else {
      return a * b;
    }
  }
};
// Float select through the bits (see sel): keeps GCC from branching when the
// operands come out of the fp16 conversion.
// (double keeps ?:, which vectorises better where 64-bit integer compares
// are missing, e.g. baseline SSE2.)
template <typename T>
MYCOLL_INLINE T fsel(bool c, T x, T y) {
  if constexpr (sizeof(T) == 4) {
    return bit_cast_<T>(sel(c, bit_cast_<uint32_t>(x), bit_cast_<uint32_t>(y)));
  } else {
    return c ? x : y;
  }
}

struct OpMax {
  template <typename T>
  static MYCOLL_INLINE T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return a < b ? b : a;
    } else {
      return fsel((b != b) | (a < b), b, a);  // a NaN a falls through as a
    }
  }
};
struct OpMin {
  template <typename T>
  static MYCOLL_INLINE T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return b < a ? b : a;
    } else {
      return fsel((b != b) | (b < a), b, a);
    }
  }
};

// ---- loops -----------------------------------------------------------------
// Alias: 0 = all distinct, 1 = dst == a, 2 = dst == b, 3 = dst == a == b.

template <typename E, typename Op, typename S = typename E::Storage>
MYCOLL_INLINE void loop_abc(S* __restrict d, const S* __restrict x, const S* __restrict y,
                            size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = E::store(Op::apply(E::load(x[i]), E::load(y[i])));
}
template <typename E, typename Op, bool DstIsA, typename S = typename E::Storage>
MYCOLL_INLINE void loop_inplace(S* __restrict d, const S* __restrict y, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const auto dv = E::load(d[i]);
    const auto yv = E::load(y[i]);
    d[i] = E::store(DstIsA ? Op::apply(dv, yv) : Op::apply(yv, dv));
  }
}
template <typename E, typename Op, typename S = typename E::Storage>
MYCOLL_INLINE void loop_self(S* __restrict d, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const auto v = E::load(d[i]);
    d[i] = E::store(Op::apply(v, v));
  }
}

template <typename E, typename Op, int Alias>
MYCOLL_INLINE void reduce_loop(void* dst, const void* a, const void* b, size_t n) {
  using S = typename E::Storage;
  S* d = static_cast<S*>(dst);
  const S* x = static_cast<const S*>(a);
  const S* y = static_cast<const S*>(b);
  if constexpr (Alias == 0) {
    loop_abc<E, Op>(d, x, y, n);
  } else if constexpr (Alias == 1) {
    loop_inplace<E, Op, true>(d, y, n);
  } else if constexpr (Alias == 2) {
    loop_inplace<E, Op, false>(d, x, n);
  } else {
    loop_self<E, Op>(d, n);
  }
}

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

template <typename E, typename Op, int Alias>
void reduce_base(void* d, const void* a, const void* b, size_t n) {
  reduce_loop<E, Op, Alias>(d, a, b, n);
}
#if defined(__x86_64__) && defined(__GNUC__)
#define MYCOLL_HAVE_AVX2_PATH 1
template <typename E, typename Op, int Alias>
__attribute__((target("avx2"))) void reduce_avx2(void* d, const void* a, const void* b, size_t n) {
  reduce_loop<E, Op, Alias>(d, a, b, n);
}
#endif

// Scale: d[i] = d[i] / divisor.
template <typename E>
MYCOLL_INLINE void scale_loop(void* dst, size_t n, int divisor) {
  using S = typename E::Storage;
  using C = typename E::Compute;
  S* __restrict d = static_cast<S*>(dst);
  if constexpr (std::is_integral_v<C>) {
    // Truncates toward zero (C semantics). Small types divide in int (their
    // promoted type), which cannot overflow for divisor > 0.
    using W = std::conditional_t<(sizeof(C) < sizeof(int)), int, C>;
    const W div = W(divisor);
    for (size_t i = 0; i < n; ++i) d[i] = S(W(d[i]) / div);
  } else {
    const C div = C(divisor);
    for (size_t i = 0; i < n; ++i) d[i] = E::store(E::load(d[i]) / div);
  }
}

using ScaleFn = void (*)(void*, size_t, int);

template <typename E>
void scale_base(void* d, size_t n, int divisor) {
  scale_loop<E>(d, n, divisor);
}
#ifdef MYCOLL_HAVE_AVX2_PATH
template <typename E>
__attribute__((target("avx2"))) void scale_avx2(void* d, size_t n, int divisor) {
  scale_loop<E>(d, n, divisor);
}
#endif

// ---- fp16 with F16C ----------------------------------------------------------
// vcvtph2ps / vcvtps2ph (immediate round-to-nearest-even, not MXCSR; fp16
// subnormals handled in hardware regardless of DAZ/FTZ) give the same values
// as the software path; the only difference is that a signalling NaN comes
// out quiet. Each block of 8 loads both inputs before storing, so one loop
// serves every legal aliasing form; the tail goes through a padded block so
// every element takes the same path.
#ifdef MYCOLL_HAVE_AVX2_PATH
struct VecSum {
  static __attribute__((target("avx2"), always_inline)) inline __m256 apply(__m256 a, __m256 b) {
    return _mm256_add_ps(a, b);
  }
};
struct VecProd {
  static __attribute__((target("avx2"), always_inline)) inline __m256 apply(__m256 a, __m256 b) {
    return _mm256_mul_ps(a, b);
  }
};
struct VecMax {  // same NaN rule as OpMax
  static __attribute__((target("avx2"), always_inline)) inline __m256 apply(__m256 a, __m256 b) {
    const __m256 take_b =
        _mm256_or_ps(_mm256_cmp_ps(b, b, _CMP_UNORD_Q), _mm256_cmp_ps(a, b, _CMP_LT_OQ));
    return _mm256_blendv_ps(a, b, take_b);
  }
};
struct VecMin {
  static __attribute__((target("avx2"), always_inline)) inline __m256 apply(__m256 a, __m256 b) {
    const __m256 take_b =
        _mm256_or_ps(_mm256_cmp_ps(b, b, _CMP_UNORD_Q), _mm256_cmp_ps(b, a, _CMP_LT_OQ));
    return _mm256_blendv_ps(a, b, take_b);
  }
};

template <typename V>
__attribute__((target("avx2,f16c"), always_inline)) inline void f16c_block(uint16_t* d,
                                                                           const uint16_t* a,
                                                                           const uint16_t* b) {
  const __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a)));
  const __m256 y = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b)));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(d),
                   _mm256_cvtps_ph(V::apply(x, y), _MM_FROUND_TO_NEAREST_INT));
}

template <typename V>
__attribute__((target("avx2,f16c"))) void reduce_f16c(void* dst, const void* a, const void* b,
                                                      size_t n) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  const uint16_t* x = static_cast<const uint16_t*>(a);
  const uint16_t* y = static_cast<const uint16_t*>(b);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    f16c_block<V>(d + i, x + i, y + i);
    f16c_block<V>(d + i + 8, x + i + 8, y + i + 8);
  }
  for (; i + 8 <= n; i += 8) f16c_block<V>(d + i, x + i, y + i);
  if (i < n) {
    uint16_t bx[8] = {}, by[8] = {}, bd[8];
    std::memcpy(bx, x + i, (n - i) * 2);
    std::memcpy(by, y + i, (n - i) * 2);
    f16c_block<V>(bd, bx, by);
    std::memcpy(d + i, bd, (n - i) * 2);
  }
}

__attribute__((target("avx2,f16c"))) void scale_f16c(void* dst, size_t n, int divisor) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  const __m256 div = _mm256_set1_ps(float(divisor));
  auto block = [div](uint16_t * p) __attribute__((target("avx2,f16c"))) {
    const __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                     _mm256_cvtps_ph(_mm256_div_ps(v, div), _MM_FROUND_TO_NEAREST_INT));
  };
  size_t i = 0;
  for (; i + 8 <= n; i += 8) block(d + i);
  if (i < n) {
    uint16_t buf[8] = {};
    std::memcpy(buf, d + i, (n - i) * 2);
    block(buf);
    std::memcpy(d + i, buf, (n - i) * 2);
  }
}
#endif

// ---- bf16 with AVX2 ------------------------------------------------------------
// bf16 -> fp32 is "shift left by 16": interleaving zero words below the
// inputs does it for 16 values at once; fp32 -> bf16 uses the same integer
// rounding and NaN rule as f2bf, then packs back in the original order
// (unpack and pack both work per 128-bit lane). Bit-identical to the
// software path.
#ifdef MYCOLL_HAVE_AVX2_PATH
__attribute__((target("avx2"), always_inline)) inline __m256i f32_to_bf16_bits(__m256 r) {
  const __m256i x = _mm256_castps_si256(r);
  const __m256i hi = _mm256_srli_epi32(x, 16);
  const __m256i rounded =
      _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)),
                                         _mm256_and_si256(hi, _mm256_set1_epi32(1))),
                        16);
  const __m256i payload_zero =
      _mm256_cmpeq_epi32(_mm256_and_si256(hi, _mm256_set1_epi32(0x7f)), _mm256_setzero_si256());
  const __m256i nan = _mm256_or_si256(hi, _mm256_and_si256(payload_zero, _mm256_set1_epi32(0x40)));
  const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff)),
                                            _mm256_set1_epi32(0x7f800000));
  return _mm256_blendv_epi8(rounded, nan, is_nan);
}

template <typename V>
__attribute__((target("avx2"), always_inline)) inline void bf16_block(uint16_t* d,
                                                                      const uint16_t* a,
                                                                      const uint16_t* b) {
  const __m256i zero = _mm256_setzero_si256();
  const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a));
  const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
  const __m256 rl = V::apply(_mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, x)),
                             _mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, y)));
  const __m256 rh = V::apply(_mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, x)),
                             _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, y)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(d),
                      _mm256_packus_epi32(f32_to_bf16_bits(rl), f32_to_bf16_bits(rh)));
}

template <typename V>
__attribute__((target("avx2"))) void reduce_bf16_avx2(void* dst, const void* a, const void* b,
                                                      size_t n) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  const uint16_t* x = static_cast<const uint16_t*>(a);
  const uint16_t* y = static_cast<const uint16_t*>(b);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) bf16_block<V>(d + i, x + i, y + i);
  if (i < n) {
    uint16_t bx[16] = {}, by[16] = {}, bd[16];
    std::memcpy(bx, x + i, (n - i) * 2);
    std::memcpy(by, y + i, (n - i) * 2);
    bf16_block<V>(bd, bx, by);
    std::memcpy(d + i, bd, (n - i) * 2);
  }
}
#endif

// ---- dispatch tables -------------------------------------------------------

constexpr int kTypes = mycollNumTypes;
constexpr int kOps = 4;  // Sum, Prod, Max, Min (Avg runs as Sum)

struct Tables {
  ReduceFn reduce[kTypes][kOps][4];
  ScaleFn scale[kTypes];
};

template <bool Avx2, typename E, typename Op>
void fill_op(ReduceFn (&slot)[4]) {
#ifdef MYCOLL_HAVE_AVX2_PATH
  if constexpr (Avx2) {
    slot[0] = reduce_avx2<E, Op, 0>;
    slot[1] = reduce_avx2<E, Op, 1>;
    slot[2] = reduce_avx2<E, Op, 2>;
    slot[3] = reduce_avx2<E, Op, 3>;
    return;
  }
#endif
  slot[0] = reduce_base<E, Op, 0>;
  slot[1] = reduce_base<E, Op, 1>;
  slot[2] = reduce_base<E, Op, 2>;
  slot[3] = reduce_base<E, Op, 3>;
}

template <bool Avx2, typename E>
void fill_type(Tables& t, int type) {
  fill_op<Avx2, E, OpSum>(t.reduce[type][mycollSum]);
  fill_op<Avx2, E, OpProd>(t.reduce[type][mycollProd]);
  fill_op<Avx2, E, OpMax>(t.reduce[type][mycollMax]);
  fill_op<Avx2, E, OpMin>(t.reduce[type][mycollMin]);
#ifdef MYCOLL_HAVE_AVX2_PATH
  if constexpr (Avx2) {
    t.scale[type] = scale_avx2<E>;
    return;
  }
#endif
  t.scale[type] = scale_base<E>;
}

template <bool Avx2>
Tables make_tables() {
  Tables t{};
  fill_type<Avx2, Native<int8_t>>(t, mycollInt8);
  fill_type<Avx2, Native<uint8_t>>(t, mycollUint8);
  fill_type<Avx2, Native<int32_t>>(t, mycollInt32);
  fill_type<Avx2, Native<uint32_t>>(t, mycollUint32);
  fill_type<Avx2, Native<int64_t>>(t, mycollInt64);
  fill_type<Avx2, Native<uint64_t>>(t, mycollUint64);
  fill_type<Avx2, Fp16>(t, mycollFloat16);
  fill_type<Avx2, Native<float>>(t, mycollFloat32);
  fill_type<Avx2, Native<double>>(t, mycollFloat64);
  fill_type<Avx2, Bf16>(t, mycollBfloat16);
  fill_type<Avx2, Fp8<fp8::E4M3>>(t, mycollFloat8e4m3);
  fill_type<Avx2, Fp8<fp8::E5M2>>(t, mycollFloat8e5m2);
  return t;
}

// Hand-written AVX2 loops replace the generic ones where they are faster.
Tables make_avx2_tables(bool f16c) {
  Tables t = make_tables<true>();
#ifdef MYCOLL_HAVE_AVX2_PATH
  auto set = [&t](mycollDataType_t type, mycollRedOp_t op, ReduceFn f) {
    for (auto& slot : t.reduce[type][op]) slot = f;
  };
  set(mycollBfloat16, mycollSum, reduce_bf16_avx2<VecSum>);
  set(mycollBfloat16, mycollProd, reduce_bf16_avx2<VecProd>);
  set(mycollBfloat16, mycollMax, reduce_bf16_avx2<VecMax>);
  set(mycollBfloat16, mycollMin, reduce_bf16_avx2<VecMin>);
  if (f16c) {
    set(mycollFloat16, mycollSum, reduce_f16c<VecSum>);
    set(mycollFloat16, mycollProd, reduce_f16c<VecProd>);
    set(mycollFloat16, mycollMax, reduce_f16c<VecMax>);
    set(mycollFloat16, mycollMin, reduce_f16c<VecMin>);
    t.scale[mycollFloat16] = scale_f16c;
  }
#endif
  return t;
}

ReduceIsa best_isa() {
#ifdef MYCOLL_HAVE_AVX2_PATH
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2")) {
    // F16C: CPUID leaf 1, ECX bit 29 (clang 14's __builtin_cpu_supports has no "f16c").
    unsigned a = 0, b = 0, c = 0, d = 0;
    const bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
    return f16c ? ReduceIsa::Avx2F16c : ReduceIsa::Avx2;
  }
#endif
  return ReduceIsa::Baseline;
}

const Tables& tables_for(ReduceIsa isa) {
  static const Tables base = make_tables<false>();
  static const Tables avx2 = make_avx2_tables(false);
  static const Tables f16c = make_avx2_tables(true);
  switch (isa) {
    case ReduceIsa::Avx2: return avx2;
    case ReduceIsa::Avx2F16c: return f16c;
    default: return base;
  }
}

std::atomic<const Tables*> g_tables{nullptr};

const Tables& tables() {
  const Tables* t = g_tables.load(std::memory_order_acquire);
  if (!t) {
    t = &tables_for(best_isa());
    g_tables.store(t, std::memory_order_release);
  }
  return *t;
}

// Inputs may sit at any byte address (e.g. straight out of a transport's
// ring buffer after a message of odd length); the typed loops need natural
// alignment. Misaligned calls go through aligned bounce buffers, a block at
// a time (elementwise, so exact dst == a / dst == b aliasing stays correct).
constexpr size_t kBounceBytes = 4096;

// es is an element size: a power of two (a mask, not a division: this runs
// three times per reduction, small-message calls included).
bool misaligned(const void* p, size_t es) {
  return (reinterpret_cast<uintptr_t>(p) & (es - 1)) != 0;
}

void reduce_unaligned(ReduceFn fn, size_t es, void* dst, const void* a, const void* b, size_t n) {
  alignas(64) uint8_t ba[kBounceBytes], bb[kBounceBytes], bd[kBounceBytes];
  const size_t per = kBounceBytes / es;
  for (size_t i = 0; i < n; i += per) {
    const size_t k = std::min(per, n - i);
    std::memcpy(ba, static_cast<const uint8_t*>(a) + i * es, k * es);
    std::memcpy(bb, static_cast<const uint8_t*>(b) + i * es, k * es);
    fn(bd, ba, bb, k);
    std::memcpy(static_cast<uint8_t*>(dst) + i * es, bd, k * es);
  }
}

void scale_unaligned(ScaleFn fn, size_t es, void* dst, size_t n, int divisor) {
  alignas(64) uint8_t bd[kBounceBytes];
  const size_t per = kBounceBytes / es;
  for (size_t i = 0; i < n; i += per) {
    const size_t k = std::min(per, n - i);
    std::memcpy(bd, static_cast<uint8_t*>(dst) + i * es, k * es);
    fn(bd, k, divisor);
    std::memcpy(static_cast<uint8_t*>(dst) + i * es, bd, k * es);
  }
}

void check_type(mycollDataType_t t, const char* what) {
  if (!dtype_valid(t))
    throw_error(mycollInvalidArgument,
                std::string(what) + ": invalid data type " + std::to_string(static_cast<int>(t)));
}

}  // namespace

void reduce_host(mycollDataType_t t, mycollRedOp_t op, void* dst, const void* a, const void* b,
                 size_t n) {
  check_type(t, "reduce_host");
  if (static_cast<int>(op) < 0 || static_cast<int>(op) >= mycollNumOps)
    throw_error(mycollInvalidArgument,
                "reduce_host: invalid reduction op " + std::to_string(static_cast<int>(op)));
  if (n == 0) return;
  check_arg(dst && a && b,
            [&] { return "reduce_host: null buffer with count " + std::to_string(n); });
  const size_t bytes = n * dtype_size(t);
  auto d0 = reinterpret_cast<uintptr_t>(dst);
  auto overlaps_partially = [&](const void* p) {
    auto s = reinterpret_cast<uintptr_t>(p);
    return s != d0 && s < d0 + bytes && d0 < s + bytes;
  };
  check_arg(!overlaps_partially(a) && !overlaps_partially(b),
            "reduce_host: dst partially overlaps an input (only exact aliasing is allowed)");
  const int o = op == mycollAvg ? static_cast<int>(mycollSum) : static_cast<int>(op);
  const size_t es = dtype_size(t);
  if (misaligned(dst, es) || misaligned(a, es) || misaligned(b, es)) {
    reduce_unaligned(tables().reduce[t][o][0], es, dst, a, b, n);
    return;
  }
  const int alias = (dst == a ? 1 : 0) | (dst == b ? 2 : 0);
  tables().reduce[t][o][alias](dst, a, b, n);
}

void scale_avg_host(mycollDataType_t t, void* dst, size_t n, int divisor) {
  check_type(t, "scale_avg_host");
  check_arg(divisor > 0, "scale_avg_host: divisor must be > 0, got " + std::to_string(divisor));
  if (n == 0 || divisor == 1) return;
  check_arg(dst != nullptr, "scale_avg_host: null buffer with count " + std::to_string(n));
  const size_t es = dtype_size(t);
  if (misaligned(dst, es)) {
    scale_unaligned(tables().scale[t], es, dst, n, divisor);
    return;
  }
  tables().scale[t](dst, n, divisor);
}

namespace {
// dst[i] = src[i] * scalar, element loads through memcpy (any alignment,
// dst == src allowed).
template <typename E>
void premul_loop(void* dst, const void* src, size_t n, const void* scalar) {
  using S = typename E::Storage;
  S sv;
  std::memcpy(&sv, scalar, sizeof(S));
  const auto k = E::load(sv);
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  for (size_t i = 0; i < n; ++i) {
    S v;
    std::memcpy(&v, s + i * sizeof(S), sizeof(S));
    v = E::store(OpProd::apply(E::load(v), k));
    std::memcpy(d + i * sizeof(S), &v, sizeof(S));
  }
}
}  // namespace

void premul_host(mycollDataType_t t, void* dst, const void* src, size_t n, const void* scalar) {
  check_type(t, "premul_host");
  if (n == 0) return;
  check_arg(dst && src && scalar,
            "premul_host: null buffer or scalar with count " + std::to_string(n));
  switch (t) {
    case mycollInt8: return premul_loop<Native<int8_t>>(dst, src, n, scalar);
    case mycollUint8: return premul_loop<Native<uint8_t>>(dst, src, n, scalar);
    case mycollInt32: return premul_loop<Native<int32_t>>(dst, src, n, scalar);
    case mycollUint32: return premul_loop<Native<uint32_t>>(dst, src, n, scalar);
    case mycollInt64: return premul_loop<Native<int64_t>>(dst, src, n, scalar);
    case mycollUint64: return premul_loop<Native<uint64_t>>(dst, src, n, scalar);
    case mycollFloat16: return premul_loop<Fp16>(dst, src, n, scalar);
    case mycollFloat32: return premul_loop<Native<float>>(dst, src, n, scalar);
    case mycollFloat64: return premul_loop<Native<double>>(dst, src, n, scalar);
    case mycollBfloat16: return premul_loop<Bf16>(dst, src, n, scalar);
    case mycollFloat8e4m3: return premul_loop<Fp8<fp8::E4M3>>(dst, src, n, scalar);
    case mycollFloat8e5m2: return premul_loop<Fp8<fp8::E5M2>>(dst, src, n, scalar);
    default: break;
  }
}

ReduceIsa reduce_isa() {
  const Tables* t = &tables();
  for (ReduceIsa isa : {ReduceIsa::Baseline, ReduceIsa::Avx2, ReduceIsa::Avx2F16c})
    if (t == &tables_for(isa)) return isa;
  return ReduceIsa::Baseline;
}

ReduceIsa set_reduce_isa(ReduceIsa isa) {
  const ReduceIsa best = best_isa();
  if (static_cast<int>(isa) > static_cast<int>(best)) isa = best;
  g_tables.store(&tables_for(isa), std::memory_order_release);
  return isa;
}

void copy_host(void* dst, const void* src, size_t n, size_t stream_min) {
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  if (n == 0 || d == s) return;
#if defined(__x86_64__) && defined(__GNUC__)
  const uintptr_t di = reinterpret_cast<uintptr_t>(d), si = reinterpret_cast<uintptr_t>(s);
  const bool apart = di + n <= si || si + n <= di;
  if (stream_min > 0 && n >= stream_min && n >= 128 && apart) {
    // SSE2 (every x86-64): unaligned loads, aligned streaming stores from
    // the first 16-byte boundary of dst, plain copies for head and tail.
    const size_t head = (16 - (di & 15)) & 15;
    std::memcpy(d, s, head);
    size_t i = head;
    for (; i + 64 <= n; i += 64) {
      const __m128i v0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
      const __m128i v1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
      const __m128i v2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
      const __m128i v3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), v0);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), v1);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), v2);
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), v3);
    }
    std::memcpy(d + i, s + i, n - i);
    _mm_sfence();  // streaming stores are weakly ordered
    return;
  }
#else
  (void)stream_min;
#endif
  std::memmove(d, s, n);
}

float fp8e4m3_to_float(uint8_t v) { return fp8::E4M3::decode(v); }
uint8_t float_to_fp8e4m3(float f) { return fp8::E4M3::encode(f); }
float fp8e5m2_to_float(uint8_t v) { return fp8::E5M2::decode(v); }
uint8_t float_to_fp8e5m2(float f) { return fp8::E5M2::encode(f); }
float half_to_float(uint16_t h) { return h2f(h); }
uint16_t float_to_half(float f) { return f2h(f); }
float bf16_to_float(uint16_t b) { return bf2f(b); }
uint16_t float_to_bf16(float f) { return f2bf(f); }

}  // namespace mycoll
