#include "datatypes.h"

#include <cmath>
#include <cstring>

namespace mycoll_perf {

namespace {

struct Alias {
  const char* name;
  mycollDataType_t type;
};
// Every name a type is known by; the first of each type is nccl-tests' own.
constexpr Alias kAliases[] = {
    {"int8", mycollInt8},       {"char", mycollInt8},       {"uint8", mycollUint8},
    {"int32", mycollInt32},     {"int", mycollInt32},       {"uint32", mycollUint32},
    {"int64", mycollInt64},     {"uint64", mycollUint64},   {"half", mycollFloat16},
    {"float16", mycollFloat16}, {"float", mycollFloat32},   {"float32", mycollFloat32},
    {"double", mycollFloat64},  {"float64", mycollFloat64}, {"bfloat16", mycollBfloat16},
    {"bf16", mycollBfloat16},
};

}  // namespace

const char* dtype_name(mycollDataType_t t) {
  for (const Alias& a : kAliases)
    if (a.type == t) return a.name;
  return "?";
}

bool parse_dtype(const std::string& s, mycollDataType_t* t) {
  for (const Alias& a : kAliases)
    if (s == a.name) {
      *t = a.type;
      return true;
    }
  return false;
}

bool parse_op(const std::string& s, mycollRedOp_t* op) {
  for (int i = 0; i < mycollNumOps; ++i) {
    auto o = static_cast<mycollRedOp_t>(i);
    if (s == op_name(o)) {
      *op = o;
      return true;
    }
  }
  return false;
}

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t mant = x & 0x7fffffu;
  const int exp = static_cast<int>((x >> 23) & 0xffu);
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));
  const int e = exp - 127 + 15;  // biased half exponent
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (e <= 0) {  // half subnormal (or zero): value = m * 2^-24
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const int shift = 14 - e;
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u), halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry rounds up to inf correctly
  return static_cast<uint16_t>(sign | h);
}

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

float bf16_to_float(uint16_t b) {
  uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

namespace {

template <typename T>
T& at(void* base, size_t idx) {
  return static_cast<T*>(base)[idx];
}
template <typename T>
T at(const void* base, size_t idx) {
  return static_cast<const T*>(base)[idx];
}

// base[idx] as int64 (integer types: sign/zero extended; uint64 as its bit pattern).
int64_t load_int(mycollDataType_t t, const void* base, size_t idx) {
  switch (t) {
    case mycollInt8: return at<int8_t>(base, idx);
    case mycollUint8: return at<uint8_t>(base, idx);
    case mycollInt32: return at<int32_t>(base, idx);
    case mycollUint32: return at<uint32_t>(base, idx);
    case mycollInt64: return at<int64_t>(base, idx);
    default: return static_cast<int64_t>(at<uint64_t>(base, idx));
  }
}

// v wrapped to t's width, then widened back exactly as load_int would.
int64_t wrap_int(mycollDataType_t t, int64_t v) {
  const uint64_t u = static_cast<uint64_t>(v);
  switch (t) {
    case mycollInt8: return static_cast<int8_t>(static_cast<uint8_t>(u));
    case mycollUint8: return static_cast<uint8_t>(u);
    case mycollInt32: return static_cast<int32_t>(static_cast<uint32_t>(u));
    case mycollUint32: return static_cast<uint32_t>(u);
    default: return v;
  }
}

// v as type t would hold it, as double (floats only).
double round_to(mycollDataType_t t, double v) {
  switch (t) {
    case mycollFloat16: return half_to_float(float_to_half(static_cast<float>(v)));
    case mycollBfloat16: return bf16_to_float(float_to_bf16(static_cast<float>(v)));
    case mycollFloat32: return static_cast<float>(v);
    default: return v;
  }
}

}  // namespace

double load_as_double(mycollDataType_t t, const void* base, size_t idx) {
  switch (t) {
    case mycollFloat16: return half_to_float(at<uint16_t>(base, idx));
    case mycollBfloat16: return bf16_to_float(at<uint16_t>(base, idx));
    case mycollFloat32: return at<float>(base, idx);
    case mycollFloat64: return at<double>(base, idx);
    case mycollUint64: return static_cast<double>(at<uint64_t>(base, idx));
    default: return static_cast<double>(load_int(t, base, idx));
  }
}

void store(mycollDataType_t t, void* base, size_t idx, int64_t v) {
  const uint64_t u = static_cast<uint64_t>(v);
  switch (t) {
    case mycollInt8:
    case mycollUint8: at<uint8_t>(base, idx) = static_cast<uint8_t>(u); break;
    case mycollInt32:
    case mycollUint32: at<uint32_t>(base, idx) = static_cast<uint32_t>(u); break;
    case mycollInt64:
    case mycollUint64: at<uint64_t>(base, idx) = u; break;
    case mycollFloat16: at<uint16_t>(base, idx) = float_to_half(static_cast<float>(v)); break;
    case mycollBfloat16: at<uint16_t>(base, idx) = float_to_bf16(static_cast<float>(v)); break;
    case mycollFloat32: at<float>(base, idx) = static_cast<float>(v); break;
    default: at<double>(base, idx) = static_cast<double>(v); break;
  }
}

bool matches(mycollDataType_t t, const void* base, size_t idx, int64_t want, double rel_tol) {
  if (!dtype_is_float(t)) return load_int(t, base, idx) == wrap_int(t, want);
  const double got = load_as_double(t, base, idx);
  const double exp = round_to(t, static_cast<double>(want));
  if (got == exp) return true;
  return rel_tol > 0 && std::isfinite(got) && std::fabs(got - exp) <= rel_tol * std::fabs(exp);
}

}  // namespace mycoll_perf
