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
//
// Softcap (feature kernel) has its own updates, chosen per call (softcap_mode.h): fused
// (update_capped: tanh inside the running-max update) and fixed (update_fixed: capped logits
// are bounded, so a constant max replaces the running one).
#pragma once

#include <cstdint>

#include "cuda/ptx/sync.cuh"
#include "cuda/sm90/softcap_mode.h"

namespace longattn::cuda::sm90 {

// kPOffset (log2 units): P = 2^(x - m + kPOffset), scaled up by 2^kPOffset (fp8: fp8_scale.h);
// the row sum carries the same factor, which finalize takes out of the LSE. 0 elsewhere.
template <int kPOffset = 0>
struct OnlineSoftmax {
  float m[2];  // running max, raw logit units (-inf: nothing seen)
  float l[2];  // per-thread partial row sums (quad-reduced in finalize)

  __device__ void init() {
    m[0] = m[1] = -INFINITY;
    l[0] = l[1] = 0.f;
  }

  // Attention sink (feature kernel): the sink joins the running max and the denominator
  // (one quad lane holds it: l is quad-reduced in finalize). `sink_raw` is in raw Q.K units;
  // -inf means no sink. A row that then sees no key keeps m = sink, l = 1 (x 2^kPOffset),
  // O = 0: output 0 and LSE = the sink, the reference's contract.
  static constexpr float kOne = float(1 << kPOffset);  // P of a logit at the max
  __device__ void init_sink(float sink_raw, int lane) {
    m[0] = m[1] = sink_raw;
    l[0] = l[1] = (lane % 4 == 0 && sink_raw > -INFINITY) ? kOne : 0.f;
  }
  // The two rows' own sinks (packed GQA: the rows may belong to different query heads).
  __device__ void init_sink_rows(float sink0, float sink1, int lane) {
    m[0] = sink0;
    m[1] = sink1;
    l[0] = (lane % 4 == 0 && sink0 > -INFINITY) ? kOne : 0.f;
    l[1] = (lane % 4 == 0 && sink1 > -INFINITY) ? kOne : 0.f;
  }

