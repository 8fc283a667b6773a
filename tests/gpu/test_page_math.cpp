// Host-only: the paged producer's arithmetic (cuda/sm90/page_math.h) against plain integer
// division and a direct search for the box size.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>

#include "cuda/sm90/page_math.h"

namespace longattn::cuda::sm90 {
namespace {

TEST(PageMath, DivisionByMultiplyHighIsExact) {
  std::mt19937_64 rng(5);
  std::vector<uint32_t> divisors;
  for (uint32_t d = 1; d <= 1100; ++d) divisors.push_back(d);
  for (uint32_t d : {4095u, 4096u, 65537u, 1u << 20, (1u << 30) + 7, 0x7FFFFFFFu}) divisors.push_back(d);
  for (int i = 0; i < 200; ++i) divisors.push_back(uint32_t(rng() % 0x7FFFFFFF) + 1);
  int64_t bad = 0, checked = 0;
  for (uint32_t d : divisors) {
    const PageDiv pd = make_page_div(d);
    auto check = [&](uint32_t n) {
      bad += page_div(n, pd.magic, pd.shift) != n / d;
      ++checked;
    };
    // Around every multiple of d below 4d + small values, then the top of the range, then random.
    for (uint32_t k = 0; k < 5; ++k)
      for (int64_t e = -2; e <= 2; ++e) {
        const int64_t n = int64_t(k) * d + e;
        if (n >= 0 && n < (int64_t(1) << 31)) check(uint32_t(n));
      }
    for (uint32_t n = 0x7FFFFFFFu - 3000; n <= 0x7FFFFFFFu && n >= 0x7FFFFFFFu - 3000; ++n) check(n);
    for (int i = 0; i < 3000; ++i) check(uint32_t(rng() & 0x7FFFFFFF));
  }
  EXPECT_EQ(bad, 0) << "of " << checked;
}

TEST(PageMath, BoxShiftIsLargestPowerOfTwoDividingThePage) {
  for (int bn : {64, 128}) {
    for (int64_t page = 1; page <= 2000; ++page) {
      const int s = box_shift_for(page, bn);
      int64_t best = 1;
      for (int64_t r = 1; r <= bn; r *= 2)
        if (page % r == 0) best = r;
      EXPECT_EQ(int64_t(1) << s, best) << "page " << page << " block_n " << bn;
    }
  }
  EXPECT_EQ(box_shift_for(16, 128), 4);
  EXPECT_EQ(box_shift_for(3, 128), 0);
  EXPECT_EQ(box_shift_for(384, 128), 7);
  EXPECT_EQ(box_shift_for(100, 64), 2);
}

}  // namespace
}  // namespace longattn::cuda::sm90
