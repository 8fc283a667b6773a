// The matrix-product policy of the FMA kernels (portable, AVX2, AVX-512): fp32 operands,
// register-blocked MR x NR microkernels over `Simd`. Included by a kernel translation unit
// inside its private namespace, after `Simd`, kBN and the LONGATTN_CPU_STAGE macro exist.
//
// Layouts (floats): Q rows of dq (pre-scaled by scale*log2(e)), K tile as kBN/NR panels of
// dq x NR (K transposed, so S = QK^T broadcasts Q and streams K), V tile kBN x dv_pad.
#pragma once

struct FmaMma {
  static constexpr int MR = Simd::MR;
  static constexpr int NR = Simd::NR;
  static constexpr int kPanel = NR;          // S columns are computed in panels of NR keys
  static constexpr bool kPrescaledQ = true;  // the softmax scale is folded into Q
  static constexpr bool kScalesKV = true;    // fp8 descales are applied while packing

  static int64_t dv_pad(int64_t dv) { return (dv + NR - 1) / NR * NR; }
  static int64_t q_floats(int64_t rows_pad, int64_t dq) { return rows_pad * dq; }
  static int64_t k_floats(int64_t dq) { return int64_t(kBN) * dq; }
  static int64_t v_floats(int64_t dv) { return int64_t(kBN) * dv_pad(dv); }
  static int64_t p_floats() { return 0; }
  static int64_t tmp_floats(int64_t dq, int64_t dv) {
    return 16 * ((dq + Simd::W - 1) / Simd::W * Simd::W) + (dv > dq ? dv : dq) + 2 * NR;
  }

  static void pack_q(float* q, int64_t r, const void* src, DType t, int64_t dq, float scale) {
    Simd::cvt_row(src, t, dq, scale, q + r * dq);
  }
  static void zero_q(float* q, int64_t r0, int64_t r1, int64_t dq) {
    for (int64_t i = r0 * dq; i < r1 * dq; ++i) q[i] = 0.0f;
  }
  static void zero_kv(float* k, float* v, int64_t dq, int64_t dv) {
    for (int64_t i = 0; i < k_floats(dq); ++i) k[i] = 0.0f;
    for (int64_t i = 0; i < v_floats(dv); ++i) v[i] = 0.0f;
  }
  // Key `k` of the tile: converted, then scattered into its panel column.
  static void pack_k(float* kt, int64_t k, const void* src, DType t, int64_t dq, float scale, float* tmp) {
    Simd::cvt_row(src, t, dq, scale, tmp);
    float* dst = kt + (k / NR) * dq * NR + (k % NR);
    for (int64_t d = 0; d < dq; ++d) dst[d * NR] = tmp[d];
  }
  // 16 keys k0..k0+15 (k0 % 16 == 0): converted into `tmp` (16 rows of dq), then moved into
  // their panel columns by W x W register transposes instead of 16 * dq scalar stores.
  static constexpr bool kHasK16 = true;
  static void pack_k16(float* kt, int64_t k0, const void* const* rows, DType t, int64_t dq, float scale,
                       float* tmp) {
    static_assert(16 % Simd::W == 0 && NR % Simd::W == 0, "key groups are whole vectors");
    const int64_t ld = (dq + W - 1) / W * W;  // tmp row stride, padded to whole blocks
    for (int i = 0; i < 16; ++i) {
      float* row = tmp + i * ld;
      Simd::cvt_row(rows[i], t, dq, scale, row);
      for (int64_t d = dq; d < ld; ++d) row[d] = 0.0f;
    }
    for (int g = 0; g < 16; g += W) {
      const int64_t k = k0 + g;
      float* panel = kt + (k / NR) * dq * NR + (k % NR);
      int64_t d = 0;
      for (; d + W <= dq; d += W) Simd::transpose(tmp + g * ld + d, ld, panel + d * NR, NR);
      for (; d < dq; ++d)  // tail rows of the panel (dq not a multiple of W)
        for (int i = 0; i < W; ++i) panel[d * NR + i] = tmp[(g + i) * ld + d];
    }
  }
  // Value row `k`; returns true when it holds Inf/NaN (v * 0 is NaN exactly then).
  static bool pack_v(float* vt, int64_t k, const void* src, DType t, int64_t dv, float scale, float*) {
    const int64_t dvp = dv_pad(dv);
    float* vd = vt + k * dvp;
    Simd::cvt_row(src, t, dv, scale, vd);
    for (int64_t c = dv; c < dvp; ++c) vd[c] = 0.0f;
    const V zero = Simd::zero();
    V nf[2] = {zero, zero};
    for (int64_t c = 0; c < dvp; c += NR) {
      nf[0] = Simd::fma(Simd::load(vd + c), zero, nf[0]);
      nf[1] = Simd::fma(Simd::load(vd + c + Simd::W), zero, nf[1]);
    }
    const float s = Simd::hsum(Simd::add(nf[0], nf[1]));
    return s != s;
  }
  static float v_at(const float* vt, int64_t k, int64_t c, int64_t dv) { return vt[k * dv_pad(dv) + c]; }
  // S element (r, c) of the MR x kBN strip: row-major.
  static float* s_at(float* s, int r, int c) { return s + r * kBN + c; }
  // P stays f32: the full-precision exp2.
  static V exp2_p(V x) { return Simd::exp2(x); }
  // P stays f32, in place in the S strip.
  static void store_p2(float* s, float*, int r, int c, V p0, V p1) {
    Simd::store(s_at(s, r, c), p0);
    Simd::store(s_at(s, r, c + Simd::W), p1);
  }
  static float p_at(const float* s, const float*, int r, int k) { return s[r * kBN + k]; }

