// The rule that sends fp8 calls at small head dims to the f16 kernels after the upcast
// (src/cuda/fp8_upcast_rule.h), on the host: the shapes it was measured on either side of its
// thresholds, and every exclusion.
#include <gtest/gtest.h>

#include "cuda/fp8_upcast_rule.h"

namespace longattn::cuda {
namespace {

detail::Problem fp8_call(int64_t sq, int64_t sk, int64_t dim, bool causal) {
  detail::Problem p;
  p.fp8 = true;
  p.batch = 2;
  p.heads_q = p.heads_kv = 16;
  p.dim_qk = p.dim_v = dim;
  p.max_seq_q = sq;
  p.max_seq_k = sk;
  p.mask.causal = causal;
  return p;
}

TEST(Fp8UpcastRule, MeasuredShapesEitherSideOfTheThresholds) {
  // The upcast won from 1024 visible keys per row on (docs/history/PERFORMANCE-sessions-16-33.md,
  // "FP8 at head dims up to 64 on the f16 kernel after the upcast").
  EXPECT_TRUE(fp8_upcast_faster(fp8_call(1024, 1024, 64, false)));   // 16 x 1k full
  EXPECT_FALSE(fp8_upcast_faster(fp8_call(1024, 1024, 64, true)));   // 16 x 1k causal: 512 visible
  EXPECT_TRUE(fp8_upcast_faster(fp8_call(2048, 2048, 64, true)));    // 8 x 2k causal: 1024 visible
  EXPECT_TRUE(fp8_upcast_faster(fp8_call(16384, 16384, 64, true)));
  EXPECT_TRUE(fp8_upcast_faster(fp8_call(1100, 1100, 40, false)));   // narrower dims alike
  EXPECT_FALSE(fp8_upcast_faster(fp8_call(2045, 2045, 64, true)));   // 1023 visible: no
  EXPECT_FALSE(fp8_upcast_faster(fp8_call(4096, 4096, 128, false))); // the fp8 kernel's own dim
  detail::Problem split = fp8_call(4096, 4096, 64, false);
  split.dim_v = 128;
  EXPECT_FALSE(fp8_upcast_faster(split));  // v wider than 64
}

TEST(Fp8UpcastRule, Exclusions) {
  const detail::Problem base = fp8_call(4096, 4096, 64, true);
  ASSERT_TRUE(fp8_upcast_faster(base));
  detail::Problem p = base;
  p.fp8 = false;
  EXPECT_FALSE(fp8_upcast_faster(p)) << "16-bit inputs";
  p = base;
  p.kv = detail::KvLayout::paged;
  EXPECT_FALSE(fp8_upcast_faster(p)) << "paged: the copy would hold the whole pool";
  p = base;
  p.kv = detail::KvLayout::ragged;
  EXPECT_TRUE(fp8_upcast_faster(p)) << "ragged K / V";
  p = base;
  p.has_seqused_k = true;
  EXPECT_FALSE(fp8_upcast_faster(p)) << "seqused_k: the extent is a capacity";
  p = base;
  p.mask.window_left = 512;
  EXPECT_FALSE(fp8_upcast_faster(p)) << "window";
  p = base;
  p.mask.chunk = 1024;
  EXPECT_FALSE(fp8_upcast_faster(p)) << "chunk";
  p = fp8_call(1, 32768, 64, false);
  EXPECT_FALSE(fp8_upcast_faster(p)) << "a decode step against a long cache";
  p = fp8_call(512, 65536, 64, false);
  EXPECT_FALSE(fp8_upcast_faster(p)) << "short queries";
}

}  // namespace
}  // namespace longattn::cuda
