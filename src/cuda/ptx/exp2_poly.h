// FMA-pipe math for the softcapped softmax (sm90/softmax.cuh, sm90/softcap_mode.h): with
// softcap every logit needs a tanh and an exp2 on the MUFU (16 ops per clock per SM, as long
// as the tensor cores take for the tile at head dim 128); these move part of that work to
// the FMA pipe: 2^x (exp2_poly), and tanh from an ex2 (tanh_from_w).
//
// Host and device: the host test (tests/gpu/test_exp2_poly.cpp) runs this exact arithmetic
// (fmaf is correctly rounded on both) against exp2 / tanh in double.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define LONGATTN_HD __host__ __device__ __forceinline__
#else
#define LONGATTN_HD inline
#endif

namespace longattn::cuda::ptx {

// Minimax coefficients of 2^f ~ 1 + f (c1 + f (c2 + f c3)) on f in [-1/2, 1/2] for relative
// error (Remez, constant term pinned to exactly 1): max relative error 4.32e-4 = 2^-11.18,
// under the bf16 rounding of P (2^-9) and a fraction of the softcap's own tanh.approx error
// (cap * 2^-11 in natural-log units). The pinned 1 is what makes x = -inf give exactly 0.
inline constexpr float kExp2C1 = 0.695766831f;
inline constexpr float kExp2C2 = 0.242030512f;
inline constexpr float kExp2C3 = 0.0416987494f;
// The bound the host test checks and the kernel relies on (normal results, x in [-126, 127]).
inline constexpr double kExp2PolyMaxRelErr = 4.4e-4;

LONGATTN_HD int32_t f32_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_int(x);
#else
  int32_t i;
  std::memcpy(&i, &x, 4);
  return i;
#endif
}
LONGATTN_HD float bits_f32(int32_t i) {
#if defined(__CUDA_ARCH__)
  return __int_as_float(i);
#else
  float x;
  std::memcpy(&x, &i, 4);
  return x;
#endif
}
// a + b rounded to nearest, never contracted into an FMA (the rounding trick needs it).
LONGATTN_HD float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  volatile float s = a + b;
  return s;
#endif
}

// 2^x = 2^n 2^f: n = rint(x) by the 1.5 * 2^23 trick (n lands in the low mantissa bits of
// j), f = x - n in [-1/2, 1/2], 2^f by the cubic above, and n added into the exponent field
// (one LEA: j << 23 keeps n's low 9 bits, two's complement). 8 instructions: FMNMX, 3 FADD,
// 3 FFMA, LEA.
// Range: x < 128 (the softmax keeps x <= the lazy-rescale threshold, 8 by default).
// x <= -127, -inf and NaN give exactly +0 (the clamp makes n = -127, f = 0, y = 1.0: the
// bits sum to 0), which keeps masked keys and rows without a visible key exact. Results in
// (-127, -126) are denormals below 2^-126 (ex2.approx.ftz gives 0 there).
LONGATTN_HD float exp2_poly(float x) {
  const float xc = fmaxf(x, -127.f);
  const float j = add_rn(xc, 12582912.f);
  const float f = xc - add_rn(j, -12582912.f);
  float y = fmaf(kExp2C3, f, kExp2C2);
  y = fmaf(y, f, kExp2C1);
  y = fmaf(y, f, 1.f);
  return bits_f32(int32_t(uint32_t(f32_bits(y)) + (uint32_t(f32_bits(j)) << 23)));
}

// tanh(u) from w = 2^(-2 |u| log2 e) (MUFU ex2 on the device) and the sign of u:
// (1 - w) / (1 + w) by a quintic minimax in w on [0, 1] (Remez, absolute error 7.43e-5 =
// 2^-13.7, below tanh.approx.f32's 2^-11), copysign'd. 5 FFMA + 1 LOP3 besides the ex2 and
// its FMUL: moves tanh off the MUFU's tanh op onto its ex2 op (softcap_mode.h kCapFixedExpTanh).
inline constexpr float kTanhW0 = 0.999925662f, kTanhW1 = -1.99388312f, kTanhW2 = 1.91725268f,
                       kTanhW3 = -1.5698507f, kTanhW4 = 0.868318387f, kTanhW5 = -0.221837253f;
inline constexpr double kTanhFromWMaxAbsErr = 7.5e-5;  // host test bound (w exact in float)
LONGATTN_HD float tanh_from_w(float w, float sign_of) {
  float y = fmaf(kTanhW5, w, kTanhW4);
  y = fmaf(y, w, kTanhW3);
  y = fmaf(y, w, kTanhW2);
  y = fmaf(y, w, kTanhW1);
  y = fmaf(y, w, kTanhW0);
  return copysignf(y, sign_of);
}

}  // namespace longattn::cuda::ptx
