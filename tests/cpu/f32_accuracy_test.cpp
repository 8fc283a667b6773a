// f32 inputs on every kernel ISA at fp32 accuracy. Under "amx" they run on the tile unit
// split into three bf16 planes (src/cpu/amx_split_mma.h); the absolute slack here is 1e-6
// instead of the default 1e-3, so the oracle's "2 x naive f32 error" term decides: a kernel
// that lost the low planes (bf16 accuracy, ~1e-3) fails every case.
#include <gtest/gtest.h>

#include "cpu/cpu_test_util.h"

namespace longattn::testing {
namespace {

constexpr double kF32Slack = 1e-6;

CaseSpec f32(uint64_t seed) {
  CaseSpec s;
  s.batch = 2, s.seq_q = 131, s.seq_k = 203, s.heads_q = 4, s.heads_kv = 2;
  s.dim_qk = s.dim_v = 64, s.seed = seed;
  s.dtype = s.out_dtype = DType::f32;
  return s;
}

class CpuF32Accuracy : public PerIsaTest {};

TEST_P(CpuF32Accuracy, ManyKeyTilesAndMasks) {
  CaseSpec a = f32(1001);  // several 256-key tiles, partial last tile
  a.seq_q = 75, a.seq_k = 777;
  EXPECT_EQ(check(a, 0, kF32Slack), "");
  for (bool tl : {false, true}) {
    CaseSpec c = f32(1002 + tl);
    c.mask.causal = true, c.mask.align = tl ? CausalAlign::top_left : CausalAlign::bottom_right;
    EXPECT_EQ(check(c, 0, kF32Slack), "") << "top_left " << tl;
  }
  CaseSpec w = f32(1004);
  w.mask.window_left = 17, w.mask.causal = true;
  EXPECT_EQ(check(w, 0, kF32Slack), "");
  CaseSpec k = f32(1005);
  k.mask.chunk_size = 50, k.mask.causal = true;
  EXPECT_EQ(check(k, 0, kF32Slack), "");
}

TEST_P(CpuF32Accuracy, HeadDims) {
  const std::pair<int64_t, int64_t> dims[] = {{1, 1}, {33, 72}, {80, 200}, {128, 128}, {256, 256}};
  for (auto [dq, dv] : dims) {
    CaseSpec s = f32(1010 + uint64_t(dq + dv));
    s.dim_qk = dq, s.dim_v = dv, s.seq_q = 45, s.seq_k = 300, s.mask.causal = dq % 2 == 0;
    EXPECT_EQ(check(s, 0, kF32Slack), "") << "dims " << dq << "/" << dv;
  }
}

TEST_P(CpuF32Accuracy, SinksSoftcapScaleGqa) {
  CaseSpec s = f32(1020);
  s.heads_q = 16, s.heads_kv = 2, s.sinks = true, s.softcap = 5.0f, s.amp = 2.0f;
  s.softmax_scale = 0.7f, s.mask.causal = true;
  EXPECT_EQ(check(s, 0, kF32Slack), "");
}

TEST_P(CpuF32Accuracy, RaggedPagedPadded) {
  CaseSpec r = f32(1030);
  r.batch = 4, r.ragged_q = r.ragged_k = true, r.seqlens_q = {131, 0, 1, 70}, r.seqlens_k = {203, 7, 0, 70};
  r.mask.causal = true;
  EXPECT_EQ(check(r, 0, kF32Slack), "");
  CaseSpec p = f32(1031);
  p.page_size = 16, p.seqused_k = true, p.mask.causal = true, p.sinks = true;
  EXPECT_EQ(check(p, 0, kF32Slack), "");
  CaseSpec d = f32(1032);
  d.padded = true, d.heads_q = 6, d.heads_kv = 1, d.lse = true;
  EXPECT_EQ(check(d, 0, kF32Slack), "");
}

// Values far from 1 (each plane keeps its own exponent): tiny and huge inputs.
TEST_P(CpuF32Accuracy, WideExponentRange) {
  for (float amp : {1e-20f, 1e15f}) {
    CaseSpec s = f32(1040);
    s.amp = amp, s.softmax_scale = amp > 1.0f ? 1e-30f : 1e20f, s.mask.causal = true;
    EXPECT_EQ(check(s, 0, kF32Slack * (amp > 1.0f ? amp : 1.0f)), "") << "amp " << amp;
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, CpuF32Accuracy, ::testing::ValuesIn(cpu_isas()), isa_name);

}  // namespace
}  // namespace longattn::testing