  // S[r][c0..c1) = Q[s0 + r] . K[c0..c1) for the strip's MR rows (c0, c1 multiples of NR).
  LONGATTN_CPU_STAGE static void qk(const float* qbuf, int64_t s0, int64_t dq, const float* kt, int c0,
                                    int c1, float* s) {
    const float* q = qbuf + s0 * dq;
    for (int p = c0 / NR; p < c1 / NR; ++p) {
      const float* b = kt + int64_t(p) * dq * NR;
      V acc[MR][2];
#pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = Simd::zero();
      for (int64_t d = 0; d < dq; ++d) {
        const V b0 = Simd::load(b + d * NR), b1 = Simd::load(b + d * NR + W);
#pragma GCC unroll 16
        for (int r = 0; r < MR; ++r) {
          const V a = Simd::bcast(q + r * dq + d);
          acc[r][0] = Simd::fma(a, b0, acc[r][0]);
          acc[r][1] = Simd::fma(a, b1, acc[r][1]);
        }
      }
#pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) {
        Simd::store(s + r * kBN + p * NR, acc[r][0]);
        Simd::store(s + r * kBN + p * NR + W, acc[r][1]);
      }
    }
  }

  // O[r] += sum_{k in [k0,k1)} P[r][k] V[k]; p: MR x kBN (f32), o: MR rows of dv_pad.
  LONGATTN_CPU_STAGE static void pv(const float* p, int k0, int k1, const float* v, int64_t dv, float* o,
                                    void* /*pbuf*/) {
    const int64_t dvp = dv_pad(dv);
    for (int64_t c = 0; c < dvp; c += NR) {
      V acc[MR][2];
#pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) {
        acc[r][0] = Simd::load(o + r * dvp + c);
        acc[r][1] = Simd::load(o + r * dvp + c + W);
      }
      for (int k = k0; k < k1; ++k) {
        const V b0 = Simd::load(v + k * dvp + c), b1 = Simd::load(v + k * dvp + c + W);
#pragma GCC unroll 16
        for (int r = 0; r < MR; ++r) {
          const V a = Simd::bcast(p + r * kBN + k);
          acc[r][0] = Simd::fma(a, b0, acc[r][0]);
          acc[r][1] = Simd::fma(a, b1, acc[r][1]);
        }
      }
#pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) {
        Simd::store(o + r * dvp + c, acc[r][0]);
        Simd::store(o + r * dvp + c + W, acc[r][1]);
      }
    }
  }
  static void begin() {}
  static void end() {}
};
