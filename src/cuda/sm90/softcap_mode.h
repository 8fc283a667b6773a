// How the feature kernel computes softcapped logits (softmax.cuh). One MUFU tanh and one
// MUFU exp2 per logit take as long as the tensor cores at head dim 128 (16 MUFU ops per clock
// per SM), and the first version (split) ran at 0.74x of plain. Chosen per call on the host
// (forward_sm90.cpp; LONGATTN_SOFTCAP_MODE for A/B measurement); host-testable.
//
// Measured (H200, 2026-11-22 03:00, bf16 2 x 8k, 16 heads, cap 30 + sinks, vs the plain
// dense kernel; docs/PERFORMANCE.md): hdim 128 full / causal: split 0.74 / 0.79, fused 0.79 /
// 0.84, fixed 0.79 / 0.84, fixed8 0.80 / 0.84; hdim 256: split 0.86, fused 0.94, fixed 0.99;
// hdim 64: split 0.62, fused 0.67. Variants that lost and were removed: K/16 of the exp2s on
// the FMA pipe with the running max (0.71-0.76 / 0.76-0.79), tanh.approx.f16x2 (two MUFU
// ops per pair on sm_90a: 0.68 / 0.72).
#pragma once

#include <cstdint>
#include <cstring>

namespace longattn::cuda::sm90 {

enum SoftcapMode : int32_t {
  // tanh pass over the block, then the element mask, then the softmax (max, exp2): the max
  // waits for the last tanh. The first version.
  kCapSplit = 0,
  // Mask first, row max on the raw logits (tanh is monotonic: one tanh per row caps it),
  // then tanh + exp2 per logit in one pass.
  kCapFused = 1,
  // Fixed max: capped logits lie in [-cap, cap], so the softmax subtracts a constant m0 =
  // max(0, sink) (tanh units) instead of a running max: no row max, no shuffles, no O
  // rescale; P = 2^((t - m0) cap log2 e) stays within 2^+-kFixedMaxLog2 (softcap_fixed_ok).
  // bf16 inputs only (P in bf16 keeps fp32's exponent range; f16 P would underflow).
  kCapFixed = 2,
  // Fixed, 8 of every 16 column groups taking exp2 on the FMA pipe (ptx::exp2_poly).
  kCapFixedPoly8 = 3,
  // Fixed, tanh from MUFU ex2 + a quintic on the FMA pipe (ptx::tanh_from_exp2) instead of
  // MUFU tanh: an A/B probe of whether MUFU.TANH costs more than MUFU.EX2.
  kCapFixedExpTanh = 4,
  kCapFixedExpTanh8 = 5,  // fixed, half the tanhs that way (Bresenham columns), half on MUFU tanh
  // Fixed (fixed8), and the Q.K^T of a block without element mask issued as two 64-key halves,
  // committed separately: the softmax of the first half runs while the second half is still
  // on the tensor cores (the fixed max needs no row max over the whole block). Shortens each
  // warpgroup's QK -> softmax -> P.V chain by about half a QK GEMM (kernel.cuh). Costs more
  // shared-memory reads (Q is read once per half).
  kCapFixedHalves = 6,
  kCapFixedPoly8Halves = 7,
  // Fused (running max) with 8 of every 16 column groups taking exp2 on the FMA pipe: for the
  // kernels without the fixed max (hdim 64, whose consumer runs at 160 registers and is
  // MUFU-bound even without softcap).
  kCapFusedPoly8 = 8,
};

// Fixed-max modes: |exponent| <= cap log2 e <= this many log2 units, so P in [2^-75, 2^75]:
// normal in fp32 / bf16 with room for products with V and sums over 2^31 keys of |v| <= 2^20.
// Covers caps up to 52 (Gemma 2: 50).
inline constexpr double kFixedMaxLog2 = 75.0;
constexpr bool softcap_is_fixed(int mode) {
  return mode == kCapFixed || mode == kCapFixedPoly8 || mode == kCapFixedExpTanh || mode == kCapFixedExpTanh8 ||
         mode == kCapFixedHalves || mode == kCapFixedPoly8Halves;
}
// Whether a mode issues Q.K^T in two halves (where the kernel compiles it; elsewhere the mode
// runs as its one-GEMM counterpart).
constexpr bool softcap_halves(int mode) { return mode == kCapFixedHalves || mode == kCapFixedPoly8Halves; }
// Whether a fixed-max mode may run (else: kCapFused; kCapFusedPoly8 is not fixed).
constexpr bool softcap_fixed_ok(bool bf16_in, double cap) { return bf16_in && cap * 1.4426950408889634 <= kFixedMaxLog2; }
// The mode that replaces a fixed-max one where it may not run.
constexpr SoftcapMode softcap_unfixed(SoftcapMode m) { return softcap_is_fixed(m) ? kCapFused : m; }

// Whether column group c (8 key columns of the S fragment) takes the FMA-pipe exp2 when k of
// every 16 do: Bresenham spacing, so the polynomial and MUFU elements interleave evenly and
// exactly k of any 16 consecutive groups are chosen.
constexpr bool softcap_poly_col(int c, int k) { return (c % 16) * k / 16 != ((c % 16) + 1) * k / 16; }

// The mode used when LONGATTN_SOFTCAP_MODE is unset: fixed where allowed (the host maps it
// to fused elsewhere: f16 inputs, cap > 52; the kernels without it run fused too).
inline constexpr SoftcapMode kSoftcapDefault = kCapFixed;

// LONGATTN_SOFTCAP_MODE values: split, fused, fixed, fixed8, fixedx, fixedx8, fixedh, fixed8h,
// fused8; null, empty or unknown: the default. (LONGATTN_SOFTCAP_POLY=1, the earlier switch, is fixed8.)
inline SoftcapMode parse_softcap_mode(const char* s) {
  if (!s || !*s) return kSoftcapDefault;
  struct Name {
    const char* name;
    SoftcapMode mode;
  };
  static constexpr Name kNames[] = {{"split", kCapSplit},
                                    {"fused", kCapFused},
                                    {"fixed", kCapFixed},
                                    {"fixed8", kCapFixedPoly8},
                                    {"fixedx", kCapFixedExpTanh},
                                    {"fixedx8", kCapFixedExpTanh8},
                                    {"fixedh", kCapFixedHalves},
                                    {"fixed8h", kCapFixedPoly8Halves},
                                    {"fused8", kCapFusedPoly8}};
  for (const Name& n : kNames)
    if (std::strcmp(s, n.name) == 0) return n.mode;
  return kSoftcapDefault;
}

}  // namespace longattn::cuda::sm90
