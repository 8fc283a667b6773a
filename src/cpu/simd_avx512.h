// 16-wide AVX-512F vector operations for the attention kernel (kernel_avx512.cpp only).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "cpu/convert.h"

namespace longattn::detail::cpu_avx512 {
// Internal linkage: the same struct is compiled with different -m flags in different
// translation units (kernel_avx512.cpp and kernel_amx.cpp), so no copy may be shared.
namespace {

struct Simd {
  using V = __m512;
  static constexpr int W = 16;
  // 12x32 register block: 24 accumulators + 2 B vectors + 1 broadcast of the 32 zmm.
  static constexpr int MR = 12;
  static constexpr int NR = 32;

  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float* p) { return _mm512_load_ps(p); }
  static void store(float* p, V v) { _mm512_store_ps(p, v); }
  static V bcast(const float* p) { return _mm512_set1_ps(*p); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  // x86 max returns the second operand when either is NaN.
  static V max(V a, V x) { return _mm512_max_ps(a, x); }
  static V div(V a, V b) { return _mm512_div_ps(a, b); }
  static V abs(V a) {
    return _mm512_castsi512_ps(
        _mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(0x7fffffff)));
  }
  static V copysign(V mag, V sgn) {
    const __m512i m = _mm512_set1_epi32(int(0x80000000u));
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_andnot_si512(m, _mm512_castps_si512(mag)),
                                               _mm512_and_si512(m, _mm512_castps_si512(sgn))));
  }
  static float hmax(V v) {
    __m256 a = _mm256_max_ps(_mm512_castps512_ps256(v),
                             _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    __m128 b = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    b = _mm_max_ps(b, _mm_movehl_ps(b, b));
    b = _mm_max_ss(b, _mm_shuffle_ps(b, b, 1));
    return _mm_cvtss_f32(b);
  }
  static float hsum(V v) {
    __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v),
                             _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    b = _mm_add_ps(b, _mm_movehl_ps(b, b));
    b = _mm_add_ss(b, _mm_shuffle_ps(b, b, 1));
    return _mm_cvtss_f32(b);
  }

  // Same range reduction and polynomial as the AVX2 exp2 (see simd_avx2.h); 2^n is applied
  // with one vscalefps, which saturates to inf / 0 by itself, so no clamps are needed
  // (x = +inf gives NaN here; the softmax never asks for it: a +inf logit is also the max).
  static V exp2(V x) {
    V n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    V f = _mm512_sub_ps(x, n);
    V p = _mm512_set1_ps(1.5403530393381609e-4f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.3333558146428443e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.6181291076284772e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.5504108664821580e-2f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4022650695910071e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.9314718055994531e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    // x < -126 -> exactly 0 (masked logits are -inf); NaN compares unordered and is kept.
    __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-126.0f), _CMP_NLT_UQ);
    return _mm512_maskz_scalef_ps(keep, p, n);
  }

  // exp2 for probabilities that are rounded to bf16 next (the AMX kernel's P): degree-4
  // polynomial, relative error 2.6e-6 (fitted here for relative error on [-0.5, 0.5]),
  // ~750x below bf16's rounding (2^-9), two FMAs fewer per vector than exp2 above.
  // Same range reduction and the same exact 0 for x < -126.
  static V exp2_bf16(V x) {
    V n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    V f = _mm512_sub_ps(x, n);
    V p = _mm512_set1_ps(9.570096670155653e-3f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.591785990793540e-2f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.402474495728736e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.931218148134215e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.999992614067524e-1f));
    __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-126.0f), _CMP_NLT_UQ);
    return _mm512_maskz_scalef_ps(keep, p, n);
  }

  // In-register 16x16 transpose of 32-bit units: on return r[i] holds unit i of the 16 input
  // rows (64 shuffles instead of 256 scalar moves). Shared by the f32 K packing below and the
  // AMX kernel's bf16-pair K packing (amx_mma.h).
  static void transpose16(__m512i r[16]) {
    __m512i t[16], u[16];
    for (int i = 0; i < 8; ++i) {
      t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
      t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    // u[4j + c], 128-bit lane L: unit 4L + c of rows 4j..4j+3.
    for (int j = 0; j < 4; ++j) {
      u[4 * j + 0] = _mm512_unpacklo_epi64(t[4 * j + 0], t[4 * j + 2]);
      u[4 * j + 1] = _mm512_unpackhi_epi64(t[4 * j + 0], t[4 * j + 2]);
      u[4 * j + 2] = _mm512_unpacklo_epi64(t[4 * j + 1], t[4 * j + 3]);
      u[4 * j + 3] = _mm512_unpackhi_epi64(t[4 * j + 1], t[4 * j + 3]);
    }
    for (int c = 0; c < 4; ++c) {
      const __m512i x01 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x44);
      const __m512i x23 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xEE);
      const __m512i y01 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x44);
      const __m512i y23 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xEE);
      r[0 + c] = _mm512_shuffle_i32x4(x01, y01, 0x88);
      r[4 + c] = _mm512_shuffle_i32x4(x01, y01, 0xDD);
      r[8 + c] = _mm512_shuffle_i32x4(x23, y23, 0x88);
      r[12 + c] = _mm512_shuffle_i32x4(x23, y23, 0xDD);
    }
  }

  // dst[i][j] = src[j][i] for a 16x16 block (strides in floats): K panels are packed with
  // 64 shuffles per block instead of 256 scalar stores.
  static void transpose(const float* src, int64_t ss, float* dst, int64_t ds) {
    __m512i r[16];
    for (int i = 0; i < 16; ++i) r[i] = _mm512_castps_si512(_mm512_loadu_ps(src + i * ss));
    transpose16(r);
    for (int i = 0; i < 16; ++i) _mm512_storeu_ps(dst + i * ds, _mm512_castsi512_ps(r[i]));
  }

  static void cvt_row(const void* src, DType t, int64_t n, float scale, float* dst) {
    const V s = _mm512_set1_ps(scale);
    int64_t i = 0;
    if (t == DType::bf16) {
      const uint16_t* p = static_cast<const uint16_t*>(src);
      for (; i + W <= n; i += W) {
        __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)));
        _mm512_storeu_ps(dst + i, _mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(w, 16)), s));
      }
    } else if (t == DType::f16) {
      const uint16_t* p = static_cast<const uint16_t*>(src);
      for (; i + W <= n; i += W)
        _mm512_storeu_ps(dst + i, _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256(
                                                    reinterpret_cast<const __m256i*>(p + i))),
                                                s));
    } else if (t == DType::f32) {
      const float* p = static_cast<const float*>(src);
      for (; i + W <= n; i += W) _mm512_storeu_ps(dst + i, _mm512_mul_ps(_mm512_loadu_ps(p + i), s));
    }
    if (i < n) {
      const int64_t es = t == DType::f32 ? 4 : (t == DType::e4m3 ? 1 : 2);
      cpu::cvt_row_scalar(static_cast<const char*>(src) + i * es, t, n - i, scale, dst + i);
    }
  }
};

}  // namespace
}  // namespace longattn::detail::cpu_avx512
