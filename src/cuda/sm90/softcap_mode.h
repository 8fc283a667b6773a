// How the feature kernel computes softcapped logits (softmax.cuh), chosen per call on the host.
// One MUFU tanh and one MUFU exp2 per logit take about as long as the tensor cores at head dim
// 128 (16 MUFU ops per clock per SM), so the update does as little else as it can. The
// variants that lost (a separate tanh pass, exp2 or tanh on the FMA pipe, Q K^T in two
// halves) are listed with their figures in docs/PERFORMANCE.md.
#pragma once

#include <cstdint>

namespace longattn::cuda::sm90 {

enum SoftcapMode : int32_t {
  // Running max: the row max on the raw logits (tanh is monotonic: one tanh per row caps it),
  // then tanh + exp2 per logit in one pass.
  kCapFused = 0,
  // Fixed max: capped logits lie in [-cap, cap], so the softmax subtracts a constant m0 =
  // max(0, sink) (tanh units) instead of a running max: no row max, no shuffles, no O
  // rescale; P = 2^((t - m0) cap log2 e) stays within 2^+-kFixedMaxLog2 (softcap_fixed_ok).
  // bf16 inputs only (P in bf16 keeps fp32's exponent range; f16 P would underflow).
  kCapFixed = 1,
};

// Fixed-max mode: |exponent| <= cap log2 e <= this many log2 units, so P in [2^-75, 2^75]:
// normal in fp32 / bf16 with room for products with V and sums over 2^31 keys of |v| <= 2^20.
// Covers caps up to 52 (Gemma 2: 50).
inline constexpr double kFixedMaxLog2 = 75.0;

// Whether the fixed-max mode may run (else kCapFused).
constexpr bool softcap_fixed_ok(bool bf16_in, double cap) { return bf16_in && cap * 1.4426950408889634 <= kFixedMaxLog2; }

}  // namespace longattn::cuda::sm90
