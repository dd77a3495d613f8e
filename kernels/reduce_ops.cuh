// Reduction functors for every dtype x op on the GPU. Contract: apply(a, b)
// returns a <op> b for one element; apply16 does it for 16 packed bytes
// (native half2/bfloat162 math on sm_90). Avg reduces as Sum; the final
// division is div_avg(x, n). Integers wrap (computed unsigned).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "mycoll.h"

namespace mycoll {
namespace dev {

template <typename T>
constexpr bool kIsFp8 = std::is_same_v<T, __nv_fp8_e4m3> || std::is_same_v<T, __nv_fp8_e5m2>;
template <typename T>
constexpr bool kIsHalf = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;
// Two 16-bit floats of T packed (native math on two lanes at once).
template <typename T>
using Half2 = std::conditional_t<std::is_same_v<T, __half>, __half2, __nv_bfloat162>;

template <int OP, typename H2>
__device__ __forceinline__ H2 apply2(H2 a, H2 b) {
  if constexpr (OP == mycollSum || OP == mycollAvg)
    return __hadd2(a, b);
  else if constexpr (OP == mycollProd)
    return __hmul2(a, b);
  else if constexpr (OP == mycollMax)
    return __hmax2_nan(a, b);
  else
    return __hmin2_nan(a, b);
}

// fp8 (e4m3, e5m2): each element computed in fp32 with the float rules
// (NaN propagates through Max/Min) and rounded back to nearest even,
// saturating to the largest finite value (the __nv_fp8 constructors use
// __NV_SATFINITE), as the host does (lib/engine/fp8.h).
template <typename T, int OP>
struct Red {
  __device__ static T apply(T a, T b) {
    constexpr bool kInt = std::is_integral_v<T>;
    // Integers computed unsigned (they wrap), floats as they are.
    using U = std::conditional_t<kInt, std::make_unsigned_t<std::conditional_t<kInt, T, int>>, T>;
    if constexpr (kIsFp8<T>) {
      return T(Red<float, OP>::apply(float(a), float(b)));
    } else if constexpr (kIsHalf<T>) {
      return apply2<OP>(Half2<T>(a, a), Half2<T>(b, b)).x;
    } else if constexpr (OP == mycollSum || OP == mycollAvg) {
      return T(U(a) + U(b));
    } else if constexpr (OP == mycollProd) {
      return T(U(a) * U(b));
    } else if constexpr (kInt) {  // Max, Min
      return (OP == mycollMax ? a > b : a < b) ? a : b;
    } else {  // NaN propagates
      return (a != a || b != b) ? (a + b) : ((OP == mycollMax ? a > b : a < b) ? a : b);
    }
  }
};

// 16 packed bytes.
template <typename T, int OP>
__device__ __forceinline__ uint4 apply16(uint4 a, uint4 b) {
  uint4 r;
  if constexpr (kIsHalf<T>) {
    using T2 = Half2<T>;
    const T2* x = reinterpret_cast<const T2*>(&a);
    const T2* y = reinterpret_cast<const T2*>(&b);
    T2* z = reinterpret_cast<T2*>(&r);
#pragma unroll
    for (int i = 0; i < 4; ++i) z[i] = apply2<OP>(x[i], y[i]);
  } else {
    constexpr int N = 16 / sizeof(T);
    const T* x = reinterpret_cast<const T*>(&a);
    const T* y = reinterpret_cast<const T*>(&b);
    T* z = reinterpret_cast<T*>(&r);
#pragma unroll
    for (int i = 0; i < N; ++i) z[i] = Red<T, OP>::apply(x[i], y[i]);
  }
  return r;
}

// 16-bit floats and fp8 divide in fp32, rounded back to nearest even.
template <typename T>
__device__ __forceinline__ T div_avg(T x, int n) {
  if constexpr (kIsHalf<T> || kIsFp8<T>)
    return T(float(x) / float(n));
  else
    return T(x / T(n));
}

}  // namespace dev
}  // namespace mycoll
