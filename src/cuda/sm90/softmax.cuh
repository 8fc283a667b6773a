// Online softmax over the S accumulator fragment, in log2 units.
//
// Each thread owns two rows (r and r + 8 of its warp's 16) and the row statistics are
// reduced across the 4 lanes of a quad. Logits are scaled by scale*log2(e) inside one FFMA
// with the running max subtracted, then exp2.
//
// Lazy rescale (MAX design): the running max m only moves when a block's max exceeds it by
// more than `threshold` log2 units; otherwise P may reach 2^threshold (fine in fp32 and in
// bf16/f16 P), and the O rescale is skipped for the whole warp when no row moved.
// threshold <= 0 selects always-rescale (classic FlashAttention-2).
#pragma once

#include <cstdint>

#include "cuda/ptx/sync.cuh"

namespace longattn::cuda::sm90 {

struct OnlineSoftmax {
  float m[2];  // running max, raw logit units (-inf: nothing seen)
  float l[2];  // per-thread partial row sums (quad-reduced in finalize)

  __device__ void init() {
    m[0] = m[1] = -INFINITY;
    l[0] = l[1] = 0.f;
  }

  // Attention sink (feature kernel): the sink joins the running max and the denominator
  // (one quad lane holds it: l is quad-reduced in finalize). `sink_raw` is in raw Q.K units;
  // -inf means no sink. A row that then sees no key keeps m = sink, l = 1, O = 0: output 0
  // and LSE = the sink, the reference's contract.
  __device__ void init_sink(float sink_raw, int lane) {
    m[0] = m[1] = sink_raw;
    l[0] = l[1] = (lane % 4 == 0 && sink_raw > -INFINITY) ? 1.f : 0.f;
  }

  // Turns S into P in place; returns the per-row O rescale factors; `rescale` tells whether
  // any factor in the warp differs from 1.
  // kPolyHalf (feature kernel with softcap, LONGATTN_SOFTCAP_POLY=1 only): odd column groups
  // take exp2 on the FMA pipe (ptx::exp2_poly) so the MUFU carries tanh + half the exp2s.
  // NOTES: slower than all-MUFU on H200 (hdim 128: 0.69x vs 0.73x of plain; hdim 64: 0.55x
  // vs 0.64x): the extra FMA-pipe work lands on the softmax critical path.
  template <bool kPolyHalf = false, int NS>
  __device__ bool update(float (&s)[NS], float scale_log2, float threshold, float (&factor)[2]) {
    bool any = false;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = m[r];
#pragma unroll
      for (int c = 0; c < NS / 4; ++c) mx = fmaxf(mx, fmaxf(s[4 * c + 2 * r], s[4 * c + 2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      float m_old = m[r];
      // NaN-free: mx == m_old == -inf compares false, keeping -inf.
      bool move = threshold > 0.f ? (mx - m_old) * scale_log2 > threshold : mx > m_old;
      float m_new = move ? mx : m_old;
      factor[r] = move ? ptx::exp2_approx((m_old - m_new) * scale_log2) : 1.f;
      any |= move;
      m[r] = m_new;
      float ms = m_new == -INFINITY ? 0.f : m_new * scale_log2;
      float sum = 0.f;
#pragma unroll
      for (int c = 0; c < NS / 4; ++c) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float x = fmaf(s[4 * c + 2 * r + e], scale_log2, -ms);
          float p;
          if (kPolyHalf && (c & 1)) {
            p = ptx::exp2_poly(x);
          } else {
            p = ptx::exp2_approx(x);
          }
          s[4 * c + 2 * r + e] = p;
          sum += p;
        }
      }
      l[r] = l[r] * factor[r] + sum;
    }
    return __any_sync(0xffffffffu, any);
  }

  // Reduces the row sums; returns 1/l per row (0 for rows with no visible key) and the
  // natural-log LSE (-inf for such rows).
  __device__ void finalize(float scale_log2, float (&inv)[2], float (&lse)[2]) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float s = l[r];
      s += __shfl_xor_sync(0xffffffffu, s, 1);
      s += __shfl_xor_sync(0xffffffffu, s, 2);
      bool empty = !(s > 0.f);
      inv[r] = empty ? 0.f : 1.f / s;
      lse[r] = empty ? -INFINITY : (m[r] * scale_log2 + __log2f(s)) * 0.69314718055994531f;
    }
  }
};

// Softcap (params.h): s <- tanh(s * in); the cap itself is folded into the softmax scale
// (feat_scale_log2 = cap * log2 e). tanh.approx.f32 (max relative error 2^-11, as
// FlashAttention-3): one MUFU op per element besides the exp2.
template <int NS>
__device__ __forceinline__ void softcap(float (&s)[NS], float in) {
#pragma unroll
  for (int i = 0; i < NS; ++i) {
    float t;
    asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(s[i] * in));
    s[i] = t;
  }
}

template <int NO>
__device__ __forceinline__ void rescale_rows(float (&o)[NO], const float (&f)[2]) {
#pragma unroll
  for (int c = 0; c < NO / 4; ++c) {
    o[4 * c + 0] *= f[0];
    o[4 * c + 1] *= f[0];
    o[4 * c + 2] *= f[1];
    o[4 * c + 3] *= f[1];
  }
}

}  // namespace longattn::cuda::sm90
