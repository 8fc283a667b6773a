// The CUDA forward kernel against the float64 reference under the oracle rule, on random
// shapes: odd and tail lengths, seq_q != seq_k, GQA/MQA, the three head dims, causal
// (bottom-right and top-left) and not, batch > 1, bf16/fp16 inputs, bf16/fp16/f32 outputs.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "gpu_case.h"

namespace longattn::gputest {
namespace {

bool have_gpu() { return cuda_available(); }

class GpuForward : public ::testing::TestWithParam<Shape> {};

// Softcap runs tanh.approx.f32 (max relative error 2^-11, as FlashAttention-3), so a capped
// logit may be off by up to cap * 2^-11 beyond what the naive float computation shows; the
// absolute tolerance grows by that bound (it moves the LSE by at most as much).
double atol_for(const Shape& s) { return 1e-3 + (s.softcap > 0 ? double(s.softcap) / 2048.0 : 0.0); }

TEST_P(GpuForward, MatchesReference) {
  if (!have_gpu()) GTEST_SKIP() << "no sm_90 device";
  const Shape& s = GetParam();
  CheckResult r = run_case(s, atol_for(s));
  printf("%-48s err %.2e naive %.2e lse %.2e (naive %.2e) rows %lld\n", s.name().c_str(), r.max_err,
         r.naive_err, r.lse_err, r.lse_naive, (long long)r.rows_checked);
  EXPECT_TRUE(r.failure.empty()) << s.name() << ": " << r.failure;
  if (s.unread != 0.f) EXPECT_GT(r.unread_set, 0) << s.name() << ": nothing was unread (the case tests nothing)";
}

Shape S(int64_t b, int64_t sq, int64_t sk, int64_t hq, int64_t hkv, int64_t d, bool causal,
        DType in = DType::bf16, DType out = DType::bf16) {
  Shape s = dense_shape(b, sq, sk, hq, hkv, d, causal);
  s.in = in;
  s.out = out;
  s.seed = uint64_t(b * 131 + sq * 7 + sk * 3 + hq + d + causal);
  // The float64 reference is single-threaded: check every row of short sequences and a
  // sample (edges, tile boundaries, random) of long ones.
  s.rows_per_head = sq * sk > 4096LL * 4096 ? 24 : 64;
  return s;
}

std::vector<Shape> core_cases() {
  std::vector<Shape> v;
  for (bool c : {false, true}) {
    v.push_back(S(1, 1, 1, 2, 2, 128, c));
    v.push_back(S(2, 17, 17, 4, 4, 128, c));
    v.push_back(S(1, 128, 128, 8, 1, 128, c));    // MQA
    v.push_back(S(3, 1000, 1000, 8, 2, 128, c));  // GQA 4, batch 3
    v.push_back(S(1, 4097, 4097, 8, 1, 128, c));  // GQA 8, tails
    v.push_back(S(1, 300, 1000, 4, 4, 128, c));   // seq_q < seq_k (KV prefix)
    v.push_back(S(1, 1000, 300, 4, 2, 128, c));   // seq_q > seq_k: causal rows with no key
    v.push_back(S(2, 777, 513, 4, 4, 64, c));
    v.push_back(S(1, 1000, 1000, 6, 2, 64, c));
    v.push_back(S(2, 333, 1111, 4, 1, 256, c));
    v.push_back(S(1, 1000, 1000, 4, 4, 256, c));
    v.push_back(S(2, 500, 700, 4, 2, 128, c, DType::f16, DType::f16));
    v.push_back(S(1, 600, 600, 4, 4, 64, c, DType::f16, DType::f32));
    v.push_back(S(1, 600, 650, 4, 4, 256, c, DType::bf16, DType::f32));
  }
  // Non-causal hdim 128 with 4k..16k keys runs the 128 x 192 tile (tile_size.h
  // default_variant): f16 in, f32 out, GQA, odd lengths.
  v.push_back(S(2, 700, 3001, 4, 2, 128, false, DType::f16, DType::f32));
  Shape tl = S(1, 300, 1000, 4, 4, 128, true);
  tl.top_left = true;
  v.push_back(tl);
  Shape hot = S(1, 2000, 2000, 2, 2, 128, false);  // large logits: peaked softmax, many max jumps
  hot.scale = 1.0f;
  hot.q_range = 2.f;
  v.push_back(hot);
  Shape nolse = S(1, 129, 257, 2, 2, 128, true);
  nolse.lse = false;
  v.push_back(nolse);
  // Strided layout: token rows padded by 8 elements (16 bytes: TMA-legal); also through
  // backend automatic, which must pick CUDA for device tensors.
  for (int64_t d : {64, 128, 256}) {
    Shape pad = S(2, 300, 333, 4, 2, d, d == 128);
    pad.pad = 8;
    pad.automatic = d == 64;
    v.push_back(pad);
  }
  return v;
}

std::vector<Shape> long_cases() {
  std::vector<Shape> v;
  for (bool c : {false, true}) {
    Shape s = S(1, 16384, 16384, 2, 1, 128, c);
    s.rows_per_head = 20;
    v.push_back(s);
  }
  return v;
}

// Issue 5: softcap, sinks, sliding windows, chunks (the feature kernel), alone and together,
// on odd sizes, GQA, the three head dims, both alignments; windows smaller than a tile,
// straddling tiles, and rows that see no key at all (with and without sinks).
Shape F(int64_t b, int64_t sq, int64_t sk, int64_t hq, int64_t hkv, int64_t d, bool causal) {
  Shape s = S(b, sq, sk, hq, hkv, d, causal);
  s.seed += 1000;
  return s;
}
Shape cap(Shape s, float c) { s.softcap = c; return s; }
Shape sinks(Shape s, float lo = -1.f, float hi = 4.f) { s.sinks = true; s.sink_lo = lo; s.sink_hi = hi; return s; }
Shape win(Shape s, int64_t l, int64_t r) { s.window_left = l; s.window_right = r; return s; }
Shape chunk(Shape s, int64_t c) { s.chunk = c; return s; }
Shape tl(Shape s) { s.top_left = true; return s; }

std::vector<Shape> feature_cases() {
  std::vector<Shape> v;
  // Softcap and sinks on dense masks.
  v.push_back(cap(F(2, 1000, 1000, 4, 2, 128, false), 8.f));
  v.push_back(cap(F(1, 777, 777, 4, 4, 128, true), 20.f));
  v.push_back(cap(F(1, 500, 600, 6, 2, 64, true), 5.f));
  v.push_back(cap(F(1, 333, 555, 4, 1, 256, false), 10.f));
  v.push_back(sinks(F(2, 1000, 1000, 4, 2, 128, false)));
  v.push_back(sinks(F(1, 777, 901, 4, 4, 128, true)));
  v.push_back(sinks(F(1, 300, 300, 4, 2, 128, true), 6.f, 12.f));  // the sink dominates
  v.push_back(sinks(F(1, 1000, 300, 4, 2, 128, true)));           // rows with no key: LSE = sink
  v.push_back(sinks(F(1, 400, 500, 6, 3, 64, true)));
  v.push_back(sinks(F(2, 250, 333, 4, 2, 256, true)));
  {
    Shape s = cap(sinks(F(1, 600, 700, 4, 2, 128, true)), 15.f);
    s.in = DType::f16;
    s.out = DType::f32;
    v.push_back(s);
  }
  v.push_back(cap(sinks(F(1, 513, 513, 2, 2, 64, false)), 6.f));
  {
    Shape s = sinks(F(1, 200, 300, 2, 2, 128, false));
    s.lse = false;
    v.push_back(s);
  }
  // Sliding windows: smaller than a tile, straddling tile edges, wider than the sequence.
  v.push_back(win(F(1, 1000, 1000, 4, 2, 128, true), 0, -1));      // only the diagonal
  v.push_back(win(F(1, 1000, 1000, 4, 2, 128, true), 5, -1));
  v.push_back(win(F(2, 1111, 1111, 4, 1, 128, true), 127, -1));
  v.push_back(win(F(1, 1000, 1000, 4, 2, 128, true), 128, -1));
  v.push_back(win(F(1, 2000, 2000, 4, 2, 128, true), 300, -1));
  v.push_back(win(F(1, 700, 700, 4, 4, 128, false), 5, 3));        // symmetric, tiny
  v.push_back(win(F(1, 900, 1300, 4, 2, 128, false), 200, 77));
  v.push_back(win(F(1, 900, 900, 4, 2, 128, false), -1, 50));      // right only
  v.push_back(win(F(1, 500, 500, 2, 2, 128, false), 5000, 5000));  // wider than everything
  v.push_back(win(F(1, 300, 1000, 4, 4, 128, true), 64, -1));      // KV prefix, bottom-right
  v.push_back(tl(win(F(1, 1000, 300, 4, 2, 128, false), 5, 0)));  // top-left: rows > 305 see nothing
  v.push_back(sinks(tl(win(F(1, 1000, 300, 4, 2, 128, false), 5, 0))));
  v.push_back(win(F(2, 777, 777, 6, 2, 64, true), 100, -1));
  v.push_back(win(F(1, 800, 800, 4, 2, 64, false), 33, 190));
  v.push_back(win(F(1, 600, 700, 4, 2, 256, true), 90, -1));
  v.push_back(win(F(1, 600, 600, 4, 4, 256, false), 17, 200));
  // Chunked attention (llama4: with causal), chunk below, at and above the tile.
  v.push_back(chunk(F(1, 1000, 1000, 4, 2, 128, true), 128));
  v.push_back(chunk(F(1, 1000, 1000, 4, 2, 128, true), 100));
  v.push_back(chunk(F(2, 1500, 1500, 4, 1, 128, true), 333));
  v.push_back(chunk(F(1, 900, 900, 4, 4, 128, false), 50));
  v.push_back(chunk(F(1, 300, 1000, 4, 2, 128, true), 256));  // bottom-right alignment
  v.push_back(tl(chunk(F(1, 1000, 300, 4, 2, 128, true), 64)));
  v.push_back(chunk(F(1, 700, 700, 6, 2, 64, true), 77));
  v.push_back(chunk(F(1, 500, 500, 4, 2, 256, true), 200));
  v.push_back(chunk(F(1, 400, 400, 2, 2, 128, true), 100000));  // larger than the sequence
  // Everything at once (the API takes a window or a chunk, not both).
  v.push_back(cap(sinks(win(F(1, 1200, 1200, 4, 2, 128, true), 150, -1)), 12.f));
  v.push_back(cap(sinks(chunk(F(1, 1200, 1200, 4, 2, 256, true), 512)), 12.f));
  v.push_back(cap(sinks(win(F(2, 500, 640, 4, 2, 64, false), 40, 40)), 9.f));
  return v;
}

// Ragged batches (device cu_seqlens, Args max_seqlen_q/k) and seqused_k: sequences of length
// 0 and 1 beside long ones, seq_q != seq_k per sequence, both alignments, GQA, the three head
// dims, with the other features.
Shape R(std::vector<int32_t> lq, std::vector<int32_t> lk, int64_t hq, int64_t hkv, int64_t d, bool causal,
        uint64_t seed) {
  Shape s = F(1, 1, 1, hq, hkv, d, causal);
  s.lens_q = std::move(lq);
  s.lens_k = std::move(lk);
  s.seed = seed;
  s.rows_per_head = 48;
  return s;
}

std::vector<Shape> ragged_cases() {
  std::vector<Shape> v;
  const std::vector<int32_t> a = {100, 0, 1, 517, 1000, 33};
  v.push_back(R(a, a, 4, 2, 128, false, 1));
  v.push_back(R(a, a, 4, 2, 128, true, 2));
  v.push_back(R({50, 1, 0, 300, 129}, {200, 7, 5, 300, 1000}, 4, 1, 128, true, 3));  // per-sequence KV prefix
  v.push_back(tl(R({50, 1, 0, 300, 129}, {200, 7, 5, 300, 1000}, 4, 4, 128, true, 4)));
  v.push_back(R({300, 0, 77}, {}, 4, 2, 128, true, 5));  // ragged q, dense k (seq_k below)
  v.back().seq_k = 400;
  v.push_back(R({}, {333, 1, 0, 64}, 4, 2, 128, false, 6));  // dense q, ragged k
  v.back().seq_q = 150;
  v.push_back(R(a, a, 6, 2, 64, true, 7));
  v.push_back(R(a, a, 4, 2, 256, true, 8));
  v.push_back(cap(sinks(win(R(a, a, 4, 2, 64, true, 9), 60, -1)), 10.f));
  v.push_back(sinks(chunk(R(a, a, 4, 2, 128, true, 10), 128)));
  {
    Shape s = R({123, 0, 456, 1}, {700, 3, 456, 0}, 4, 2, 128, true, 11);  // a sequence without keys
    s.sinks = true;
    s.in = DType::f16;
    s.out = DType::f32;
    v.push_back(s);
  }
  // seqused_k: dense k with fewer keys used (0 included), and ragged k with it.
  {
    Shape s = F(3, 200, 500, 4, 2, 128, true);
    s.used_k = {500, 0, 123};
    v.push_back(s);
    s = F(3, 200, 500, 4, 2, 128, false);
    s.used_k = {17, 499, 256};
    s.sinks = true;
    v.push_back(s);
    s = R({300, 200}, {300, 200}, 4, 2, 128, true, 12);
    s.used_k = {250, 0};
    v.push_back(s);
  }
  // Many sequences of mixed lengths (one long one beside short ones).
  {
    std::mt19937_64 rng(99);
    std::vector<int32_t> lq, lk;
    for (int i = 0; i < 24; ++i) {
      const int32_t n = i == 5 ? 6000 : int32_t(rng() % 1500);
      lq.push_back(n);
      lk.push_back(n);
    }
    Shape s = R(lq, lk, 4, 1, 128, true, 13);
    s.rows_per_head = 12;
    v.push_back(s);
  }
  return v;
}

// Keys that no output reads hold NaN / Inf (Shape::unread): unused cache rows past
// seqused_k (dense k), a packed k's rows past seqused_k, and the keys of neighbouring
// sequences without queries, which a sequence's last K/V tile fetches (TMA loads whole
// tiles; P = 0 does not cancel 0 * NaN in P.V). Tails of 1, 63, 65, 127 rows; the three
// head dims; with windows, sinks, softcap.
Shape unread(Shape s, float v) { s.unread = v; return s; }

std::vector<Shape> unread_cases() {
  std::vector<Shape> v;
  const float nan = NAN, inf = INFINITY;
  {
    Shape s = F(3, 200, 500, 4, 2, 128, false);
    s.used_k = {77, 300, 129};
    v.push_back(unread(s, nan));
    s.causal = true;
    v.push_back(unread(s, inf));
    s = F(3, 150, 333, 6, 2, 64, true);
    s.used_k = {1, 191, 255};
    v.push_back(unread(s, nan));
    s = F(2, 100, 200, 4, 2, 256, false);
    s.used_k = {65, 127};
    s.sinks = true;
    v.push_back(unread(s, nan));
    v.push_back(unread(s, -inf));
  }
  // Packed k: sequences 1 and 3 have keys but no queries (poisoned); 0, 2 and 4 end inside
  // a tile, so their last tiles reach into them.
  const std::vector<int32_t> lq = {100, 0, 300, 0, 57}, lk = {130, 200, 300, 77, 190};
  v.push_back(unread(R(lq, lk, 4, 2, 128, false, 30), nan));
  v.push_back(unread(R(lq, lk, 4, 2, 128, true, 31), inf));
  v.push_back(unread(R(lq, lk, 6, 2, 64, true, 32), nan));
  v.push_back(unread(R(lq, lk, 4, 1, 256, false, 33), nan));
  v.push_back(unread(cap(sinks(win(R(lq, lk, 4, 2, 128, true, 34), 70, -1)), 10.f), nan));
  {
    Shape s = R({300, 200, 50}, {300, 200, 64}, 4, 2, 128, true, 35);  // packed k + seqused_k
    s.used_k = {250, 3, 64};
    v.push_back(unread(s, nan));
  }
  return v;
}

// q / k head dim 192 with v head dim 128 (DeepSeek-style; the ragged kernel, whatever the
// features): dense, GQA / MQA, odd sizes, both alignments, rows with no key, f16 -> f32,
// strided rows, softcap + sinks + window, ragged + seqused_k with unread keys poisoned.
Shape split(Shape s) { s.dim = 192; s.dim_v = 128; s.seed += 500; return s; }

std::vector<Shape> split_cases() {
  std::vector<Shape> v;
  for (bool c : {false, true}) {
    v.push_back(split(S(2, 333, 555, 4, 2, 192, c)));
    v.push_back(split(S(1, 1000, 1000, 8, 1, 192, c)));
    v.push_back(split(S(1, 1, 1, 2, 2, 192, c)));
  }
  v.push_back(split(S(1, 1000, 300, 4, 2, 192, true)));  // rows without keys
  v.push_back(tl(split(S(1, 300, 1000, 4, 4, 192, true))));
  v.push_back(split(S(1, 500, 700, 4, 2, 192, true, DType::f16, DType::f32)));
  {
    Shape s = split(S(2, 300, 333, 4, 2, 192, false));
    s.pad = 8;
    v.push_back(s);
  }
  v.push_back(cap(sinks(win(split(S(1, 900, 900, 4, 2, 192, true)), 150, -1)), 12.f));
  v.push_back(unread(split(R({100, 0, 300, 0, 57}, {130, 200, 300, 77, 190}, 4, 2, 192, true, 40)), NAN));
  {
    Shape s = split(F(3, 200, 500, 4, 2, 192, false));
    s.used_k = {77, 300, 129};
    v.push_back(unread(s, INFINITY));
  }
  return v;
}

std::vector<Shape> long_feature_cases() {
  std::vector<Shape> v;
  Shape s = win(F(1, 20000, 20000, 2, 1, 128, true), 4096, -1);
  s.rows_per_head = 24;
  v.push_back(s);
  s = cap(sinks(chunk(F(1, 16384, 16384, 2, 1, 128, true), 8192)), 20.f);
  s.rows_per_head = 24;
  v.push_back(s);
  return v;
}

std::string case_name(const ::testing::TestParamInfo<Shape>& i) { return i.param.name(); }

INSTANTIATE_TEST_SUITE_P(Core, GpuForward, ::testing::ValuesIn(core_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Long, GpuForward, ::testing::ValuesIn(long_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Features, GpuForward, ::testing::ValuesIn(feature_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Ragged, GpuForward, ::testing::ValuesIn(ragged_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Unread, GpuForward, ::testing::ValuesIn(unread_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(SplitDims, GpuForward, ::testing::ValuesIn(split_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(LongFeatures, GpuForward, ::testing::ValuesIn(long_feature_cases()), case_name);

// A moving result is a race: the same inputs must give bitwise the same output.
TEST(GpuForwardDeterminism, SameInputsSameBits) {
  if (!have_gpu()) GTEST_SKIP() << "no sm_90 device";
  for (bool c : {false, true}) {
    Shape s = S(2, 1500, 1500, 4, 2, 128, c);
    s.rows_per_head = 4;
    CheckResult a = run_case(s), b = run_case(s);
    ASSERT_TRUE(a.failure.empty()) << a.failure;
    EXPECT_TRUE(a.out_bytes == b.out_bytes) << s.name() << ": outputs differ between runs";
  }
}

// Causal tiles are ordered in L2 sections of (batch, head) pairs; a section size that does
// not divide the pair count must still cover every tile exactly once (poisoned outputs).
TEST(GpuForwardSchedule, CausalSectionsCoverEveryTile) {
  if (!have_gpu()) GTEST_SKIP() << "no sm_90 device";
  for (int64_t n : {3, 1, 0}) {
    Shape s = S(3, 700, 900, 5, 1, 128, true);
    s.rows_per_head = 16;
    s.ov.sections = n;
    CheckResult r = run_case(s);
    EXPECT_TRUE(r.failure.empty()) << "sections " << n << ": " << r.failure;
  }
}

// Both softcap modes (cuda/sm90/softcap_mode.h: fixed max by default, forced off = the running
// max) against the reference. Both cap inside the softmax on blocks without an element mask
// and before the mask on masked ones, so the cases mix both: causal and windowed tiles, rows
// that see no key (top-left window; output 0, LSE = -inf or the sink), sinks, a saturated tanh
// (scale 1: raw logits of tens), f16 -> f32 and cap > 52 (fixed falls back to fused), sinks
// far above every logit (fixed: m0 = the sink), the three head dims (fixed runs as fused on the
// three-warpgroup hdim-64 tile), and the hdim-64 cases again through the ragged kernel's
// two-warpgroup tile (seqused_k set), where the fixed max compiles.
TEST(GpuForwardSoftcap, EveryMode) {
  if (!have_gpu()) GTEST_SKIP() << "no sm_90 device";
  std::vector<Shape> cases;
  {
    Shape s = S(1, 700, 900, 4, 2, 128, true);
    s.softcap = 10.f;
    s.sinks = true;
    cases.push_back(s);
  }
  {
    Shape s = S(2, 513, 1000, 4, 4, 128, false);
    s.softcap = 5.f;
    s.scale = 1.f;
    cases.push_back(s);
  }
  cases.push_back(cap(tl(win(F(1, 1000, 300, 4, 2, 128, false), 5, 0)), 20.f));
  cases.push_back(cap(sinks(tl(win(F(1, 900, 300, 2, 2, 128, false), 9, 0))), 7.f));
  {
    Shape s = cap(sinks(F(1, 600, 777, 4, 2, 128, true)), 50.f);
    s.scale = 1.f;
    s.in = DType::f16;
    s.out = DType::f32;
    cases.push_back(s);
  }
  {
    Shape s = cap(sinks(F(1, 640, 700, 4, 2, 128, true), 6.f, 12.f), 50.f);  // bf16: fixed max applies
    s.scale = 1.f;
    cases.push_back(s);
  }
  cases.push_back(cap(sinks(F(1, 300, 500, 2, 2, 128, false), 30.f, 80.f), 50.f));  // sink above every logit
  cases.push_back(cap(F(1, 400, 500, 2, 2, 128, false), 60.f));  // cap > 52: fixed falls back
  cases.push_back(cap(F(1, 500, 600, 6, 2, 64, true), 8.f));
  cases.push_back(cap(sinks(F(1, 333, 555, 4, 1, 256, false)), 10.f));
  // hdim 64 non-causal with sinks, cap 30 (the bench's shape kind): odd lengths, two batches.
  cases.push_back(cap(sinks(F(2, 449, 647, 4, 2, 64, false)), 30.f));
  // The hdim-64 cases again on the ragged kernel's two-warpgroup tile (seqused_k = every
  // sequence's full length: the same keys), where the fixed max compiles at hdim 64.
  const size_t n_plain = cases.size();
  for (size_t i = 0; i < n_plain; ++i)
    if (cases[i].dim == 64) {
      Shape s = cases[i];
      s.used_k.assign(size_t(s.batch), int32_t(s.seq_k));
      cases.push_back(s);
    }
  for (bool fixed : {true, false}) {
    for (size_t i = 0; i < cases.size(); ++i) {
      Shape s = cases[i];
      s.ov.softcap_fixed = fixed ? detail::Force::rule : detail::Force::off;
      s.seed += 77;
      s.rows_per_head = 24;
      CheckResult r = run_case(s, atol_for(s));
      const char* mode = fixed ? "fixed" : "fused";
      printf("%-7s %-48s err %.2e naive %.2e lse %.2e (naive %.2e)\n", mode, s.name().c_str(), r.max_err,
             r.naive_err, r.lse_err, r.lse_naive);
      EXPECT_TRUE(r.failure.empty()) << mode << " " << s.name() << ": " << r.failure;
    }
  }
}

// What the kernel cannot serve yet is refused by name, and nothing is written.
TEST(GpuForwardUnsupported, RefusedWithNamedStatus) {
  if (!have_gpu()) GTEST_SKIP() << "no sm_90 device";
  void *q, *o;
  ASSERT_EQ(cudaMalloc(&q, 1 << 20), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&o, 1 << 20), cudaSuccess);
  ASSERT_EQ(cudaMemset(o, 0xFF, 1 << 20), cudaSuccess);
  Device g{DeviceKind::cuda, 0};
  auto base = [&](int64_t d) {
    Args a;
    a.q = make_tensor(q, DType::bf16, {1, 16, 2, d}, g);
    a.k = make_tensor(q, DType::bf16, {1, 16, 2, d}, g);
    a.v = make_tensor(q, DType::bf16, {1, 16, 2, d}, g);
    a.out = make_tensor(o, DType::bf16, {1, 16, 2, d}, g);
    a.backend = Backend::cuda;
    return a;
  };
  Args a = base(96);
  Status st = forward(a);
  EXPECT_EQ(st.code(), Status::Code::not_supported) << st.message();
  a = base(128);
  a.v = make_tensor(q, DType::bf16, {1, 16, 2, 64}, g);
  a.out = make_tensor(o, DType::bf16, {1, 16, 2, 64}, g);
  st = forward(a);
  EXPECT_EQ(st.code(), Status::Code::not_supported) << st.message();
  EXPECT_NE(st.message().find("dim_v"), std::string::npos) << st.message();
  a = base(128);
  a.q.data = static_cast<char*>(q) + 2;  // misaligned for TMA
  st = forward(a);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("q"), std::string::npos) << st.message();
  cudaDeviceSynchronize();
  std::vector<uint16_t> h(1 << 19);
  cudaMemcpy(h.data(), o, 1 << 20, cudaMemcpyDeviceToHost);
  int64_t touched = 0;
  for (uint16_t x : h) touched += x != 0xFFFF;
  EXPECT_EQ(touched, 0) << "a refused call wrote to out";
  cudaFree(q);
  cudaFree(o);
}

// seq_k == 0: every row has no visible key -> out 0, LSE -inf.
TEST(GpuForwardEmpty, NoKeys) {
  if (!have_gpu()) GTEST_SKIP() << "no sm_90 device";
  void *q, *o, *l;
  ASSERT_EQ(cudaMalloc(&q, 1 << 16), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&o, 1 << 16), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&l, 1 << 12), cudaSuccess);
  cudaMemset(o, 0xFF, 1 << 16);
  Device g{DeviceKind::cuda, 0};
  Args a;
  a.q = make_tensor(q, DType::bf16, {1, 5, 2, 64}, g);
  a.k = make_tensor(q, DType::bf16, {1, 0, 2, 64}, g);
  a.v = make_tensor(q, DType::bf16, {1, 0, 2, 64}, g);
  a.out = make_tensor(o, DType::bf16, {1, 5, 2, 64}, g);
  a.lse = make_tensor(l, DType::f32, {1, 2, 5}, g);
  a.backend = Backend::cuda;
  Status st = forward(a);
  ASSERT_TRUE(st.ok()) << st.message();
  std::vector<uint16_t> h(5 * 2 * 64);
  std::vector<float> hl(10);
  cudaMemcpy(h.data(), o, h.size() * 2, cudaMemcpyDeviceToHost);
  cudaMemcpy(hl.data(), l, 40, cudaMemcpyDeviceToHost);
  for (uint16_t x : h) EXPECT_EQ(x, 0);
  for (float x : hl) EXPECT_TRUE(std::isinf(x) && x < 0);
  // With sinks, a row without keys has LSE = its head's sink (out still 0).
  const float hs[2] = {0.75f, -2.5f};
  void* sk;
  ASSERT_EQ(cudaMalloc(&sk, 8), cudaSuccess);
  cudaMemcpy(sk, hs, 8, cudaMemcpyHostToDevice);
  a.sinks = make_tensor(sk, DType::f32, {2}, g);
  cudaMemset(o, 0xFF, 1 << 16);
  cudaMemset(l, 0xFF, 1 << 12);
  st = forward(a);
  ASSERT_TRUE(st.ok()) << st.message();
  cudaMemcpy(h.data(), o, h.size() * 2, cudaMemcpyDeviceToHost);
  cudaMemcpy(hl.data(), l, 40, cudaMemcpyDeviceToHost);
  for (uint16_t x : h) EXPECT_EQ(x, 0);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(hl[size_t(i)], hs[i / 5]) << "lse " << i;
  cudaFree(sk);
  cudaFree(q);
  cudaFree(o);
  cudaFree(l);
}

}  // namespace
}  // namespace longattn::gputest
