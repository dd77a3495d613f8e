#include "reference.h"

#include <cmath>
#include <cstring>

#include "base/dtype.h"
#include "engine/reduce.h"  // fp16/bf16/fp8 conversions

namespace mycoll_test {

size_t elem_size(mycollDataType_t t) { return mycoll::dtype_size(t); }
const char* type_str(mycollDataType_t t) { return mycoll::dtype_name(t); }
const char* op_str(mycollRedOp_t op) { return mycoll::redop_name(op); }

static bool is_unsigned(mycollDataType_t t) {
  return t == mycollUint8 || t == mycollUint32 || t == mycollUint64;
}
static bool is_float(mycollDataType_t t) {
  return t == mycollFloat16 || t == mycollBfloat16 || t == mycollFloat32 || t == mycollFloat64;
}

double input_value(mycollDataType_t t, mycollRedOp_t op, bool reducing, int rank, size_t i,
                   int seed) {
  uint64_t h = static_cast<uint64_t>(rank) * 7 + i * 13 + static_cast<uint64_t>(seed) * 5;
  if (reducing) {
    if (op == mycollProd) return 1.0 + static_cast<double>((h >> 1) % 2);
    if (is_unsigned(t)) return static_cast<double>(h % 4);
    return static_cast<double>(h % 5) - 2.0;
  }
  // Data movement: values that identify (rank, index) as far as the type allows.
  uint64_t m = (elem_size(t) == 1 || t == mycollBfloat16) ? 120 : (t == mycollFloat16 ? 2000 : 1000003);
  uint64_t v = (static_cast<uint64_t>(rank) * 37 + i * 11 + static_cast<uint64_t>(seed)) % m;
  return static_cast<double>(v);
}

void store(mycollDataType_t t, void* buf, size_t i, double v) {
  char* p = static_cast<char*>(buf) + i * elem_size(t);
  auto put_int = [&](int64_t x) { std::memcpy(p, &x, elem_size(t)); };  // little endian: low bytes
  switch (t) {
    case mycollInt8:
    case mycollUint8:
    case mycollInt32:
    case mycollUint32:
    case mycollInt64:
    case mycollUint64: put_int(static_cast<int64_t>(v)); break;
    case mycollFloat32: {
      float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      break;
    }
    case mycollFloat64: std::memcpy(p, &v, 8); break;
    case mycollFloat16: {
      uint16_t h = mycoll::float_to_half(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      break;
    }
    case mycollBfloat16: {
      uint16_t h = mycoll::float_to_bf16(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      break;
    }
    default: break;
  }
}

double load(mycollDataType_t t, const void* buf, size_t i) {
  const char* p = static_cast<const char*>(buf) + i * elem_size(t);
  switch (t) {
    case mycollInt8: return *reinterpret_cast<const int8_t*>(p);
    case mycollUint8: return *reinterpret_cast<const uint8_t*>(p);
    case mycollInt32: { int32_t x; std::memcpy(&x, p, 4); return x; }
    case mycollUint32: { uint32_t x; std::memcpy(&x, p, 4); return x; }
    case mycollInt64: { int64_t x; std::memcpy(&x, p, 8); return static_cast<double>(x); }
    case mycollUint64: { uint64_t x; std::memcpy(&x, p, 8); return static_cast<double>(x); }
    case mycollFloat32: { float x; std::memcpy(&x, p, 4); return x; }
    case mycollFloat64: { double x; std::memcpy(&x, p, 8); return x; }
    case mycollFloat16: { uint16_t x; std::memcpy(&x, p, 2); return mycoll::half_to_float(x); }
    case mycollBfloat16: { uint16_t x; std::memcpy(&x, p, 2); return mycoll::bf16_to_float(x); }
    default: return 0;
  }
}

void reference_reduce(mycollDataType_t t, mycollRedOp_t op, int nranks, size_t i, int seed,
                      void* out) {
  int64_t acc = 0;
  for (int r = 0; r < nranks; ++r) {
    int64_t v = static_cast<int64_t>(input_value(t, op, true, r, i, seed));
    if (r == 0) {
      acc = v;
      continue;
    }
    switch (op) {
      case mycollSum:
      case mycollAvg: acc += v; break;
      case mycollProd: acc *= v; break;
      case mycollMax: acc = v > acc ? v : acc; break;
      case mycollMin: acc = v < acc ? v : acc; break;
      default: break;
    }
  }
  double result = static_cast<double>(acc);
  if (op == mycollAvg) {
    if (!is_float(t))
      result = static_cast<double>(acc / nranks);  // C++ truncates toward zero
    else if (t == mycollFloat64)
      result = static_cast<double>(acc) / nranks;
    else
      result = static_cast<double>(static_cast<float>(acc) / static_cast<float>(nranks));
  }
  store(t, out, 0, result);
}

void poison(void* buf, size_t bytes) { std::memset(buf, 0xA5, bytes); }
bool is_poison(const void* buf, size_t bytes) {
  const unsigned char* p = static_cast<const unsigned char*>(buf);
  for (size_t i = 0; i < bytes; ++i)
    if (p[i] != 0xA5) return false;
  return true;
}

std::string describe_elem(mycollDataType_t t, const void* got, const void* expected, size_t i) {
  return "element " + std::to_string(i) + ": got " + std::to_string(load(t, got, 0)) +
         " expected " + std::to_string(load(t, expected, 0));
}

}  // namespace mycoll_test
