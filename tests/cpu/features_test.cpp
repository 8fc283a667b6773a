// Every feature of the API on the CPU backend, per kernel ISA, against the float64
// reference. Sizes are odd and straddle the kernel's tiles (64 keys, 4/6/12-row strips,
// ~128-row work items) so that partial tiles, boundary masks and padding rows all occur.
#include <gtest/gtest.h>

#include "cpu/cpu_test_util.h"

namespace longattn::testing {
namespace {

class CpuFeatures : public PerIsaTest {};

CaseSpec base(uint64_t seed) {
  CaseSpec s;
  s.batch = 2, s.seq_q = 131, s.seq_k = 203, s.heads_q = 4, s.heads_kv = 2;
  s.dim_qk = 64, s.dim_v = 64, s.seed = seed;
  return s;
}

TEST_P(CpuFeatures, NoMask) {
  EXPECT_EQ(check(base(1)), "");
}

TEST_P(CpuFeatures, CausalBottomRightAndTopLeft) {
  for (bool tl : {false, true}) {
    for (auto [sq, sk] : {std::pair{131, 203}, std::pair{203, 131}, std::pair{70, 70}}) {
      CaseSpec s = base(2 + sq);
      s.seq_q = sq, s.seq_k = sk;
      s.mask.causal = true;
      s.mask.align = tl ? CausalAlign::top_left : CausalAlign::bottom_right;
      EXPECT_EQ(check(s), "") << "top_left " << tl << " sq " << sq << " sk " << sk;
    }
  }
}

TEST_P(CpuFeatures, SlidingWindows) {
  const std::pair<int64_t, int64_t> windows[] = {{0, 0}, {17, -1}, {-1, 9}, {40, 5}, {100, 100}};
  for (auto [l, r] : windows) {
    for (bool causal : {false, true}) {
      if (causal && r > 0) continue;  // validation rejects a right window under causal
      CaseSpec s = base(10 + uint64_t(l) * 3 + uint64_t(r));
      s.mask.window_left = l, s.mask.window_right = r, s.mask.causal = causal;
      EXPECT_EQ(check(s), "") << "window " << l << "," << r << " causal " << causal;
    }
  }
}

TEST_P(CpuFeatures, ChunkedAttention) {
  for (int64_t chunk : {1, 16, 50, 64}) {
    for (bool causal : {false, true}) {
      CaseSpec s = base(20 + uint64_t(chunk));
      s.mask.chunk_size = chunk, s.mask.causal = causal;
      EXPECT_EQ(check(s), "") << "chunk " << chunk << " causal " << causal;
    }
  }
}

TEST_P(CpuFeatures, ChunkWithWindow) {
  // Chunk and window both bound the keys (the intersection): chunks wider and narrower than
  // the window and than a 64-key tile, with causal, left-only and two-sided windows.
  struct M { int64_t chunk, wl, wr; bool causal; };
  for (const M m : {M{16, 5, -1, true}, M{50, 70, -1, true}, M{64, 20, 0, true}, M{33, 4, 9, false},
                    M{100, -1, 30, false}, M{1, 0, 0, false}}) {
    CaseSpec s = base(200 + uint64_t(m.chunk + m.wl));
    s.mask.chunk_size = m.chunk, s.mask.window_left = m.wl, s.mask.window_right = m.wr;
    s.mask.causal = m.causal;
    EXPECT_EQ(cpu_check(s), "") << "chunk " << m.chunk << " window " << m.wl << "," << m.wr;
  }
  CaseSpec r = base(210);  // ragged, GQA 4, sinks
  r.ragged_q = r.ragged_k = true, r.batch = 3, r.heads_q = 8, r.sinks = true;
  r.mask.chunk_size = 40, r.mask.window_left = 25, r.mask.causal = true;
  EXPECT_EQ(cpu_check(r), "");
}

TEST_P(CpuFeatures, SeqUsedQ) {
  // Rows past seqused_q[b] stay untouched (run_and_check poisons them first); the masks
  // align to the used rows. Dense, ragged, paged with seqused_k, across work-item sizes.
  CaseSpec d = base(220);
  d.batch = 4, d.used_q = {131, 0, 1, 70}, d.mask.causal = true;
  EXPECT_EQ(cpu_check(d), "");
  CaseSpec r = base(221);
  r.batch = 4, r.ragged_q = r.ragged_k = true, r.seqlens_q = {131, 64, 0, 5}, r.used_q = {100, 64, 0, 2};
  r.mask.window_left = 40, r.mask.causal = true, r.sinks = true;
  EXPECT_EQ(cpu_check(r), "");
  CaseSpec p = base(222);
  p.batch = 3, p.seqused_q = true, p.seqused_k = true, p.page_size = 16, p.heads_q = 8;
  p.mask.chunk_size = 30, p.mask.causal = true;
  EXPECT_EQ(cpu_check(p), "");
}

TEST_P(CpuFeatures, EmptyKeySets) {
  // Every key sequence empty: zeros and LSE -inf (or the sink), as FA3.
  for (bool sinks : {false, true}) {
    CaseSpec s = base(230 + sinks);
    s.batch = 3, s.ragged_q = s.ragged_k = true, s.seqlens_k = {0, 0, 0}, s.seq_k = 0, s.sinks = sinks;
    EXPECT_EQ(cpu_check(s), "") << "sinks " << sinks;
    CaseSpec d = base(232 + sinks);
    d.seq_k = 0, d.sinks = sinks, d.mask.causal = true;
    EXPECT_EQ(cpu_check(d), "") << "dense, sinks " << sinks;
  }
}

TEST_P(CpuFeatures, GqaRatios) {
  for (int64_t g : {1, 3, 4, 8}) {
    CaseSpec s = base(30 + uint64_t(g));
    s.heads_kv = 2, s.heads_q = 2 * g, s.seq_q = 77;
    s.mask.causal = true;
    EXPECT_EQ(check(s), "") << "group " << g;
  }
}

TEST_P(CpuFeatures, HeadDims) {
  const std::pair<int64_t, int64_t> dims[] = {{64, 64}, {96, 96}, {128, 128}, {256, 256},
                                              {1, 1},   {33, 72}, {192, 128}, {80, 200},
                                              {64, 512}, {64, 256}, {40, 300}};  // FA3: q/k <= 64, v <= 512
  for (auto [dq, dv] : dims) {
    CaseSpec s = base(40 + uint64_t(dq + dv));
    s.dim_qk = dq, s.dim_v = dv, s.seq_q = 45, s.seq_k = 97;
    s.mask.causal = (dq % 2) == 0;
    EXPECT_EQ(check(s), "") << "dims " << dq << "/" << dv;
  }
}

TEST_P(CpuFeatures, InputAndOutputDtypes) {
  for (DType in : {DType::bf16, DType::f16, DType::f32}) {
    for (DType out : {DType::bf16, DType::f16, DType::f32}) {
      CaseSpec s = base(50 + uint64_t(in) * 3 + uint64_t(out));
      s.dtype = in, s.out_dtype = out, s.seq_q = 67;
      s.mask.causal = true;
      EXPECT_EQ(check(s), "") << dtype_name(in) << " -> " << dtype_name(out);
    }
  }
}

TEST_P(CpuFeatures, Fp8WithDescales) {
  for (DType out : {DType::bf16, DType::f32}) {
    for (bool causal : {false, true}) {
      CaseSpec s = base(60 + uint64_t(out) + causal);
      s.dtype = DType::e4m3, s.out_dtype = out, s.mask.causal = causal;
      s.amp = 3.0f;  // spread the values over more e4m3 codes
      EXPECT_EQ(check(s), "") << "out " << dtype_name(out) << " causal " << causal;
    }
  }
}

TEST_P(CpuFeatures, Fp8LongKeysGqa) {
  // Several 256-key tiles (the AMX kernel's), GQA 4, descales per (batch, kv head).
  CaseSpec s = base(65);
  s.dtype = DType::e4m3, s.out_dtype = DType::bf16, s.seq_q = 70, s.seq_k = 600;
  s.heads_q = 8, s.heads_kv = 2, s.mask.causal = true, s.sinks = true, s.amp = 2.0f;
  EXPECT_EQ(check(s), "");
}

TEST_P(CpuFeatures, RaggedBatches) {
  CaseSpec s = base(70);
  s.batch = 5, s.ragged_q = s.ragged_k = true;
  s.seqlens_q = {131, 0, 1, 64, 65};
  s.seqlens_k = {140, 7, 0, 200, 65};
  s.seq_q = 131, s.seq_k = 200;
  for (bool causal : {false, true}) {
    s.mask.causal = causal;
    EXPECT_EQ(check(s), "") << "causal " << causal;
  }
  // Ragged queries against dense keys, and the reverse.
  CaseSpec a = base(71);
  a.ragged_q = true, a.mask.causal = true;
  EXPECT_EQ(check(a), "");
  CaseSpec b = base(72);
  b.ragged_k = true, b.mask.window_left = 30;
  EXPECT_EQ(check(b), "");
}

TEST_P(CpuFeatures, PagedKv) {
  for (int64_t page : {1, 16, 64, 100}) {
    CaseSpec s = base(80 + uint64_t(page));
    s.page_size = page, s.mask.causal = true;
    EXPECT_EQ(check(s), "") << "page " << page;
  }
}

TEST_P(CpuFeatures, SequsedK) {
  for (int64_t page : {0, 32}) {
    CaseSpec s = base(90 + uint64_t(page));
    s.batch = 4, s.seqused_k = true, s.page_size = page, s.mask.causal = true;
    EXPECT_EQ(check(s), "") << "page " << page;
  }
}

TEST_P(CpuFeatures, KvPrefixAndCrossAttention) {
  // Chunked prefill: 37 new queries after a 300-key prefix (bottom-right causal).
  CaseSpec p = base(100);
  p.seq_q = 37, p.seq_k = 337, p.mask.causal = true;
  EXPECT_EQ(check(p), "");
  // Cross-attention: unrelated lengths, no mask.
  CaseSpec x = base(101);
  x.seq_q = 150, x.seq_k = 19;
  EXPECT_EQ(check(x), "");
}

TEST_P(CpuFeatures, SinksSoftcapScale) {
  for (int variant = 0; variant < 4; ++variant) {
    CaseSpec s = base(110 + uint64_t(variant));
    s.sinks = variant & 1;
    s.softcap = (variant & 2) ? 5.0f : 0.0f;
    s.amp = 2.0f;  // logits large enough for the softcap to bend them
    if (variant == 3) s.softmax_scale = 0.7f;
    s.mask.causal = variant >= 2;
    EXPECT_EQ(check(s), "") << "variant " << variant;
  }
}

TEST_P(CpuFeatures, SinksOnRowsWithNoVisibleKey) {
  // seq_q > seq_k with bottom-right causal: the first rows see no key. With sinks their LSE
  // is the sink and the output 0; without, LSE -inf.
  for (bool sinks : {false, true}) {
    CaseSpec s = base(120 + sinks);
    s.seq_q = 90, s.seq_k = 30, s.mask.causal = true, s.sinks = sinks;
    EXPECT_EQ(check(s), "") << "sinks " << sinks;
  }
}

TEST_P(CpuFeatures, PaddedStrides) {
  CaseSpec s = base(130);
  s.padded = true, s.mask.causal = true, s.sinks = true;
  EXPECT_EQ(check(s), "");
  s.ragged_q = s.ragged_k = true;
  EXPECT_EQ(check(s), "");
}

TEST_P(CpuFeatures, Combinations) {
  // Paged + seqused + GQA 8 + sinks + softcap + window + f16 in / f32 out.
  CaseSpec a = base(140);
  a.heads_q = 16, a.heads_kv = 2, a.page_size = 16, a.seqused_k = true, a.sinks = true;
  a.softcap = 10.0f, a.mask.causal = true, a.mask.window_left = 50;
  a.dtype = DType::f16, a.out_dtype = DType::f32, a.dim_qk = a.dim_v = 128;
  EXPECT_EQ(check(a), "");
  // Ragged + chunked + fp8 + LSE + head dim 96.
  CaseSpec b = base(141);
  b.ragged_q = b.ragged_k = true, b.batch = 3, b.mask.chunk_size = 33, b.mask.causal = true;
  b.dtype = DType::e4m3, b.dim_qk = b.dim_v = 96;
  EXPECT_EQ(check(b), "");
  // Top-left causal + window right + padded + sinks + MQA.
  CaseSpec c = base(142);
  c.heads_q = 6, c.heads_kv = 1, c.mask.causal = true, c.mask.align = CausalAlign::top_left;
  c.mask.window_left = 20, c.padded = true, c.sinks = true, c.lse = true;
  EXPECT_EQ(check(c), "");
}

INSTANTIATE_TEST_SUITE_P(Isa, CpuFeatures, ::testing::ValuesIn(cpu_isas()), isa_name);

}  // namespace
}  // namespace longattn::testing
