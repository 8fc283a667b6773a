// 8-wide AVX2/FMA vector operations for the attention kernel (kernel_avx2.cpp only).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "cpu/convert.h"

namespace longattn::detail::cpu_avx2 {
// Internal linkage: the same struct is compiled with different -m flags in different
// translation units (kernel_avx512.cpp and kernel_amx.cpp), so no copy may be shared.
namespace {

struct Simd {
  using V = __m256;
  static constexpr int W = 8;
  // S = Q K^T and O += P V use a 6x16 register block: 12 accumulators + 2 B vectors +
  // 1 broadcast = 15 of the 16 ymm registers.
  static constexpr int MR = 6;
  static constexpr int NR = 16;

  static V zero() { return _mm256_setzero_ps(); }
  static V load(const float* p) { return _mm256_load_ps(p); }
  static void store(float* p, V v) { _mm256_store_ps(p, v); }
  static V bcast(const float* p) { return _mm256_broadcast_ss(p); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  // max(a, x) with x second: x86 max returns the second operand when either is NaN.
  static V max(V a, V x) { return _mm256_max_ps(a, x); }
  static V div(V a, V b) { return _mm256_div_ps(a, b); }
  static V abs(V a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
  // |mag| with the sign bit of sgn
  static V copysign(V mag, V sgn) {
    const V m = _mm256_set1_ps(-0.0f);
    return _mm256_or_ps(_mm256_andnot_ps(m, mag), _mm256_and_ps(m, sgn));
  }

  static float hmax(V v) {
    __m128 a = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a = _mm_max_ps(a, _mm_movehl_ps(a, a));
    a = _mm_max_ss(a, _mm_shuffle_ps(a, a, 1));
    return _mm_cvtss_f32(a);
  }
  static float hsum(V v) {
    __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a = _mm_add_ps(a, _mm_movehl_ps(a, a));
    a = _mm_add_ss(a, _mm_shuffle_ps(a, a, 1));
    return _mm_cvtss_f32(a);
  }

  // 2^x: round to nearest integer n, degree-6 polynomial for 2^f on f in [-0.5, 0.5]
  // (Taylor of e^(f ln2), truncation error 1.2e-7 relative), 2^n built in the exponent
  // field. NaN in -> NaN out (the clamps keep x as their second operand); x < -126 -> 0
  // exactly, so masked logits (-inf) give p == 0; x >= 128 -> inf.
  static V exp2(V x) {
    V xc = _mm256_min_ps(_mm256_set1_ps(128.0f), _mm256_max_ps(_mm256_set1_ps(-127.0f), x));
    V n = _mm256_round_ps(xc, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    V f = _mm256_sub_ps(xc, n);
    V p = _mm256_set1_ps(1.5403530393381609e-4f);
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.3333558146428443e-3f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(9.6181291076284772e-3f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(5.5504108664821580e-2f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(2.4022650695910071e-1f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(6.9314718055994531e-1f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(
        _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    V r = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    V tiny = _mm256_cmp_ps(x, _mm256_set1_ps(-126.0f), _CMP_LT_OQ);  // false for NaN
    return _mm256_andnot_ps(tiny, r);
  }

  // dst[i][j] = src[j][i] for an 8x8 block (strides in floats).
  static void transpose(const float* src, int64_t ss, float* dst, int64_t ds) {
    __m256 r[8], t[8], u[8];
    for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * ss);
    for (int i = 0; i < 4; ++i) {
      t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
      t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int j = 0; j < 2; ++j) {
      u[4 * j + 0] = _mm256_shuffle_ps(t[4 * j + 0], t[4 * j + 2], 0x44);
      u[4 * j + 1] = _mm256_shuffle_ps(t[4 * j + 0], t[4 * j + 2], 0xEE);
      u[4 * j + 2] = _mm256_shuffle_ps(t[4 * j + 1], t[4 * j + 3], 0x44);
      u[4 * j + 3] = _mm256_shuffle_ps(t[4 * j + 1], t[4 * j + 3], 0xEE);
    }
    // u[4j + c], 128-bit lane L: element 4L + c of rows 4j..4j+3.
    for (int c = 0; c < 4; ++c) {
      _mm256_storeu_ps(dst + c * ds, _mm256_permute2f128_ps(u[c], u[4 + c], 0x20));
      _mm256_storeu_ps(dst + (4 + c) * ds, _mm256_permute2f128_ps(u[c], u[4 + c], 0x31));
    }
  }

  // n elements of src (dtype t) to f32 times scale; n may be any size.
  static void cvt_row(const void* src, DType t, int64_t n, float scale, float* dst) {
    const V s = _mm256_set1_ps(scale);
    int64_t i = 0;
    if (t == DType::bf16) {
      const uint16_t* p = static_cast<const uint16_t*>(src);
      for (; i + W <= n; i += W) {
        __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i)));
        _mm256_storeu_ps(dst + i, _mm256_mul_ps(_mm256_castsi256_ps(_mm256_slli_epi32(w, 16)), s));
      }
    } else if (t == DType::f16) {
      const uint16_t* p = static_cast<const uint16_t*>(src);
      for (; i + W <= n; i += W)
        _mm256_storeu_ps(dst + i, _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(
                                                    reinterpret_cast<const __m128i*>(p + i))),
                                                s));
    } else if (t == DType::f32) {
      const float* p = static_cast<const float*>(src);
      for (; i + W <= n; i += W) _mm256_storeu_ps(dst + i, _mm256_mul_ps(_mm256_loadu_ps(p + i), s));
    }
    if (i < n) {
      const int64_t es = dtype_size_static(t);
      cpu::cvt_row_scalar(static_cast<const char*>(src) + i * es, t, n - i, scale, dst + i);
    }
  }

  static int64_t dtype_size_static(DType t) {
    return t == DType::f32 ? 4 : (t == DType::e4m3 ? 1 : 2);
  }
};

}  // namespace
}  // namespace longattn::detail::cpu_avx2
