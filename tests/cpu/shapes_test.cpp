// Sequence lengths from 1 to 4099, GQA ratios 1/4/8 and head dims 64/96/128/256 on the
// default (widest) kernel, sampled: the float64 reference dominates the cost, so the big
// shapes use masks or few heads that keep it to a few seconds.
#include <gtest/gtest.h>

#include "cpu/cpu_test_util.h"

namespace longattn::testing {
namespace {

struct Shape {
  int64_t seq_q, seq_k, heads_q, heads_kv, dim;
  bool causal;
  int64_t window;  // window_left (-1: none)
  DType dtype;
};

void PrintTo(const Shape& s, std::ostream* os) {
  *os << s.seq_q << "x" << s.seq_k << " h" << s.heads_q << "/" << s.heads_kv << " d" << s.dim
      << (s.causal ? " causal" : "") << " w" << s.window << " " << dtype_name(s.dtype);
}

class CpuShapes : public ::testing::TestWithParam<Shape> {};

TEST_P(CpuShapes, MatchesReference) {
  const Shape& sh = GetParam();
  CaseSpec s;
  s.batch = 1, s.seq_q = sh.seq_q, s.seq_k = sh.seq_k;
  s.heads_q = sh.heads_q, s.heads_kv = sh.heads_kv, s.dim_qk = s.dim_v = sh.dim;
  s.mask.causal = sh.causal, s.mask.window_left = sh.window;
  s.dtype = sh.dtype, s.out_dtype = sh.dtype == DType::f32 ? DType::f32 : DType::bf16;
  s.seed = uint64_t(sh.seq_q * 7 + sh.seq_k * 3 + sh.dim + sh.heads_q);
  EXPECT_EQ(cpu_check(s), "");
}

const Shape kShapes[] = {
    {1, 1, 4, 4, 64, false, -1, DType::bf16},
    {1, 1000, 8, 1, 128, true, -1, DType::bf16},   // decode-like: one query, long prefix
    {7, 7, 4, 1, 96, true, -1, DType::f16},
    {7, 127, 8, 2, 256, false, -1, DType::bf16},
    {127, 127, 4, 4, 128, true, -1, DType::f32},
    {127, 1000, 8, 2, 64, false, -1, DType::bf16},
    {1000, 1000, 4, 1, 128, true, -1, DType::bf16},
    {1000, 1000, 2, 2, 96, false, -1, DType::f32},
    {1000, 7, 4, 4, 256, false, -1, DType::bf16},
    {4099, 4099, 8, 1, 64, true, 200, DType::bf16},  // long, windowed to bound reference cost
    {4099, 4099, 1, 1, 128, true, -1, DType::bf16},
    {4099, 127, 2, 2, 256, true, -1, DType::f16},
};

INSTANTIATE_TEST_SUITE_P(Sampled, CpuShapes, ::testing::ValuesIn(kShapes));

}  // namespace
}  // namespace longattn::testing