  // Turns S into P in place; returns the per-row O rescale factors; `rescale` tells whether
  // any factor in the warp differs from 1.
  // The exp2 pass of a row waits only for that row's max: what the lazy-rescale decision
  // needs from the old max (keep, bar) is computed before the block's max, so between the
  // max and the first exp2 there are three dependent operations (candidate, compare, select).
  // kRowOrder false: the rows' maxes and rescale decisions as independent chains, which ptxas
  // schedules both before the exp2s (the fp8 hdim-256 kind, where that order measured faster).
  template <bool kRowOrder = true, int NS>
  __device__ bool update(float (&s)[NS], float scale_log2, float threshold, float (&factor)[2]) {
    bool any = false;
    float keep[2], bar[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) keep_and_bar(r, scale_log2, threshold, keep[r], bar[r]);
    float ms_prev = 0.f;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = m[r];
      if (!kRowOrder) {
#pragma unroll
        for (int c = 0; c < NS / 4; ++c) mx = fmaxf(mx, fmaxf(s[4 * c + 2 * r], s[4 * c + 2 * r + 1]));
      } else if (r == 0) {  // pair maxes into one chain: row 0's max is the step's critical path
#pragma unroll
        for (int c = 0; c < NS / 4; ++c) mx = fmaxf(mx, fmaxf(s[4 * c], s[4 * c + 1]));
      } else {  // a chain behind row 0's max (ptx::after): it runs under row 0's exp2 pass
        mx = ptx::after(mx, ms_prev);
#pragma unroll
        for (int c = 0; c < NS / 4; ++c) mx = fmaxf(fmaxf(mx, s[4 * c + 2]), s[4 * c + 3]);
      }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float ms = kRowOrder ? move_to(r, mx, scale_log2, keep[r], bar[r], factor, any)
                                 : move_max(r, mx, scale_log2, threshold, factor, any);
      ms_prev = ms;
      float sum = 0.f;
#pragma unroll
      for (int c = 0; c < NS / 4; ++c) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float p = ptx::exp2_approx(fmaf(s[4 * c + 2 * r + e], scale_log2, -ms));
          s[4 * c + 2 * r + e] = p;
          sum += p;
        }
      }
      l[r] = l[r] * factor[r] + sum;
    }
    return __any_sync(0xffffffffu, any);
  }

  // Row r's lazy-rescale constants from its running max alone (update): `keep`, the scaled
  // max the exp2s subtract while the max stays (0 for a row that has seen nothing, so
  // exp2(-inf) = 0 stays NaN-free), and `bar`, what a block's scaled max must exceed to move
  // it (-inf for such a row: any key moves it). threshold <= 0: any larger scaled max moves it
  // (a block max within rounding of the old one keeps it: P then reaches 1 + rounding).
  __device__ void keep_and_bar(int r, float scale_log2, float threshold, float& keep, float& bar) const {
    const bool none = m[r] == -INFINITY;
    keep = none ? 0.f : fmaf(m[r], scale_log2, -float(kPOffset));
    bar = none ? -INFINITY : keep + (threshold > 0.f ? threshold : 0.f);
  }
  // The lazy rescale of row r to the block max mx (the running max already folded in), with
  // keep_and_bar's constants: sets factor[r], m[r], `any`; returns the scaled max to subtract.
  // A block max of -inf (nothing seen) never moves it: -inf > bar is false.
  __device__ float move_to(int r, float mx, float scale_log2, float keep, float bar, float (&factor)[2],
                           bool& any) {
    const float cand = fmaf(mx, scale_log2, -float(kPOffset));
    const bool move = cand > bar;
    const float m_old = m[r];
    factor[r] = move ? ptx::exp2_approx((m_old - mx) * scale_log2) : 1.f;
    any |= move;
    m[r] = move ? mx : m_old;
    return move ? cand : keep;
  }

  // The fused softcap update (softcap_mode.h kCapFused): `s` holds raw logits (raw Q.K
  // units; blocks with an element mask cap before the mask instead, see softcap()), P
  // replaces them. tanh is monotonic, so the row max is taken on the raw logits and capped
  // with one tanh per row; each logit is then capped and exponentiated in one pass. `in` =
  // scale / cap; m / l are in capped units (tanh values), so finalize and sinks are unchanged.
  template <int NS>
  __device__ bool update_capped(float (&s)[NS], float in, float scale_log2, float threshold,
                                float (&factor)[2]) {
    bool any = false;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mr = -INFINITY;
#pragma unroll
      for (int c = 0; c < NS / 4; ++c) mr = fmaxf(mr, fmaxf(s[4 * c + 2 * r], s[4 * c + 2 * r + 1]));
      mr = fmaxf(mr, __shfl_xor_sync(0xffffffffu, mr, 1));
      mr = fmaxf(mr, __shfl_xor_sync(0xffffffffu, mr, 2));
      const float mx = fmaxf(m[r], mr == -INFINITY ? -INFINITY : ptx::tanh_approx(mr * in));
      const float ms = move_max(r, mx, scale_log2, threshold, factor, any);
      float sum = 0.f;
#pragma unroll
      for (int i = 0; i < NS / 2; ++i) {
        const int k = 4 * (i / 2) + 2 * r + i % 2;
        const float p = ptx::exp2_approx(fmaf(ptx::tanh_approx(s[k] * in), scale_log2, -ms));
        s[k] = p;
        sum += p;
      }
      l[r] = l[r] * factor[r] + sum;
    }
    return __any_sync(0xffffffffu, any);
  }

  // Fixed-max softcap modes (softcap_mode.h kCapFixed*): the subtracted max becomes the
  // constant m0 = max(0, m) (m: the sink or -inf), the sink's share of l rescaled to it.
  __device__ void fix_max(float scale_log2) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float m0 = fmaxf(m[r], 0.f);
      l[r] *= ptx::exp2_approx((m[r] - m0) * scale_log2);  // -inf - 0: 0, and l was 0
      m[r] = m0;
    }
  }

  // The fixed-max update: P = 2^((t - m0) scale_log2) with t = tanh(s * in) (kCap: raw
  // logits, a block without element mask) or t = s (already capped and masked: -inf gives
  // 0). No max, no shuffle; factor = 1 and no rescale ever.
  template <bool kCap, int NS>
  __device__ bool update_fixed(float (&s)[NS], float in, float scale_log2, float (&factor)[2]) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float ms = m[r] * scale_log2;
      float sum = 0.f;
#pragma unroll
      for (int c = 0; c < NS / 4; ++c) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float t = s[4 * c + 2 * r + e];
          if constexpr (kCap) t = ptx::tanh_approx(t * in);
          const float p = ptx::exp2_approx(fmaf(t, scale_log2, -ms));
          s[4 * c + 2 * r + e] = p;
          sum += p;
        }
      }
      l[r] += sum;
      factor[r] = 1.f;
    }
    return false;
  }

  // Lazy rescale of row r to the block max mx (the row's running max already folded in):
  // sets factor[r], m[r], `any`; returns the scaled max to subtract (0 for a row that has
  // seen nothing, so exp2(-inf) = 0 stays NaN-free).
  __device__ float move_max(int r, float mx, float scale_log2, float threshold, float (&factor)[2],
                            bool& any) {
    const float m_old = m[r];
    // NaN-free: mx == m_old == -inf compares false, keeping -inf.
    const bool move = threshold > 0.f ? (mx - m_old) * scale_log2 > threshold : mx > m_old;
    const float m_new = move ? mx : m_old;
    factor[r] = move ? ptx::exp2_approx((m_old - m_new) * scale_log2) : 1.f;
    any |= move;
    m[r] = m_new;
    return m_new == -INFINITY ? 0.f : m_new * scale_log2 - float(kPOffset);
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
      lse[r] = empty ? -INFINITY : (m[r] * scale_log2 + __log2f(s) - float(kPOffset)) * 0.69314718055994531f;
    }
  }
};

// Softcap of a block with an element mask, before the mask (tanh(-inf) = -1 would unmask a
// key): s <- tanh(s * in) over the block; the cap itself is folded into the softmax scale
// (feat_scale_log2 = cap * log2 e). tanh.approx.f32 (max relative error 2^-11, as
// FlashAttention-3).
template <int NS>
__device__ __forceinline__ void softcap(float (&s)[NS], float in) {
#pragma unroll
  for (int i = 0; i < NS; ++i) s[i] = ptx::tanh_approx(s[i] * in);
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
