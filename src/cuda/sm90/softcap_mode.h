// How the feature kernel computes softcapped logits (softmax.cuh): one MUFU tanh and one
// MUFU exp2 per logit saturate the MUFU at head dim 128 (16 ops per clock per SM: exactly the
// tensor-core time of the tile), so the variants move work off it. Chosen per call on the
// host (forward_sm90.cpp, LONGATTN_SOFTCAP_MODE for A/B measurement); host-testable.
#pragma once

#include <cstdint>
#include <cstring>

namespace longattn::cuda::sm90 {

enum SoftcapMode : int32_t {
  // tanh pass over the block, then the element mask, then the softmax (max, exp2): every
  // op on the MUFU, the max waits for the last tanh. The first implementation.
  kCapSplit = 0,
  // Mask first, row max on the raw logits (tanh is monotonic: one tanh per row caps it),
  // then tanh + exp2 per logit in one pass: no MUFU-idle gap between a tanh pass and the
  // max. Every op on the MUFU.
  kCapFused = 1,
  // Fused, with k of every 16 column groups taking exp2 on the FMA pipe (ptx::exp2_poly).
  kCapPoly4 = 2,
  kCapPoly6 = 3,
  kCapPoly8 = 4,
  kCapPoly10 = 5,
  kCapPoly12 = 6,
  // Fused, tanh through tanh.approx.f16x2 (every exp2 on the MUFU).
  kCapTanhF16 = 7,
  // Fixed max: capped logits lie in [-cap, cap], so the softmax subtracts a constant m0 =
  // max(0, sink) (tanh units) instead of a running max: no row max, no shuffles, no O
  // rescale; P = 2^((t - m0) cap log2 e) stays within 2^+-kFixedMaxLog2 (softcap_fixed_ok).
  // bf16 inputs only (P in bf16 keeps fp32's exponent range; f16 P would underflow).
  kCapFixed = 8,
  kCapFixedPoly8 = 9,   // fixed, 8 of 16 exp2s on the FMA pipe
  kCapFixedPoly12 = 10, // fixed, 12 of 16
};

// Fixed-max modes: |exponent| <= cap log2 e <= this many log2 units, so P in [2^-75, 2^75]:
// normal in fp32 / bf16 with room for products with V and sums over 2^31 keys of |v| <= 2^20.
// Covers caps up to 52 (Gemma 2: 50).
inline constexpr double kFixedMaxLog2 = 75.0;
constexpr bool softcap_is_fixed(int mode) {
  return mode == kCapFixed || mode == kCapFixedPoly8 || mode == kCapFixedPoly12;
}
// Whether a fixed-max mode may run (else: the running-max mode with the same FMA split).
constexpr bool softcap_fixed_ok(bool bf16_in, double cap) { return bf16_in && cap * 1.4426950408889634 <= kFixedMaxLog2; }
// The mode that replaces a fixed-max one where it may not run.
constexpr SoftcapMode softcap_unfixed(SoftcapMode m) {
  return m == kCapFixed ? kCapFused : m == kCapFixedPoly8 ? kCapPoly8 : m == kCapFixedPoly12 ? kCapPoly12 : m;
}

// Sixteenths of the exp2s on the FMA pipe for a mode (0 for the all-MUFU ones).
constexpr int softcap_poly16(int mode) {
  return mode == kCapPoly4                              ? 4
         : mode == kCapPoly6                            ? 6
         : mode == kCapPoly8 || mode == kCapFixedPoly8  ? 8
         : mode == kCapPoly10                           ? 10
         : mode == kCapPoly12 || mode == kCapFixedPoly12 ? 12
                                                        : 0;
}

// Whether column group c (8 key columns of the S fragment) takes the FMA-pipe exp2 when k of
// every 16 do: Bresenham spacing, so the polynomial and MUFU elements interleave evenly and
// exactly k of any 16 consecutive groups are chosen.
constexpr bool softcap_poly_col(int c, int k) { return (c % 16) * k / 16 != ((c % 16) + 1) * k / 16; }

// The mode used when LONGATTN_SOFTCAP_MODE is unset (docs/PERFORMANCE.md has the A/B).
inline constexpr SoftcapMode kSoftcapDefault = kCapSplit;

// LONGATTN_SOFTCAP_MODE values: split, fused, poly4, poly6, poly8, poly10, poly12, f16, fixed,
// fixed8, fixed12;
// null, empty or unknown: the default. (LONGATTN_SOFTCAP_POLY=1, the earlier switch, is
// poly8.)
inline SoftcapMode parse_softcap_mode(const char* s) {
  if (!s || !*s) return kSoftcapDefault;
  struct Name {
    const char* name;
    SoftcapMode mode;
  };
  static constexpr Name kNames[] = {{"split", kCapSplit},   {"fused", kCapFused},   {"poly4", kCapPoly4},
                                    {"poly6", kCapPoly6},   {"poly8", kCapPoly8},   {"poly10", kCapPoly10},
                                    {"poly12", kCapPoly12}, {"f16", kCapTanhF16},
                                    {"fixed", kCapFixed},   {"fixed8", kCapFixedPoly8}, {"fixed12", kCapFixedPoly12}};
  for (const Name& n : kNames)
    if (std::strcmp(s, n.name) == 0) return n.mode;
  return kSoftcapDefault;
}

}  // namespace longattn::cuda::sm90
