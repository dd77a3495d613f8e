// Datatype and reduction-op names (as nccl-tests spells them) and exact
// element access for data initialisation and checking. Every value the
// benchmark writes or expects is an integer, carried as int64_t.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/dtype.h"  // the library's type metadata (header-only: sizes, kinds, op names)
#include "mycoll.h"

namespace mycoll_perf {

using mycoll::dtype_is_float;
using mycoll::dtype_size;

// As nccl-tests names them: "int8" "uint8" "int32" "uint32" "int64" "uint64"
// "half" "float" "double" "bfloat16"; "?" for a type mycoll-perf does not run.
const char* dtype_name(mycollDataType_t t);
// Name (also "char", "int", "float16", "float32", "float64", "bf16") -> type; false if unknown.
bool parse_dtype(const std::string& s, mycollDataType_t* t);

// "sum" "prod" "max" "min" "avg".
inline const char* op_name(mycollRedOp_t op) { return mycoll::redop_name(op); }
bool parse_op(const std::string& s, mycollRedOp_t* op);

// base[idx] = v converted to t (integers wrap modulo the type's width; floats
// round to nearest even).
void store(mycollDataType_t t, void* base, size_t idx, int64_t v);

// Whether base[idx] equals the exact value `want` as type t would hold it:
// integers compare after wrapping want to t's width; floats compare with want
// rounded to t (so an overflow to inf is expected as inf). rel_tol > 0 allows
// that relative error for floats (used for avg, where the division rounds).
bool matches(mycollDataType_t t, const void* base, size_t idx, int64_t want, double rel_tol);

// base[idx] as double, for messages.
double load_as_double(mycollDataType_t t, const void* base, size_t idx);

// IEEE binary16 / bfloat16 conversions (round to nearest even).
uint16_t float_to_half(float f);
float half_to_float(uint16_t h);
uint16_t float_to_bf16(float f);
float bf16_to_float(uint16_t b);

}  // namespace mycoll_perf
