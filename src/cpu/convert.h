// Element conversions for the CPU kernels. Every function here has internal linkage
// (`static`), so each ISA translation unit owns a private copy compiled with its own flags.
#pragma once

#include <cstdint>
#include <cstring>

#include "longattn/types.h"

namespace longattn::detail::cpu {

static inline float cvt_bits_to_float(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
static inline uint32_t cvt_float_to_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

// bf16 -> f32 is exact: the bf16 bits are the high half of the f32.
static inline float cvt_bf16(uint16_t h) { return cvt_bits_to_float(uint32_t(h) << 16); }

// IEEE half -> f32, exact (subnormals, inf and NaN included).
static inline float cvt_f16(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0x1f) return cvt_bits_to_float(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {  // man * 2^-24 is exact in f32
    float v = float(man) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  return cvt_bits_to_float(sign | ((exp + 112u) << 23) | (man << 13));
}

// e4m3 "fn" decoded by table: 1 sign, 4 exponent bits (bias 7), 3 mantissa bits, no inf,
// S.1111.111 = NaN. Built at compile time so there is no initialization order to worry about.
struct E4m3Table {
  float v[256];
  constexpr E4m3Table() : v() {
    for (int b = 0; b < 256; ++b) {
      int exp = (b >> 3) & 0xf, man = b & 7;
      float x;
      if (exp == 0xf && man == 7) {
        x = __builtin_nanf("");
      } else {
        // value = (exp ? 8 + man : man) * 2^(max(exp,1) - 10)
        float m = float(exp ? 8 + man : man);
        int e = (exp ? exp : 1) - 10;
        float p = 1.0f;
        for (int i = 0; i < (e < 0 ? -e : e); ++i) p = e < 0 ? p * 0.5f : p * 2.0f;
        x = m * p;
      }
      v[b] = (b & 0x80) ? -x : x;
    }
  }
};
static constexpr E4m3Table kE4m3{};

// f32 -> bf16, round to nearest even; NaN stays a (quiet) NaN.
static inline uint16_t cvt_to_bf16(float x) {
  uint32_t u = cvt_float_to_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

// f32 -> IEEE half, round to nearest even, overflow to inf, NaN stays NaN.
static inline uint16_t cvt_to_f16(float x) {
  uint32_t u = cvt_float_to_bits(x);
  uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) return sign | 0x7e00u;  // NaN
  if (u >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65536: inf
  if (u < 0x38800000u) {                         // below the smallest normal half (2^-14)
    // Adding 0.5 aligns the half subnormal grid (2^-24) to the f32 ulp of [0.5, 1): the
    // f32 addition itself rounds to nearest even.
    float r = cvt_bits_to_float(u) + 0.5f;
    return sign | uint16_t(cvt_float_to_bits(r) - 0x3f000000u);
  }
  u += 0xfffu + ((u >> 13) & 1u);
  u -= 112u << 23;
  return sign | uint16_t(u >> 13);
}

// Converts n elements of `src` (dtype t) to f32 times `scale` (scalar path; the ISA kernels
// use it for tails and for the dtypes they do not vectorize).
static inline void cvt_row_scalar(const void* src, DType t, int64_t n, float scale, float* dst) {
  switch (t) {
    case DType::f32: {
      const float* s = static_cast<const float*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = s[i] * scale;
      return;
    }
    case DType::bf16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = cvt_bf16(s[i]) * scale;
      return;
    }
    case DType::f16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = cvt_f16(s[i]) * scale;
      return;
    }
    case DType::e4m3: {
      const uint8_t* s = static_cast<const uint8_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = kE4m3.v[s[i]] * scale;
      return;
    }
    case DType::i32: break;
  }
  for (int64_t i = 0; i < n; ++i) dst[i] = __builtin_nanf("");
}

// Stores n f32 values to `dst` (dtype t), rounding to nearest even.
static inline void store_row_scalar(const float* src, DType t, int64_t n, void* dst) {
  switch (t) {
    case DType::f32: std::memcpy(dst, src, size_t(n) * 4); return;
    case DType::bf16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = cvt_to_bf16(src[i]);
      return;
    }
    case DType::f16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = cvt_to_f16(src[i]);
      return;
    }
    default: return;  // validation admits only f32/bf16/f16 outputs
  }
}

}  // namespace longattn::detail::cpu
