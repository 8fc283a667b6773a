// Element conversions: exhaustive round trips and the round-to-nearest-even edge cases.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "common/problem.h"

namespace longattn::detail {
namespace {

float decode(DType t, uint32_t code) { return load_as_float(&code, t, 0); }
uint32_t encode(DType t, float x) {
  uint32_t code = 0;
  store_from_float(&code, t, 0, x);
  return code;
}
float round_trip(DType t, float x) { return decode(t, encode(t, x)); }

TEST(Elements, Bf16EveryCodeRoundTrips) {
  for (uint32_t c = 0; c < 0x10000; ++c) {
    float x = decode(DType::bf16, c);
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(round_trip(DType::bf16, x)));
      continue;
    }
    ASSERT_EQ(encode(DType::bf16, x), c) << std::hex << c;
  }
}

TEST(Elements, Bf16RoundsToNearestEven) {
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1).
  EXPECT_EQ(round_trip(DType::bf16, 1.0f + std::ldexp(1.0f, -8)), 1.0f);
  // 1 + 3*2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even).
  EXPECT_EQ(round_trip(DType::bf16, 1.0f + 3 * std::ldexp(1.0f, -8)), 1.0f + std::ldexp(1.0f, -6));
  EXPECT_EQ(round_trip(DType::bf16, 1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)),
            1.0f + std::ldexp(1.0f, -7));
  EXPECT_TRUE(std::isinf(round_trip(DType::bf16, 3.4e38f)));  // rounds past the largest bf16
  EXPECT_TRUE(std::isnan(round_trip(DType::bf16, std::nanf(""))));
}

TEST(Elements, F16EveryCodeRoundTrips) {
  for (uint32_t c = 0; c < 0x10000; ++c) {
    float x = decode(DType::f16, c);
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(round_trip(DType::f16, x)));
      continue;
    }
    ASSERT_EQ(encode(DType::f16, x), c) << std::hex << c;
  }
}

TEST(Elements, F16RoundsToNearestEven) {
  EXPECT_EQ(decode(DType::f16, 0x7bff), 65504.0f);
  EXPECT_EQ(round_trip(DType::f16, 65519.0f), 65504.0f);
  EXPECT_TRUE(std::isinf(round_trip(DType::f16, 65520.0f)));  // the tie rounds up to inf
  EXPECT_EQ(round_trip(DType::f16, 1.0f + std::ldexp(1.0f, -11)), 1.0f);
  EXPECT_EQ(round_trip(DType::f16, 1.0f + 3 * std::ldexp(1.0f, -11)), 1.0f + std::ldexp(1.0f, -9));
  // Subnormals: unit 2^-24; half a unit ties to 0, three quarters round up.
  EXPECT_EQ(decode(DType::f16, 0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(round_trip(DType::f16, std::ldexp(1.0f, -25)), 0.0f);
  EXPECT_EQ(round_trip(DType::f16, 3 * std::ldexp(1.0f, -26)), std::ldexp(1.0f, -24));
  EXPECT_EQ(round_trip(DType::f16, 3 * std::ldexp(1.0f, -25)), 2 * std::ldexp(1.0f, -24));
  EXPECT_EQ(encode(DType::f16, -0.0f), 0x8000u);
  // Just below the smallest normal rounds up into it.
  EXPECT_EQ(encode(DType::f16, std::ldexp(1.0f, -14) * (1.0f - std::ldexp(1.0f, -13))), 0x0400u);
}

TEST(Elements, E4m3Format) {
  EXPECT_EQ(decode(DType::e4m3, 0x7e), 448.0f);                  // the largest finite
  EXPECT_TRUE(std::isnan(decode(DType::e4m3, 0x7f)));            // S.1111.111 is NaN
  EXPECT_TRUE(std::isnan(decode(DType::e4m3, 0xff)));
  EXPECT_EQ(decode(DType::e4m3, 0x78), 256.0f);                  // exponent 15 is finite
  EXPECT_EQ(decode(DType::e4m3, 0x38), 1.0f);                    // bias 7
  EXPECT_EQ(decode(DType::e4m3, 0x01), std::ldexp(1.0f, -9));    // smallest subnormal
  EXPECT_EQ(decode(DType::e4m3, 0x08), std::ldexp(1.0f, -6));    // smallest normal
  EXPECT_EQ(decode(DType::e4m3, 0xb8), -1.0f);
}

TEST(Elements, E4m3EveryCodeRoundTrips) {
  for (uint32_t c = 0; c < 0x100; ++c) {
    float x = decode(DType::e4m3, c);
    if (std::isnan(x)) continue;
    ASSERT_EQ(encode(DType::e4m3, x), c) << std::hex << c;
  }
}

TEST(Elements, E4m3RoundsToNearestEvenAndSaturates) {
  EXPECT_EQ(round_trip(DType::e4m3, 1.0625f), 1.0f);    // tie between 1 and 1.125 -> even
  EXPECT_EQ(round_trip(DType::e4m3, 1.1875f), 1.25f);   // tie between 1.125 and 1.25 -> even
  EXPECT_EQ(round_trip(DType::e4m3, 1.07f), 1.125f);
  EXPECT_EQ(round_trip(DType::e4m3, 500.0f), 448.0f);   // saturating (satfinite)
  EXPECT_EQ(round_trip(DType::e4m3, -1e9f), -448.0f);
  EXPECT_EQ(round_trip(DType::e4m3, std::ldexp(1.0f, -10)), 0.0f);  // tie with 0 -> 0
  EXPECT_EQ(round_trip(DType::e4m3, 3 * std::ldexp(1.0f, -11)), std::ldexp(1.0f, -9));
  EXPECT_TRUE(std::isnan(round_trip(DType::e4m3, std::nanf(""))));
}

TEST(Elements, LoadAsDoubleIsExact) {
  float f = 0.1f;
  EXPECT_EQ(load_as_double(&f, DType::f32, 0), double(0.1f));
  int32_t i = -123456789;
  EXPECT_EQ(load_as_double(&i, DType::i32, 0), -123456789.0);
}

}  // namespace
}  // namespace longattn::detail
