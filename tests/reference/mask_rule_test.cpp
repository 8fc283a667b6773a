// The visibility rule (src/common/mask_rule.h): visible_range is exactly the set of keys
// key_visible accepts, for every mask kind, alignment and position -- including negative
// positions (bottom-right alignment with more queries than keys).
#include <gtest/gtest.h>

#include "common/mask_rule.h"

namespace longattn::detail {
namespace {

TEST(MaskRule, RangeEqualsPointwiseRule) {
  int64_t checked = 0;
  for (int causal = 0; causal < 2; ++causal)
    for (int64_t wl : {-1, 0, 1, 5, 40})
      for (int64_t wr : {-1, 0, 2, 9})
        for (int64_t chunk : {0, 1, 3, 8}) {
          MaskRule m;
          m.causal = causal, m.window_left = wl, m.window_right = wr, m.chunk = chunk;
          for (int64_t seq_k : {0, 1, 7, 30})
            for (int64_t p = -12; p < 40; ++p) {
              int64_t lo, hi;
              visible_range(m, p, seq_k, &lo, &hi);
              ASSERT_LE(lo, hi);
              for (int64_t j = 0; j < seq_k; ++j) {
                ASSERT_EQ(key_visible(m, p, j), j >= lo && j < hi)
                    << "causal " << causal << " wl " << wl << " wr " << wr << " chunk " << chunk
                    << " p " << p << " j " << j;
                ++checked;
              }
            }
        }
  EXPECT_GT(checked, 50000);
}

TEST(MaskRule, Alignment) {
  MaskRule m;
  EXPECT_EQ(m.offset(5, 9), 4);  // bottom-right: the last query sees the last key
  m.top_left = true;
  EXPECT_EQ(m.offset(5, 9), 0);
}

}  // namespace
}  // namespace longattn::detail
