// The FMA-pipe 2^x of the softcapped softmax (cuda/ptx/exp2_poly.h) and the softcap mode
// table (cuda/sm90/softcap_mode.h), on the host: the same float arithmetic the kernel runs
// (fmaf is correctly rounded on both sides), against exp2 in double. Needs no GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <algorithm>
#include <cstdio>
#include <limits>

#include "cuda/ptx/exp2_poly.h"
#include "cuda/sm90/softcap_mode.h"

namespace longattn::cuda {
namespace {

uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

double rel_err(float x) { return std::fabs(double(ptx::exp2_poly(x)) / std::exp2(double(x)) - 1.0); }

// Every float in [-126, 127] whose low mantissa bits are a multiple of `stride` (both signs),
// plus a dense walk over one period of the fraction f: the whole input range the softmax can
// produce with a normal result.
TEST(Exp2Poly, RelativeErrorOverTheNormalRange) {
  double worst = 0.0;
  float at = 0.f;
  auto check = [&](float x) {
    const double e = rel_err(x);
    if (!(e <= worst)) {
      worst = e;
      at = x;
    }
  };
  for (float sign : {1.f, -1.f}) {
    for (uint32_t u = 0; u <= bits(127.f); u += 61) {  // odd stride: every exponent, varied mantissas
      float x;
      std::memcpy(&x, &u, 4);
      x *= sign;
      if (x >= -126.f) check(x);
    }
  }
  for (int i = 0; i <= 1 << 20; ++i) check(-0.5f + float(i) / float(1 << 20));  // f in [-1/2, 1/2]
  for (int i = 0; i <= 1 << 16; ++i) check(-126.f + 253.f * float(i) / float(1 << 16));
  printf("exp2_poly: max relative error %.3e at x = %.9g (bound %.2e)\n", worst, at,
         ptx::kExp2PolyMaxRelErr);
  EXPECT_LE(worst, ptx::kExp2PolyMaxRelErr);
  // The bound is tight (a looser polynomial or a broken range reduction would show): the
  // Remez error of the cubic is 4.31e-4.
  EXPECT_GE(worst, 0.95 * 4.31e-4);
}

TEST(Exp2Poly, ExactPointsAndRoundingTies) {
  for (int n = -126; n <= 127; ++n) {
    EXPECT_EQ(ptx::exp2_poly(float(n)), std::ldexp(1.f, n)) << n;  // f = 0: y = 1 exactly
  }
  // Halfway points round to even n; either side must be continuous within the bound.
  for (float x : {-0.5f, 0.5f, 1.5f, 2.5f, -3.5f, -125.5f, 126.5f}) {
    EXPECT_LE(rel_err(x), ptx::kExp2PolyMaxRelErr) << x;
    EXPECT_LE(rel_err(std::nextafter(x, -1000.f)), ptx::kExp2PolyMaxRelErr) << x;
    EXPECT_LE(rel_err(std::nextafter(x, 1000.f)), ptx::kExp2PolyMaxRelErr) << x;
  }
}

// Masked logits reach the exponent as -inf and rows that have seen no key subtract 0: P must
// be exactly 0 there (an l > 0 would turn an empty row into a mean of V).
TEST(Exp2Poly, ZeroBelowTheRangeAndForMinusInfinityAndNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {-inf, -1e30f, -1000.f, -200.f, -127.f, -std::nextafter(127.f, 0.f) - 0.25f}) {
    if (x > -127.f) continue;
    EXPECT_EQ(bits(ptx::exp2_poly(x)), 0u) << x;  // +0, not -0 or a denormal
  }
  EXPECT_EQ(bits(ptx::exp2_poly(std::numeric_limits<float>::quiet_NaN())), 0u);
  // (-127, -126): denormal or tiny, never negative, never above 2^-126.
  for (int i = 1; i < 1000; ++i) {
    const float x = -127.f + float(i) / 1000.f;
    const float y = ptx::exp2_poly(x);
    EXPECT_GE(y, 0.f) << x;
    EXPECT_LE(y, std::ldexp(1.f, -126)) << x;
    EXPECT_FALSE(std::signbit(y)) << x;
  }
}

// The softmax keeps x <= the lazy-rescale threshold (8 by default); up to just below 128 the
// result stays finite and within the bound.
TEST(Exp2Poly, TopOfTheRange) {
  for (float x : {8.f, 8.49f, 64.3f, 126.9f, 127.f, 127.49f}) {
    EXPECT_TRUE(std::isfinite(ptx::exp2_poly(x))) << x;
    EXPECT_LE(rel_err(x), ptx::kExp2PolyMaxRelErr) << x;
  }
}

TEST(SoftcapMode, PolyColumnsAreExactAndSpread) {
  for (int k = 0; k <= 16; ++k) {
    int n = 0, run = 0, longest = 0;
    for (int c = 0; c < 16; ++c) {
      const bool p = sm90::softcap_poly_col(c, k);
      n += p;
      run = p ? 0 : run + 1;
      longest = std::max(longest, run);
    }
    EXPECT_EQ(n, k) << k;
    // Even spacing: no run of MUFU-only groups longer than ceil(16 / k).
    if (k > 0) {
      EXPECT_LE(longest, (16 + k - 1) / k) << k;
    }
  }
  // 80-key blocks (hdim 256) have 10 groups: the rule is periodic in 16.
  EXPECT_EQ(sm90::softcap_poly_col(17, 8), sm90::softcap_poly_col(1, 8));
}

TEST(SoftcapMode, ParsesEveryName) {
  EXPECT_EQ(sm90::parse_softcap_mode(nullptr), sm90::kSoftcapDefault);
  EXPECT_EQ(sm90::parse_softcap_mode(""), sm90::kSoftcapDefault);
  EXPECT_EQ(sm90::parse_softcap_mode("bogus"), sm90::kSoftcapDefault);
  EXPECT_EQ(sm90::parse_softcap_mode("split"), sm90::kCapSplit);
  EXPECT_EQ(sm90::parse_softcap_mode("fused"), sm90::kCapFused);
  EXPECT_EQ(sm90::parse_softcap_mode("fixed"), sm90::kCapFixed);
  EXPECT_EQ(sm90::parse_softcap_mode("fixed8"), sm90::kCapFixedPoly8);
  EXPECT_EQ(sm90::parse_softcap_mode("fixedx"), sm90::kCapFixedExpTanh);
  EXPECT_EQ(sm90::parse_softcap_mode("fixedx8"), sm90::kCapFixedExpTanh8);
  EXPECT_EQ(sm90::parse_softcap_mode("fixedh"), sm90::kCapFixedHalves);
  EXPECT_EQ(sm90::parse_softcap_mode("fixed8h"), sm90::kCapFixedPoly8Halves);
  EXPECT_EQ(sm90::parse_softcap_mode("fused8"), sm90::kCapFusedPoly8);
  EXPECT_TRUE(sm90::softcap_is_fixed(sm90::kCapFixedHalves) && sm90::softcap_is_fixed(sm90::kCapFixedPoly8Halves));
  EXPECT_FALSE(sm90::softcap_is_fixed(sm90::kCapFusedPoly8));
  EXPECT_TRUE(sm90::softcap_halves(sm90::kCapFixedPoly8Halves) && !sm90::softcap_halves(sm90::kCapFixedPoly8));
  EXPECT_EQ(sm90::softcap_unfixed(sm90::kCapFixedHalves), sm90::kCapFused);
  EXPECT_EQ(sm90::softcap_unfixed(sm90::kCapFusedPoly8), sm90::kCapFusedPoly8);
  EXPECT_EQ(sm90::softcap_unfixed(sm90::kCapFixedExpTanh8), sm90::kCapFused);
  EXPECT_EQ(sm90::kSoftcapDefault, sm90::kCapFixed);
}

// tanh from w = 2^(-2 |u| log2 e) (the fixedx mode): the quintic's absolute error over the
// whole range of u, both signs, including the saturated tail (w -> 0) and u = 0 (w = 1).
TEST(TanhFromW, AbsoluteErrorOverTheWholeRange) {
  double worst = 0.0, at = 0.0;
  auto check = [&](double u) {
    const float w = float(std::exp2(-2.0 * std::fabs(u) * 1.4426950408889634));
    const double e = std::fabs(double(ptx::tanh_from_w(w, float(u))) - std::tanh(u));
    if (!(e <= worst)) {
      worst = e;
      at = u;
    }
  };
  for (int i = -400000; i <= 400000; ++i) check(double(i) * 5e-5);  // [-20, 20]
  for (double u : {0.0, -0.0, 1e-30, 30.0, -30.0, 100.0, 1e30, -1e30}) check(u);
  printf("tanh_from_w: max absolute error %.3e at u = %.6g (bound %.2e)\n", worst, at,
         ptx::kTanhFromWMaxAbsErr);
  EXPECT_LE(worst, ptx::kTanhFromWMaxAbsErr);
  EXPECT_GE(worst, 0.9 * 7.43e-5);  // the Remez error: a broken coefficient would show
  EXPECT_LT(ptx::kTanhFromWMaxAbsErr, 1.0 / 2048.0);  // no worse than tanh.approx.f32 (2^-11)
}

// Fixed-max modes: the exponent (t - m0) cap log2 e with t in [-1, 1] and m0 = max(0, sink)
// stays within [-kFixedMaxLog2, kFixedMaxLog2] for the keys that matter (below that only where
// a sink outweighs them by more than 2^75), so P and its products stay normal; bf16 only.
TEST(SoftcapMode, FixedMaxRangeAndFallback) {
  EXPECT_TRUE(sm90::softcap_fixed_ok(true, 50.0));   // Gemma 2
  EXPECT_TRUE(sm90::softcap_fixed_ok(true, 51.9));
  EXPECT_FALSE(sm90::softcap_fixed_ok(true, 52.1));
  EXPECT_FALSE(sm90::softcap_fixed_ok(false, 10.0));  // f16 P: 2^-14 would underflow
  EXPECT_EQ(sm90::softcap_unfixed(sm90::kCapFixed), sm90::kCapFused);
  EXPECT_EQ(sm90::softcap_unfixed(sm90::kCapFixedPoly8), sm90::kCapFused);
  EXPECT_EQ(sm90::softcap_unfixed(sm90::kCapFixedExpTanh), sm90::kCapFused);
  EXPECT_EQ(sm90::softcap_unfixed(sm90::kCapSplit), sm90::kCapSplit);
  const float lo = float(-sm90::kFixedMaxLog2), hi = float(sm90::kFixedMaxLog2);
  EXPECT_GE(ptx::exp2_poly(lo), std::ldexp(1.f, -126) * 1e6f);  // normal, far from the bottom
  EXPECT_LE(rel_err(lo), ptx::kExp2PolyMaxRelErr);
  EXPECT_LE(rel_err(hi), ptx::kExp2PolyMaxRelErr);
  EXPECT_LT(double(ptx::exp2_poly(hi)) * 1048576.0 * 2147483648.0, double(std::numeric_limits<float>::max()));
}

}  // namespace
}  // namespace longattn::cuda
