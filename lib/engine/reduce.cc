// CPU reductions for every data type x operation (see reduce.h).
//
// Design:
//  - One templated element loop per (type, op, aliasing case). Each loop runs
//    over plain arrays with __restrict on every pointer that is really
//    distinct, so GCC vectorises it without runtime alias checks. The three
//    legal aliasing cases (dst == a, dst == b, dst == a == b) get their own
//    loop where the aliased operand is read through dst itself.
//  - Every loop is compiled twice: for the baseline ISA and for AVX2 (chosen
//    once at start-up with __builtin_cpu_supports). Both use the same scalar
//    code, so results are bit-identical whichever runs.
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

#include <cstring>
#include <string>
#include <type_traits>

#include "core/error.h"

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
  const uint32_t normal = em + (112u << 23);          // rebias 15 -> 127
  const uint32_t infnan = em + (224u << 23);          // exponent 31 -> 255
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
  const uint32_t sub =
      bit_cast_<uint32_t>(bit_cast_<float>(a) + 0.5f) - bit_cast_<uint32_t>(0.5f);
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
__attribute__((target("avx2"))) void reduce_avx2(void* d, const void* a, const void* b,
                                                 size_t n) {
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
  return t;
}

const Tables& tables() {
  static const Tables t = [] {
#ifdef MYCOLL_HAVE_AVX2_PATH
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) return make_tables<true>();
#endif
    return make_tables<false>();
  }();
  return t;
}

void check_type(mycollDataType_t t, const char* what) {
  if (static_cast<int>(t) < 0 || static_cast<int>(t) >= kTypes)
    throw_error(mycollInvalidArgument,
                std::string(what) + ": invalid data type " + std::to_string(static_cast<int>(t)));
}

}  // namespace

size_t dtype_size(mycollDataType_t t) {
  switch (t) {
    case mycollInt8: case mycollUint8: return 1;
    case mycollFloat16: case mycollBfloat16: return 2;
    case mycollInt32: case mycollUint32: case mycollFloat32: return 4;
    case mycollInt64: case mycollUint64: case mycollFloat64: return 8;
    default: return 0;
  }
}

const char* dtype_name(mycollDataType_t t) {
  switch (t) {
    case mycollInt8: return "int8";
    case mycollUint8: return "uint8";
    case mycollInt32: return "int32";
    case mycollUint32: return "uint32";
    case mycollInt64: return "int64";
    case mycollUint64: return "uint64";
    case mycollFloat16: return "float16";
    case mycollFloat32: return "float32";
    case mycollFloat64: return "float64";
    case mycollBfloat16: return "bfloat16";
    default: return "invalid-type";
  }
}

const char* redop_name(mycollRedOp_t op) {
  switch (op) {
    case mycollSum: return "sum";
    case mycollProd: return "prod";
    case mycollMax: return "max";
    case mycollMin: return "min";
    case mycollAvg: return "avg";
    default: return "invalid-op";
  }
}

void reduce_host(mycollDataType_t t, mycollRedOp_t op, void* dst, const void* a, const void* b,
                 size_t n) {
  check_type(t, "reduce_host");
  if (static_cast<int>(op) < 0 || static_cast<int>(op) >= mycollNumOps)
    throw_error(mycollInvalidArgument,
                "reduce_host: invalid reduction op " + std::to_string(static_cast<int>(op)));
  if (n == 0) return;
  check_arg(dst && a && b, "reduce_host: null buffer with count " + std::to_string(n));
  const size_t bytes = n * dtype_size(t);
  auto d0 = reinterpret_cast<uintptr_t>(dst);
  auto overlaps_partially = [&](const void* p) {
    auto s = reinterpret_cast<uintptr_t>(p);
    return s != d0 && s < d0 + bytes && d0 < s + bytes;
  };
  check_arg(!overlaps_partially(a) && !overlaps_partially(b),
            "reduce_host: dst partially overlaps an input (only exact aliasing is allowed)");
  const int alias = (dst == a ? 1 : 0) | (dst == b ? 2 : 0);
  const int o = op == mycollAvg ? static_cast<int>(mycollSum) : static_cast<int>(op);
  tables().reduce[t][o][alias](dst, a, b, n);
}

void scale_avg_host(mycollDataType_t t, void* dst, size_t n, int divisor) {
  check_type(t, "scale_avg_host");
  check_arg(divisor > 0, "scale_avg_host: divisor must be > 0, got " + std::to_string(divisor));
  if (n == 0 || divisor == 1) return;
  check_arg(dst != nullptr, "scale_avg_host: null buffer with count " + std::to_string(n));
  tables().scale[t](dst, n, divisor);
}

float half_to_float(uint16_t h) { return h2f(h); }
uint16_t float_to_half(float f) { return f2h(f); }
float bf16_to_float(uint16_t b) { return bf2f(b); }
uint16_t float_to_bf16(float f) { return f2bf(f); }

}  // namespace mycoll
