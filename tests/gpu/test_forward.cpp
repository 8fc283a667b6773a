// The CUDA forward kernel against the float64 reference under the oracle rule, on random
// shapes: odd and tail lengths, seq_q != seq_k, GQA/MQA, the three head dims, causal
// (bottom-right and top-left) and not, batch > 1, bf16/fp16 inputs, bf16/fp16/f32 outputs.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <array>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "forward_cases.h"
#include "gpu_case.h"

namespace longattn::gputest {
namespace {

bool have_gpu() { return cuda_available(); }

class GpuForward : public ::testing::TestWithParam<Shape> {};

TEST_P(GpuForward, MatchesReference) {
  if (!have_gpu()) GTEST_SKIP() << "no sm_90 device";
  const Shape& s = GetParam();
  CheckResult r = run_case(s, atol_for(s));
  printf("%-48s err %.2e naive %.2e lse %.2e (naive %.2e) rows %lld\n", s.name().c_str(), r.max_err,
         r.naive_err, r.lse_err, r.lse_naive, (long long)r.rows_checked);
  EXPECT_TRUE(r.failure.empty()) << s.name() << ": " << r.failure;
  if (s.unread != 0.f) EXPECT_GT(r.unread_set, 0) << s.name() << ": nothing was unread (the case tests nothing)";
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
  // Non-causal hdim 128 with many key blocks (the double-buffered P of consumer.cuh over
  // 24 blocks, odd tail): f16 in, f32 out, GQA.
  v.push_back(S(2, 700, 3001, 4, 2, 128, false, DType::f16, DType::f32));
  Shape tl = S(1, 300, 1000, 4, 4, 128, true);
  tl.top_left = true;
  v.push_back(tl);
  // Causal hdim 64 on the 192-row dense tile with q-tiles anchored at the last row (plan.h
  // q_shift): top-left, one q-tile, and seq_q > seq_k (rows with no key).
  Shape tl64 = S(2, 500, 900, 4, 2, 64, true);
  tl64.top_left = true;
  v.push_back(tl64);
  v.push_back(S(3, 100, 250, 4, 4, 64, true));
  v.push_back(S(1, 700, 300, 4, 2, 64, true));
  Shape hot = S(1, 2000, 2000, 2, 2, 128, false);  // large logits: peaked softmax, many max jumps
  hot.scale = 1.0f;
  hot.q_range = 2.f;
  v.push_back(hot);
  Shape nolse = S(1, 129, 257, 2, 2, 128, true);
  nolse.lse = false;
  v.push_back(nolse);
  // hdim 256 causal, dense layout, 48 (batch, head) pairs: one L2 section holds them all, so
  // the dense kind runs its global snake (no section list); f16, and bf16 with a strided q.
  v.push_back(S(4, 400, 600, 12, 12, 256, true, DType::f16, DType::f16));
  Shape l2p = S(4, 333, 700, 12, 12, 256, true);
  l2p.pad = 8;
  v.push_back(l2p);
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
  // Everything at once (chunk with a window: ChunkWindow below).
  v.push_back(cap(sinks(win(F(1, 1200, 1200, 4, 2, 128, true), 150, -1)), 12.f));
  v.push_back(cap(sinks(chunk(F(1, 1200, 1200, 4, 2, 256, true), 512)), 12.f));
  v.push_back(cap(sinks(win(F(2, 500, 640, 4, 2, 64, false), 40, 40)), 9.f));
  // Causal hdim 64 on the 192-row feature tile: q-tiles anchored at the last row (plan.h
  // q_shift) with sinks or softcap (top-left, one q-tile, rows with no key), and windows and
  // chunks off the 192-row grid, which keep the tiles at row 0.
  v.push_back(tl(sinks(F(2, 450, 900, 4, 2, 64, true))));
  v.push_back(sinks(F(3, 100, 250, 4, 4, 64, true)));
  v.push_back(cap(F(1, 700, 300, 4, 2, 64, true), 7.f));
  v.push_back(tl(win(F(2, 450, 900, 4, 2, 64, true), 200, -1)));
  v.push_back(tl(chunk(F(1, 1000, 300, 4, 2, 64, true), 64)));
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

// Head dim 192 (its own kernel: 128 x 112, paged 128 x 64): dense both masks, GQA / MQA,
// odd sizes, rows without keys, f16 -> f32, features, ragged with unread keys, packed GQA,
// split-KV.
std::vector<Shape> dim192_cases() {
  std::vector<Shape> v;
  for (bool c : {false, true}) {
    v.push_back(S(2, 333, 555, 4, 2, 192, c));
    v.push_back(S(1, 1000, 1000, 8, 1, 192, c));
  }
  v.push_back(S(1, 1000, 300, 4, 2, 192, true));  // rows without keys
  v.push_back(S(1, 500, 700, 4, 2, 192, true, DType::f16, DType::f32));
  v.push_back(cap(sinks(win(F(1, 900, 900, 4, 2, 192, true), 150, -1)), 12.f));
  v.push_back(unread(R({100, 0, 300, 57}, {130, 200, 300, 190}, 4, 2, 192, true, 42), NAN));
  {
    Shape s = S(1, 64, 4000, 2, 2, 192, false);
    s.ov.kv_splits = 3;
    v.push_back(s);
  }
  return v;
}

// Issue 16, head dims between the compiled ones (tile_size.h kernel_dims): each runs on the
// next kernel with column-addressed tensor maps whose missing columns TMA zero-fills, and the
// epilogue stores only v's columns (out is poisoned: a column past dim_v written by mistake
// would land in the next head's first columns and fail there). One or two chunks short,
// 8 columns (a single pair per quad), q / k and v narrower by different amounts, both
// alignments, GQA, f16 -> f32, strided rows, features, ragged with unread keys poisoned,
// seqused_q, packed GQA, batch 1 with few tiles, chunk with a window; v above 256 (column
// slices of v / out). Narrow dims run on the feature kinds (plan.cpp).
Shape dims(Shape s, int64_t dv) { s.dim_v = dv; s.seed += 900; return s; }
Shape usedq(Shape s, std::vector<int32_t> u);
Shape packed(Shape s);

// Several tiles per CTA (1024 tiles over 132 CTAs) at every compiled head dim, dense and
// feature kinds: the Q buffers cycle (with TMA stores of O a buffer's last q_empty arrival
// comes during the next tile; with one Q buffer that deadlocked, and every other test here
// gives a CTA at most two tiles). A sample of rows is checked.
std::vector<Shape> many_tile_cases() {
  std::vector<Shape> v;
  for (int64_t d : {64, 96, 128, 192, 256})
    for (bool c : {false, true}) {
      Shape s = S(2, 4096, 4096, 16, 4, d, c);
      s.rows_per_head = 6;
      v.push_back(s);
    }
  Shape w = win(F(2, 4096, 4096, 16, 4, 128, true), 1000, -1);
  w.rows_per_head = 6;
  v.push_back(w);
  Shape k = sinks(F(2, 4096, 4096, 16, 4, 256, false));
  k.rows_per_head = 6;
  v.push_back(k);
  return v;
}

std::vector<Shape> narrow_cases() {
  std::vector<Shape> v;
  for (bool c : {false, true}) v.push_back(S(2, 333, 555, 4, 2, 96, c));  // -> 128
  v.push_back(S(1, 1000, 1000, 8, 1, 80, true));
  v.push_back(S(2, 300, 300, 4, 2, 8, false));  // -> 64
  v.push_back(S(1, 257, 513, 4, 4, 40, true));
  v.push_back(S(1, 500, 700, 4, 2, 72, true, DType::f16, DType::f32));
  v.push_back(S(1, 400, 600, 4, 2, 160, true));  // -> 192
  v.push_back(S(1, 400, 600, 4, 2, 208, true));  // -> 256
  v.push_back(S(1, 300, 300, 2, 2, 248, false));
  v.push_back(dims(S(2, 300, 500, 4, 2, 96, true), 64));     // (96, 64) -> 128 / 128
  v.push_back(dims(S(1, 600, 700, 4, 2, 160, true), 128));   // (160, 128) -> 192 / 128
  v.push_back(dims(S(1, 300, 400, 4, 2, 176, false), 112));  // -> 192 / 128
  v.push_back(dims(S(1, 300, 400, 4, 2, 64, false), 256));   // (64, 256) -> 256 / 256
  v.push_back(dims(S(2, 300, 400, 4, 2, 64, true), 512));    // (64, 512): two v slices of 256
  v.push_back(dims(S(1, 200, 333, 4, 2, 128, false), 320));  // two slices of 160 -> 192 / 192
  {
    Shape s = S(2, 300, 333, 4, 2, 96, false);
    s.pad = 8;
    v.push_back(s);
  }
  v.push_back(cap(sinks(win(F(1, 900, 900, 4, 2, 96, true), 150, -1)), 12.f));
  v.push_back(unread(R({100, 0, 300, 57}, {130, 200, 300, 190}, 4, 2, 80, true, 41), NAN));
  v.push_back(usedq(F(2, 300, 400, 4, 2, 112, true), {100, 300}));
  v.push_back(packed(F(1, 40, 900, 16, 2, 96, true)));
  v.push_back(packed(F(1, 40, 900, 16, 2, 192, true)));
  v.push_back(S(1, 64, 4000, 2, 2, 96, false));  // batch 1, few tiles (narrow dims: no split-KV)
  v.push_back(chunk(win(F(1, 700, 900, 4, 2, 48, true), 120, -1), 256));
  return v;
}

// Issue 16, seqused_q: only the first used_q[b] query rows of each sequence are computed,
// masks align to that length (bottom-right offset = keys - used_q[b]), and the rows past it
// keep their poison in out and LSE (run_case). Dense q (it keeps its layout) and ragged q,
// sequences using 0, 1, all or part of their rows, causal in both alignments, rows with no
// key, GQA, packed GQA (short seq_q, forced on), the three head dims and 192 / 128, windows,
// chunks, chunk with a window, sinks, softcap, seqused_k beside it, unread keys poisoned.
Shape usedq(Shape s, std::vector<int32_t> u) { s.used_q = std::move(u); return s; }
Shape packed(Shape s) { s.ov.pack_gqa = detail::Force::on; return s; }

std::vector<Shape> seqused_q_cases() {
  std::vector<Shape> v;
  v.push_back(usedq(F(3, 300, 400, 4, 2, 128, false), {300, 0, 137}));
  v.push_back(usedq(F(3, 300, 500, 4, 2, 128, true), {1, 250, 299}));       // bottom-right: offset 500 - used
  v.push_back(usedq(tl(F(2, 400, 300, 4, 4, 128, true)), {400, 129}));      // top-left
  v.push_back(usedq(F(2, 600, 300, 4, 2, 128, true), {450, 600}));          // used > keys: rows with no key
  v.push_back(usedq(F(2, 333, 555, 6, 2, 64, true), {200, 333}));
  v.push_back(usedq(F(2, 250, 333, 4, 1, 256, true), {100, 249}));
  v.push_back(usedq(split(F(2, 300, 400, 4, 2, 192, true)), {100, 300}));
  {
    Shape s = usedq(F(2, 500, 700, 4, 2, 128, true), {300, 77});
    s.in = DType::f16;
    s.out = DType::f32;
    s.sinks = true;
    v.push_back(s);
  }
  v.push_back(usedq(win(F(2, 700, 900, 4, 2, 128, true), 100, -1), {500, 699}));
  v.push_back(usedq(win(F(2, 500, 500, 4, 2, 128, false), 30, 20), {257, 128}));
  v.push_back(usedq(chunk(F(2, 600, 600, 4, 2, 128, true), 128), {333, 600}));
  v.push_back(usedq(chunk(win(F(2, 600, 800, 4, 2, 128, true), 90, -1), 128), {599, 211}));
  v.push_back(usedq(cap(sinks(F(2, 400, 600, 4, 2, 128, false)), 12.f), {399, 3}));
  {
    Shape s = usedq(F(3, 200, 500, 4, 2, 128, true), {150, 200, 0});  // with seqused_k
    s.used_k = {500, 0, 123};
    v.push_back(s);
    s = usedq(F(3, 200, 500, 4, 2, 128, false), {77, 13, 200});  // unread keys hold NaN
    s.used_k = {300, 129, 500};
    v.push_back(unread(s, NAN));
  }
  // Packed GQA: a short seq_q, each tile the g query heads of a kv head.
  v.push_back(packed(usedq(F(2, 16, 1000, 32, 8, 128, true), {16, 5})));
  v.push_back(packed(usedq(F(3, 37, 500, 16, 2, 128, false), {37, 0, 20})));
  v.push_back(packed(usedq(tl(F(2, 64, 300, 8, 2, 64, true)), {33, 64})));
  v.push_back(packed(usedq(win(F(2, 37, 700, 16, 2, 128, true), 50, -1), {37, 21})));
  v.push_back(packed(usedq(chunk(win(F(2, 40, 600, 8, 1, 256, true), 100, -1), 64), {40, 17})));
  // Ragged q (device cu_seqlens; max_seqlen_q the longest after seqused_q).
  const std::vector<int32_t> a = {100, 0, 1, 517, 1000, 33};
  v.push_back(usedq(R(a, a, 4, 2, 128, false, 60), {60, 0, 1, 400, 1000, 0}));
  v.push_back(usedq(R(a, a, 4, 2, 128, true, 61), {100, 0, 0, 129, 700, 32}));
  v.push_back(usedq(tl(R({50, 1, 0, 300, 129}, {200, 7, 5, 300, 1000}, 4, 4, 128, true, 62)), {25, 1, 0, 128, 129}));
  v.push_back(usedq(R({300, 0, 77}, {}, 4, 2, 128, true, 63), {299, 0, 1}));  // ragged q, dense k
  v.back().seq_k = 400;
  v.push_back(usedq(R(a, a, 6, 2, 64, true, 64), {99, 0, 1, 500, 1, 33}));
  v.push_back(usedq(sinks(chunk(win(R(a, a, 4, 2, 128, true, 65), 70, -1), 128)), {50, 0, 1, 517, 999, 20}));
  v.push_back(unread(usedq(R({100, 0, 300, 0, 57}, {130, 200, 300, 77, 190}, 4, 2, 128, true, 66), {64, 0, 299, 0, 1}),
                     NAN));
  {
    Shape s = usedq(R({300, 200}, {300, 200}, 4, 2, 128, true, 67), {123, 200});  // with seqused_k
    s.used_k = {250, 0};
    v.push_back(s);
  }
  return v;
}

// Issue 16, chunk with a sliding window: a query sees the keys of its own chunk that are also
// inside its window (the intersection; mask_rule.h). Window narrower and wider than the
// chunk, chunks below / at / above the tile, causal and not (right windows), both
// alignments, seq_q != seq_k, the three head dims, sinks, ragged batches.
std::vector<Shape> chunk_window_cases() {
  std::vector<Shape> v;
  v.push_back(chunk(win(F(1, 1000, 1000, 4, 2, 128, true), 50, -1), 128));   // window inside the chunk
  v.push_back(chunk(win(F(1, 1000, 1000, 4, 2, 128, true), 300, -1), 100));  // chunk inside the window
  v.push_back(chunk(win(F(2, 1111, 1111, 4, 1, 128, true), 127, 0), 333));
  v.push_back(chunk(win(F(1, 900, 900, 4, 4, 128, false), 40, 40), 256));
  v.push_back(chunk(win(F(1, 900, 1300, 4, 2, 128, false), 200, 77), 500));
  v.push_back(chunk(win(F(1, 900, 900, 4, 2, 128, false), -1, 50), 64));    // right window only
  v.push_back(chunk(win(F(1, 300, 1000, 4, 2, 128, true), 64, -1), 256));   // KV prefix, bottom-right
  v.push_back(tl(chunk(win(F(1, 1000, 300, 4, 2, 128, true), 5, -1), 64))); // top-left: rows past 300 see no key
  v.push_back(tl(chunk(win(F(1, 600, 800, 4, 2, 128, false), 100, 30), 128)));
  v.push_back(chunk(win(F(1, 1000, 300, 4, 2, 128, false), 20, 10), 77));  // bottom-right, seq_q > seq_k
  v.push_back(chunk(win(F(2, 777, 777, 6, 2, 64, true), 100, -1), 77));
  v.push_back(chunk(win(F(1, 600, 700, 4, 2, 256, true), 90, -1), 200));
  v.push_back(chunk(win(F(1, 500, 500, 2, 2, 128, true), 5000, -1), 128));  // window wider than everything
  v.push_back(chunk(win(F(1, 500, 500, 2, 2, 128, true), 0, -1), 100));     // only the diagonal
  v.push_back(cap(sinks(chunk(win(F(1, 1200, 1200, 4, 2, 128, true), 150, -1), 512)), 12.f));
  v.push_back(sinks(chunk(win(F(1, 700, 700, 4, 2, 128, false), 30, 30), 50)));  // rows can see few keys
  const std::vector<int32_t> a = {100, 0, 1, 517, 1000, 33};
  v.push_back(chunk(win(R(a, a, 4, 2, 128, true, 70), 100, -1), 128));
  v.push_back(chunk(win(R(a, a, 4, 2, 128, false, 71), 60, 60), 200));
  v.push_back(tl(chunk(win(R({50, 1, 0, 300, 129}, {200, 7, 5, 300, 1000}, 4, 4, 128, true, 72), 80, -1), 96)));
  v.push_back(chunk(win(R({50, 1, 0, 300, 129}, {200, 7, 5, 300, 1000}, 4, 2, 128, true, 73), 80, -1), 96));
  v.push_back(chunk(win(split(F(1, 700, 900, 4, 2, 192, true)), 120, -1), 256));  // 192 / 128: ragged kind
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

// Outputs with strides of their own (Shape::out_pad) on the kernels that store O directly
// (hdim 192 / 256, ragged, packed GQA; the dense hdim-128 kind too, whose TMA store wants
// 16-byte rows): rows 16-byte aligned (pad 8: the 16-byte stores, epilogue.cuh
// store_o_half_v16) and not (even pads 2-6, as the API asks: the pair stores), bf16 and f16,
// split-KV's f32 partials under a 16-bit out, row clipping at odd
// lengths, head dims narrower than the kernel's (column clipping).
Shape opad(Shape s, int64_t pad) { s.out_pad = pad; s.seed += 1300; return s; }

std::vector<Shape> out_stride_cases() {
  std::vector<Shape> v;
  const std::vector<int32_t> a = {100, 0, 1, 517, 1000, 33};
  for (int64_t pad : {2, 8}) {
    v.push_back(opad(S(2, 333, 500, 4, 2, 256, true), pad));
    v.push_back(opad(win(F(1, 900, 900, 4, 2, 256, true), 200, -1), pad));
    v.push_back(opad(R(a, a, 4, 2, 128, true, 80), pad));
    v.push_back(opad(packed(F(2, 20, 700, 16, 4, 128, true)), pad));
  }
  v.push_back(opad(S(1, 500, 600, 4, 4, 128, false), 4));  // split-KV (f32 partials, then the combine)
  v.push_back(opad(S(3, 1000, 1000, 8, 2, 128, true), 4));  // dense hdim 128 off 16 bytes: direct stores
  v.push_back(opad(S(2, 300, 300, 4, 2, 192, false, DType::f16, DType::f16), 6));
  v.push_back(opad(S(2, 300, 300, 4, 2, 192, true, DType::f16, DType::f16), 8));
  v.push_back(opad(S(1, 400, 400, 4, 2, 96, true), 8));  // 96 on the 128 kernel: three groups of four stored
  v.push_back(opad(S(1, 400, 400, 4, 2, 200, false), 8));  // 200 on the 256 kernel
  v.push_back(opad(S(2, 777, 900, 4, 2, 128, true), 8));   // dense hdim 128: the TMA store, padded rows
  return v;
}

std::string case_name(const ::testing::TestParamInfo<Shape>& i) { return i.param.name(); }

INSTANTIATE_TEST_SUITE_P(Core, GpuForward, ::testing::ValuesIn(core_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Long, GpuForward, ::testing::ValuesIn(long_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Features, GpuForward, ::testing::ValuesIn(feature_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Ragged, GpuForward, ::testing::ValuesIn(ragged_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Unread, GpuForward, ::testing::ValuesIn(unread_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(SplitDims, GpuForward, ::testing::ValuesIn(split_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(ManyTiles, GpuForward, ::testing::ValuesIn(many_tile_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(NarrowDims, GpuForward, ::testing::ValuesIn(narrow_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Dim192, GpuForward, ::testing::ValuesIn(dim192_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(LongFeatures, GpuForward, ::testing::ValuesIn(long_feature_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(SeqUsedQ, GpuForward, ::testing::ValuesIn(seqused_q_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(OutStrides, GpuForward, ::testing::ValuesIn(out_stride_cases()), case_name);
// The same ragged and seqused cases on the device-built tile list: plan.cpp builds it only past
// one wave of padded tiles, which most of these small cases are not.
std::vector<Shape> listed(std::vector<Shape> v) {
  for (Shape& s : v) s.ov.tile_list = detail::Force::on;
  return v;
}
INSTANTIATE_TEST_SUITE_P(RaggedList, GpuForward, ::testing::ValuesIn(listed(ragged_cases())), case_name);
INSTANTIATE_TEST_SUITE_P(SeqUsedQList, GpuForward, ::testing::ValuesIn(listed(seqused_q_cases())), case_name);
INSTANTIATE_TEST_SUITE_P(ChunkWindow, GpuForward, ::testing::ValuesIn(chunk_window_cases()), case_name);
// Causal hdim 256 on the sectioned order as a device list (KernelConfig kSectionList, by rule
// or Overrides::section_list): several L2 sections, bottom-right and top-left, GQA, a partial
// last q-block and key block, f16, split-KV (the split is the list's batch index), and the
// sections' first CTAs rotating (the rule, or forced) or not.
std::vector<Shape> section_list_cases() {
  std::vector<Shape> v;
  for (auto [b, sq, sk, hq, hkv] : {std::array<int64_t, 5>{1, 2000, 2000, 16, 16}, std::array<int64_t, 5>{2, 1500, 1700, 8, 2},
                                    std::array<int64_t, 5>{1, 3000, 3000, 12, 4}}) {
    for (bool top_left : {false, true}) {
      Shape s = dense_shape(b, sq, sk, hq, hkv, 256, true);
      s.top_left = top_left;
      s.rows_per_head = 48;
      s.l2_budget = 4 << 20;             // the rule's sections: 11 pairs of 12 at 3000
      if (hq != 12) s.ov.sections = 3;  // forced: sections of 3 pairs (the rule keeps one here)
      // 12 heads: the shipped rules alone (plan.cpp builds the list where sections are cut).
      if (hq != 12) s.ov.section_list = detail::Force::on;
      if (hq == 16 && top_left) s.in = s.out = DType::f16;
      // Sections dealt from rotating first CTAs (the rule; 3-pair sections wrap the grid) and,
      // here, all from CTA 0 (Overrides::section_rotate off).
      if (hq == 8 && top_left) s.ov.section_rotate = detail::Force::off;
      s.seed = uint64_t(sq + hq + (top_left ? 7 : 0));
      v.push_back(s);
    }
  }
  Shape s = dense_shape(1, 300, 6000, 8, 2, 256, true);  // 3 key splits: 24 (split, head) pairs
  s.ov.kv_splits = 3;
  s.l2_budget = 4 << 20;
  s.ov.sections = 4;
  s.ov.section_list = detail::Force::on;
  s.seed = 612;
  v.push_back(s);
  // Several full sections of two whole rounds and a partial one on 132 SMs (30 pairs of 9
  // q-blocks: 270 tiles = 2 x 132 + 6), which the rule rotates, and a short last section (4
  // pairs) from the start the host picks (schedule_rule.h rotated_last_first).
  Shape r = dense_shape(4, 1100, 1100, 16, 16, 256, true);
  r.rows_per_head = 48;
  r.l2_budget = 4 << 20;
  r.ov.sections = 30;
  r.ov.section_list = detail::Force::on;
  r.seed = 613;
  v.push_back(r);
  return v;
}
INSTANTIATE_TEST_SUITE_P(SectionList, GpuForward, ::testing::ValuesIn(section_list_cases()), case_name);

}  // namespace
}  // namespace longattn::gputest
