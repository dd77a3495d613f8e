// CPU reductions for every data type x operation, and the host engine's bulk
// copy (copy_host). Used by the host engine and by anything that reduces in
// host memory (e.g. staged GPU transfers).
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/dtype.h"  // dtype_size & co. (users of those alone include it directly)
#include "mycoll.h"

namespace mycoll {

// dst[i] = a[i] <op> b[i] for i < n; dst may alias a or b exactly (never
// partially: InvalidArgument). Avg reduces as Sum (the engine divides once at
// the end with scale_avg). Pointers need no alignment (misaligned ones take
// a slower bounce-buffer path). Integer Sum/Prod wrap; float Max/Min
// propagate NaN. Every CPU path gives the same results (see reduce.cc).
void reduce_host(mycollDataType_t t, mycollRedOp_t op, void* dst, const void* a, const void* b,
                 size_t n);

// dst[i] = dst[i] / divisor (integers truncate toward zero; fp16/bf16 computed
// in fp32 and rounded to nearest even).
void scale_avg_host(mycollDataType_t t, void* dst, size_t n, int divisor);

// dst[i] = src[i] * scalar for i < n, scalar one element of type t (the
// pre-multiplication of NCCL's PreMulSum). Integers wrap; fp16/bf16/fp8 are
// computed in fp32 and rounded. dst may equal src; any alignment.
void premul_host(mycollDataType_t t, void* dst, const void* src, size_t n, const void* scalar);

// dst = src for n bytes, with memmove's semantics (any overlap, any
// alignment). When stream_min > 0, n >= stream_min and the two ranges do not
// overlap, the bulk is written with non-temporal stores on x86-64 (no read
// of the destination lines, nothing left in the cache) and fenced before the
// return, so a release store after it publishes the copy; elsewhere memmove.
void copy_host(void* dst, const void* src, size_t n, size_t stream_min);

// Implementation used by reduce_host / scale_avg_host. The best one the CPU
// supports is picked at first use; every path gives identical results except
// that the F16C path may return a signalling fp16 NaN quieted.
enum class ReduceIsa { Baseline = 0, Avx2 = 1, Avx2F16c = 2 };
ReduceIsa reduce_isa();
// For tests and benchmarks: selects isa, or the best supported one below it;
// returns the one selected. Not meant to race with running reductions.
ReduceIsa set_reduce_isa(ReduceIsa isa);

// fp16 / bf16 conversions (round to nearest even; NaN/Inf preserved).
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bf16_to_float(uint16_t b);
uint16_t float_to_bf16(float f);
// fp8 conversions (engine/fp8.h: nearest even, saturating, NaN -> 0x7f).
float fp8e4m3_to_float(uint8_t v);
uint8_t float_to_fp8e4m3(float f);
float fp8e5m2_to_float(uint8_t v);
uint8_t float_to_fp8e5m2(float f);

}  // namespace mycoll
