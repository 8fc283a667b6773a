// Plain C++ "vectors" for the portable kernel (kernel_portable.cpp): same algorithm and
// same exp2 polynomial as the AVX paths, lane loops the compiler may vectorize with the
// baseline ISA. Used on CPUs without AVX2/FMA.
#pragma once

#include <cstdint>
#include <cstring>

#include "cpu/convert.h"

namespace longattn::detail::cpu_portable {
// Internal linkage: the same struct is compiled with different -m flags in different
// translation units (kernel_avx512.cpp and kernel_amx.cpp), so no copy may be shared.
namespace {

struct Simd {
  static constexpr int W = 4;
  static constexpr int MR = 4;
  static constexpr int NR = 8;
#if defined(__GNUC__)
  // GCC/Clang vector extension: same lane semantics, but the accumulator blocks stay in
  // (SSE/NEON) registers; with plain arrays they lived in memory and the kernel crawled.
  typedef float Lanes __attribute__((vector_size(W * sizeof(float))));
#else
  typedef float Lanes[W];
#endif
  struct V {
    Lanes v;
  };

  static V zero() { return set1(0.0f); }
  static V set1(float x) {
    V r;
#if defined(__GNUC__)
    r.v = Lanes{} + x;  // vector + scalar broadcasts
#else
    for (int i = 0; i < W; ++i) r.v[i] = x;
#endif
    return r;
  }
  static V load(const float* p) {
    V r;
    std::memcpy(&r.v, p, sizeof(r.v));
    return r;
  }
  static void store(float* p, V a) { std::memcpy(p, &a.v, sizeof(a.v)); }
  static V bcast(const float* p) { return set1(*p); }
#define LONGATTN_LANEWISE(name, expr)      \
  static V name(V a, V b) {                \
    V r;                                   \
    for (int i = 0; i < W; ++i) {          \
      const float x = a.v[i], y = b.v[i];  \
      r.v[i] = (expr);                     \
    }                                      \
    return r;                              \
  }
#if defined(__GNUC__)
  static V mul(V a, V b) { return V{a.v * b.v}; }
  static V add(V a, V b) { return V{a.v + b.v}; }
  static V sub(V a, V b) { return V{a.v - b.v}; }
  static V div(V a, V b) { return V{a.v / b.v}; }
#else
  LONGATTN_LANEWISE(mul, x * y)
  LONGATTN_LANEWISE(add, x + y)
  LONGATTN_LANEWISE(sub, x - y)
  LONGATTN_LANEWISE(div, x / y)
#endif
  // Same NaN rule as x86 max: the second operand wins when either is NaN.
  LONGATTN_LANEWISE(max, x > y ? x : y)
#undef LONGATTN_LANEWISE
  static V fma(V a, V b, V c) {
#if defined(__GNUC__)
    return V{a.v * b.v + c.v};
#else
    V r;
    for (int i = 0; i < W; ++i) r.v[i] = a.v[i] * b.v[i] + c.v[i];
    return r;
#endif
  }
  static V abs(V a) {
    V r;
    for (int i = 0; i < W; ++i) r.v[i] = cpu::cvt_bits_to_float(cpu::cvt_float_to_bits(a.v[i]) & 0x7fffffffu);
    return r;
  }
  static V copysign(V mag, V sgn) {
    V r;
    for (int i = 0; i < W; ++i)
      r.v[i] = cpu::cvt_bits_to_float((cpu::cvt_float_to_bits(mag.v[i]) & 0x7fffffffu) |
                                      (cpu::cvt_float_to_bits(sgn.v[i]) & 0x80000000u));
    return r;
  }
  static float hmax(V a) {
    float m = a.v[0];
    for (int i = 1; i < W; ++i) m = m > a.v[i] ? m : a.v[i];
    return m;
  }
  static float hsum(V a) {
    float s = a.v[0];
    for (int i = 1; i < W; ++i) s += a.v[i];
    return s;
  }

  static float exp2_lane(float x) {
    if (x != x) return x;
    if (x < -126.0f) return 0.0f;
    const float xc = x > 128.0f ? 128.0f : x;
    const float n = __builtin_nearbyintf(xc);  // default rounding: to nearest even
    const float f = xc - n;
    float p = 1.5403530393381609e-4f;
    p = p * f + 1.3333558146428443e-3f;
    p = p * f + 9.6181291076284772e-3f;
    p = p * f + 5.5504108664821580e-2f;
    p = p * f + 2.4022650695910071e-1f;
    p = p * f + 6.9314718055994531e-1f;
    p = p * f + 1.0f;
    return p * cpu::cvt_bits_to_float(uint32_t(int32_t(n) + 127) << 23);
  }
  static V exp2(V a) {
    V r;
    for (int i = 0; i < W; ++i) r.v[i] = exp2_lane(a.v[i]);
    return r;
  }

  static void cvt_row(const void* src, DType t, int64_t n, float scale, float* dst) {
    cpu::cvt_row_scalar(src, t, n, scale, dst);
  }
  static void transpose(const float* src, int64_t ss, float* dst, int64_t ds) {
    for (int i = 0; i < W; ++i)
      for (int j = 0; j < W; ++j) dst[i * ds + j] = src[j * ss + i];
  }
};

}  // namespace
}  // namespace longattn::detail::cpu_portable
