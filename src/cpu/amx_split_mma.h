// The matrix-product policy of the AMX kernel for f32 inputs: every f32 operand is split into
// three bf16 planes, x = x0 + x1 + x2 (each the bf16 rounding of what the planes before it
// left over; exact for finite |x| in [2^-110, 3.39e38]), and each product runs as six
// TDPBF16PS passes into the same fp32 accumulators:
//   a.b ~= a0 b2 + a1 b1 + a2 b0 + a0 b1 + a1 b0 + a0 b0   (smallest terms first)
// The dropped terms a1 b2 + a2 b1 + a2 b2 are below 2^-25 |a||b|, i.e. under half an fp32
// ulp of each product; accumulation is fp32 as in the FMA kernels. So the result has fp32
// accuracy (not bf16), at six tile products per bf16 one (speed: docs/PERFORMANCE.md, CPU backend).
//
// Same layouts as amx_mma.h, three times: Q rows hold their three planes back to back
// (row stride 3 dq_pad), K/V/P planes follow each other. P is split by the softmax itself.
// Limits (documented): VCVTNEPS2BF16 treats denormals as zero, so the low planes of
// |x| < ~2^-110 are lost (relative error 2^-9 for such tiny values); finite values above
// bf16's largest (3.39e38) become inf; Inf/NaN keep zero low planes (inf - inf would be NaN).
// Included by kernel_amx_split.cpp after amx_mma.h.
#pragma once

struct AmxSplitMma : AmxMma {
  static constexpr int kPlanes = 3;
  // Inf/NaN cannot go through the planes (an Inf high plane times a zero low plane of the
  // other operand is NaN where the exact product is +-Inf): packing notes any, and the
  // kernel then hands the item to the FMA kernel (kernel_amx_split.cpp). Per thread: each
  // item is packed by the thread that computes it.
  static constexpr bool kFiniteOnly = true;
  static inline thread_local bool saw_nonfinite = false;
  static constexpr PlanePair kSixPairs[6] = {{0, 2}, {1, 1}, {2, 0}, {0, 1}, {1, 0}, {0, 0}};

  static int64_t q_floats(int64_t rows_pad, int64_t dq) { return kPlanes * AmxMma::q_floats(rows_pad, dq); }
  static int64_t k_floats(int64_t dq) { return kPlanes * AmxMma::k_floats(dq); }
  static int64_t v_floats(int64_t dv) { return kPlanes * AmxMma::v_floats(dv); }
  static int64_t p_floats() { return kPlanes * AmxMma::p_floats(); }
  // 16 split key rows (pack_k16) or one split row.
  static int64_t tmp_floats(int64_t dq, int64_t dv) {
    return 16 * kPlanes * dq_pad(dq) / 2 + kPlanes * (dq_pad(dq) + dv_pad(dv)) / 2 + 64;
  }

