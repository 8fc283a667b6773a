// Scalar element conversions for host code (reference backend, tests, tools).
// All float -> narrow conversions round to nearest, ties to even (what the GPU's cvt.rn and
// PyTorch/NumPy casts do), so the reference sees exactly the values the kernels see.
#include <array>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "common/problem.h"

namespace longattn::detail {
namespace {

uint32_t float_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
float bits_float(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

float bf16_to_float(uint16_t h) { return bits_float(uint32_t(h) << 16); }

uint16_t float_to_bf16(float x) {
  uint32_t u = float_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even on bit 16
  return uint16_t(u >> 16);
}

float f16_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (man << 13));  // inf / NaN
  if (exp == 0) {  // zero or subnormal: man * 2^-24, exact in float
    float v = std::ldexp(float(man), -24);
    return sign ? -v : v;
  }
  return bits_float(sign | ((exp + 112u) << 23) | (man << 13));
}

uint16_t float_to_f16(float x) {
  uint32_t u = float_bits(x);
  uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (u >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to inf (and inf itself)
  if (u < 0x38800000u) {  // below 2^-14: half subnormal, unit 2^-24 (scaling is exact)
    float r = std::nearbyint(bits_float(u) * 16777216.0f);  // default mode: ties to even
    return sign | uint16_t(r);  // r == 1024 encodes the smallest normal, as it should
  }
  u += 0xfffu + ((u >> 13) & 1u);  // round to nearest even on bit 13
  u -= 112u << 23;                 // rebias exponent 127 -> 15
  return sign | uint16_t(u >> 13);
}

// e4m3 "fn": 1 sign, 4 exponent (bias 7), 3 mantissa bits; no inf; S.1111.111 is NaN.
float e4m3_decode(uint8_t b) {
  uint32_t exp = (b >> 3) & 0xfu, man = b & 7u;
  float v;
  if (exp == 0xf && man == 7) v = std::nanf("");
  else if (exp == 0) v = std::ldexp(float(man), -9);
  else v = std::ldexp(float(8 + man), int(exp) - 10);
  return (b & 0x80u) ? -v : v;
}

// 256 entries, built once: the reference and the tools read fp8 element by element.
float e4m3_to_float(uint8_t b) {
  static const auto table = [] {
    std::array<float, 256> t{};
    for (int i = 0; i < 256; ++i) t[size_t(i)] = e4m3_decode(uint8_t(i));
    return t;
  }();
  return table[b];
}

// Positive codes 0x00..0x7e are strictly increasing in value, so rounding is a search for
// the bracketing pair. Finite values above 448 (and inf) saturate to 448, matching CUDA's
// __NV_SATFINITE conversion; NaN stays NaN.
uint8_t float_to_e4m3(float x) {
  if (std::isnan(x)) return 0x7f;
  uint8_t sign = std::signbit(x) ? 0x80 : 0;
  float a = std::fabs(x);
  if (a >= 448.0f) return sign | 0x7e;
  int lo = 0, hi = 0x7e;  // invariant: value(lo) <= a < value(hi)
  while (hi - lo > 1) {
    int mid = (lo + hi) / 2;
    if (e4m3_to_float(uint8_t(mid)) <= a) lo = mid;
    else hi = mid;
  }
  float dl = a - e4m3_to_float(uint8_t(lo)), dh = e4m3_to_float(uint8_t(hi)) - a;
  int code = (dl < dh || (dl == dh && (lo & 1) == 0)) ? lo : hi;
  return sign | uint8_t(code);
}

}  // namespace

float load_as_float(const void* base, DType t, int64_t offset) {
  switch (t) {
    case DType::f32: return static_cast<const float*>(base)[offset];
    case DType::f16: return f16_to_float(static_cast<const uint16_t*>(base)[offset]);
    case DType::bf16: return bf16_to_float(static_cast<const uint16_t*>(base)[offset]);
    case DType::e4m3: return e4m3_to_float(static_cast<const uint8_t*>(base)[offset]);
    case DType::i32: return float(static_cast<const int32_t*>(base)[offset]);
  }
  return std::nanf("");
}

double load_as_double(const void* base, DType t, int64_t offset) {
  if (t == DType::i32) return double(static_cast<const int32_t*>(base)[offset]);
  return double(load_as_float(base, t, offset));  // every float dtype is exact in float
}

void store_from_float(void* base, DType t, int64_t offset, float x) {
  switch (t) {
    case DType::f32: static_cast<float*>(base)[offset] = x; return;
    case DType::f16: static_cast<uint16_t*>(base)[offset] = float_to_f16(x); return;
    case DType::bf16: static_cast<uint16_t*>(base)[offset] = float_to_bf16(x); return;
    case DType::e4m3: static_cast<uint8_t*>(base)[offset] = float_to_e4m3(x); return;
    case DType::i32: {  // saturating; NaN -> 0 (a float-to-int cast of those is undefined)
      int32_t v = 0;
      if (x >= 2147483648.0f) v = INT32_MAX;
      else if (x <= -2147483648.0f) v = INT32_MIN;
      else if (x == x) v = int32_t(x);
      static_cast<int32_t*>(base)[offset] = v;
      return;
    }
  }
}

}  // namespace longattn::detail
