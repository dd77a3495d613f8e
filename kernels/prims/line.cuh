// The 16-byte LL line {data_lo32, flag32, data_hi32, flag32}, written and
// read with one 16-byte access (kernels/prims/ll.cuh says why that needs no
// fence). Apart so that wait.cuh's give-up check can read call lines.
#pragma once

#include <cstdint>

namespace mycoll {
namespace ll {

__device__ __forceinline__ void store_line(char* p, uint64_t v, uint32_t flag) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(uint32_t(v)),
               "r"(flag), "r"(uint32_t(v >> 32)), "r"(flag)
               : "memory");
}

// One line as it is now: its data and the flag of each half.
__device__ __forceinline__ void load_raw(const char* p, uint64_t* v, uint32_t* f0, uint32_t* f1) {
  uint32_t d0, d1;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(d0), "=r"(*f0), "=r"(d1), "=r"(*f1)
               : "l"(p)
               : "memory");
  *v = uint64_t(d0) | (uint64_t(d1) << 32);
}

// True (and the 8 data bytes in *v) once both halves carry `flag`.
__device__ __forceinline__ bool load_line(const char* p, uint32_t flag, uint64_t* v) {
  uint32_t f0, f1;
  load_raw(p, v, &f0, &f1);
  return f0 == flag && f1 == flag;
}

}  // namespace ll
}  // namespace mycoll