  static V bf16_to_f32(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
  // 16 floats -> three bf16 planes.
  // Returns the lanes that are not finite (as bf16: Inf, NaN, or above bf16's range); their
  // low planes are zero.
  static __mmask16 split3(V x, __m256i h[3]) {
    const __m256bh b0 = _mm512_cvtneps_pbh(x);
    h[0] = reinterpret_cast<const __m256i&>(b0);
    const __m256i expo = _mm256_set1_epi16(0x7f80);
    const __mmask16 fin = _mm256_cmpneq_epi16_mask(_mm256_and_si256(h[0], expo), expo);
    const V r1 = _mm512_maskz_sub_ps(fin, x, bf16_to_f32(h[0]));
    const __m256bh b1 = _mm512_cvtneps_pbh(r1);
    h[1] = reinterpret_cast<const __m256i&>(b1);
    const V r2 = _mm512_sub_ps(r1, bf16_to_f32(h[1]));
    const __m256bh b2 = _mm512_cvtneps_pbh(r2);
    h[2] = reinterpret_cast<const __m256i&>(b2);
    return __mmask16(~fin);
  }
  // An f32 row of n values -> planes at dst + p * plane (bf16 units), zero-padded to `pad`.
  static void split_row(const float* src, int64_t n, int64_t pad, uint16_t* dst, int64_t plane) {
    for (int64_t i = 0; i < pad; i += 16) {
      const int64_t left = n - i;
      const __mmask16 m = left >= 16 ? __mmask16(0xffff) : left > 0 ? __mmask16((1u << left) - 1) : __mmask16(0);
      __m256i h[3];
      if (split3(_mm512_maskz_loadu_ps(m, src + i), h)) saw_nonfinite = true;
      for (int p = 0; p < kPlanes; ++p) _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + p * plane + i), h[p]);
    }
  }

  static void pack_q(float* qf, int64_t r, const void* src, DType, int64_t dq, float) {
    const int64_t dp = dq_pad(dq);
    split_row(static_cast<const float*>(src), dq, dp, reinterpret_cast<uint16_t*>(qf) + r * kPlanes * dp, dp);
  }
  static void zero_q(float* qf, int64_t r0, int64_t r1, int64_t dq) {
    AmxMma::zero_q(qf, kPlanes * r0, kPlanes * r1, dq);  // rows of three planes each
  }
  static void zero_kv(float* k, float* v, int64_t dq, int64_t dv) {
    std::memset(k, 0, size_t(k_floats(dq)) * 4);
    std::memset(v, 0, size_t(v_floats(dv)) * 4);
  }
  static void pack_k(float* kf, int64_t k, const void* src, DType, int64_t dq, float, float* tmp) {
    const int64_t dp = dq_pad(dq);
    uint16_t* planes = reinterpret_cast<uint16_t*>(tmp);
    split_row(static_cast<const float*>(src), dq, dp, planes, dp);
    for (int p = 0; p < kPlanes; ++p)
      AmxMma::pack_k(kf + p * AmxMma::k_floats(dq), k, planes + p * dp, DType::bf16, dq, 1.0f, nullptr);
  }
  static void pack_k16(float* kf, int64_t k0, const void* const* rows_in, DType, int64_t dq, float, float* tmp) {
    const int64_t dp = dq_pad(dq);
    uint16_t* planes = reinterpret_cast<uint16_t*>(tmp);  // [plane][row][dp]
    for (int i = 0; i < 16; ++i)
      split_row(static_cast<const float*>(rows_in[i]), dq, dp, planes + i * dp, 16 * dp);
    for (int p = 0; p < kPlanes; ++p) {
      const void* rows[16];
      for (int i = 0; i < 16; ++i) rows[i] = planes + (p * 16 + i) * dp;
      AmxMma::pack_k16(kf + p * AmxMma::k_floats(dq), k0, rows, DType::bf16, dq, 1.0f, nullptr);
    }
  }
  // Non-finite values show in the high plane (their low planes are zero).
  static bool pack_v(float* vf, int64_t k, const void* src, DType, int64_t dv, float, float* tmp) {
    const int64_t dp = dv_pad(dv);
    uint16_t* planes = reinterpret_cast<uint16_t*>(tmp);
    split_row(static_cast<const float*>(src), dv, dp, planes, dp);
    bool nonfinite = false;
    for (int p = 0; p < kPlanes; ++p)
      nonfinite |= AmxMma::pack_v(vf + p * AmxMma::v_floats(dv), k, planes + p * dp, DType::bf16, dv, 1.0f, nullptr);
    return nonfinite;
  }
  static float v_at(const float* vf, int64_t k, int64_t c, int64_t dv) {
    float x = 0.0f;
    for (int p = kPlanes - 1; p >= 0; --p) x += AmxMma::v_at(vf + p * AmxMma::v_floats(dv), k, c, dv);
    return x;  // exact: the planes hold disjoint bits of one float
  }

  // P must keep fp32 accuracy: the full exp2, then three planes.
  static V exp2_p(V x) { return Simd::exp2(x); }
  static void store_p2(float*, float* pf, int r, int c, V p0, V p1) {
    __m256i a[3], b[3];
    split3(p0, a);
    split3(p1, b);
    uint16_t* dst = reinterpret_cast<uint16_t*>(pf) + r * kBN + c;
    for (int p = 0; p < kPlanes; ++p)
      _mm512_store_si512(dst + p * (MR * kBN), _mm512_inserti64x4(_mm512_castsi256_si512(a[p]), b[p], 1));
  }
  static float p_at(const float*, const float* pf, int r, int k) {
    float x = 0.0f;
    for (int p = kPlanes - 1; p >= 0; --p) x += AmxMma::p_at(nullptr, pf + p * AmxMma::p_floats(), r, k);
    return x;
  }

  LONGATTN_CPU_STAGE static void qk(const float* qf, int64_t s0, int64_t dq, const float* kf, int c0, int c1,
                                    float* s) {
    const int64_t dp = dq_pad(dq);
    qk_planes(reinterpret_cast<const uint16_t*>(qf) + s0 * kPlanes * dp, kPlanes * dp, dp,
              reinterpret_cast<const uint32_t*>(kf), AmxMma::k_floats(dq), kSixPairs, dp / 32, c0, c1, s);
  }
  LONGATTN_CPU_STAGE static void pv(const float*, int k0, int k1, const float* vf, int64_t dv, float* o,
                                    float* pf) {
    pv_planes(reinterpret_cast<const uint16_t*>(pf), MR * kBN, reinterpret_cast<const uint16_t*>(vf),
              2 * AmxMma::v_floats(dv), kSixPairs, k0, k1, dv, o);
  }
};
