// Data type and reduction-op metadata: element size, names, kind. Part of the
// floor (lib/base: error, log, config, dtype) that every layer may use; the
// CPU reductions themselves are in lib/engine/reduce.h. Header-only and
// constexpr, so host code of CUDA sources can use it too.
#pragma once

#include <cstddef>

#include "mycoll.h"

namespace mycoll {

// A value of mycollDataType_t (0..mycollNumTypes-1).
constexpr bool dtype_valid(mycollDataType_t t) {
  return static_cast<int>(t) >= 0 && static_cast<int>(t) < mycollNumTypes;
}

// Bytes per element; 0 for an invalid type.
constexpr size_t dtype_size(mycollDataType_t t) {
  switch (t) {
    case mycollInt8:
    case mycollUint8:
    case mycollFloat8e4m3:
    case mycollFloat8e5m2: return 1;
    case mycollFloat16:
    case mycollBfloat16: return 2;
    case mycollInt32:
    case mycollUint32:
    case mycollFloat32: return 4;
    case mycollInt64:
    case mycollUint64:
    case mycollFloat64: return 8;
    default: return 0;
  }
}

// "int8", ..., "float16", "float32", "float64", "bfloat16", "float8e4m3",
// "float8e5m2"; "invalid-type" otherwise.
constexpr const char* dtype_name(mycollDataType_t t) {
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
    case mycollFloat8e4m3: return "float8e4m3";
    case mycollFloat8e5m2: return "float8e5m2";
    default: return "invalid-type";
  }
}

// Floating point (fp8, fp16, bf16, fp32, fp64): Max/Min propagate NaN, Avg
// divides with rounding; the others are integers (Sum/Prod wrap, Avg truncates).
constexpr bool dtype_is_float(mycollDataType_t t) {
  switch (t) {
    case mycollFloat16:
    case mycollFloat32:
    case mycollFloat64:
    case mycollBfloat16:
    case mycollFloat8e4m3:
    case mycollFloat8e5m2: return true;
    default: return false;
  }
}

// Signed: the signed integers and every floating-point type.
constexpr bool dtype_is_signed(mycollDataType_t t) {
  return t == mycollInt8 || t == mycollInt32 || t == mycollInt64 || dtype_is_float(t);
}

// "sum", "prod", "max", "min", "avg"; "invalid-op" otherwise.
constexpr const char* redop_name(mycollRedOp_t op) {
  switch (op) {
    case mycollSum: return "sum";
    case mycollProd: return "prod";
    case mycollMax: return "max";
    case mycollMin: return "min";
    case mycollAvg: return "avg";
    default: return "invalid-op";
  }
}

}  // namespace mycoll
