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
  // Everything at once (chunk with a window: ChunkWindow below).
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

std::string case_name(const ::testing::TestParamInfo<Shape>& i) { return i.param.name(); }

INSTANTIATE_TEST_SUITE_P(Core, GpuForward, ::testing::ValuesIn(core_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Long, GpuForward, ::testing::ValuesIn(long_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Features, GpuForward, ::testing::ValuesIn(feature_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Ragged, GpuForward, ::testing::ValuesIn(ragged_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Unread, GpuForward, ::testing::ValuesIn(unread_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(SplitDims, GpuForward, ::testing::ValuesIn(split_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(LongFeatures, GpuForward, ::testing::ValuesIn(long_feature_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(SeqUsedQ, GpuForward, ::testing::ValuesIn(seqused_q_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(ChunkWindow, GpuForward, ::testing::ValuesIn(chunk_window_cases()), case_name);

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

// Issue 16: every key sequence empty (FA3's max_seqlen_k = 0), said with k / v of no rows,
// whose pointer may be anything (the Python binding passes a one-byte sentinel for an empty
// tensor: never 16-byte aligned; here a misaligned device address, never read). The call
// must still reach the fill: out 0 and LSE -inf on the used rows, and with seqused_q the rows
// past it keep their poison. Ragged q (device cu_seqlens) and dense q.
TEST(GpuForwardEmpty, NoKeyRowsWithSeqUsedQ) {
  if (!have_gpu()) GTEST_SKIP() << "no sm_90 device";
  constexpr int64_t H = 2, D = 64, kTotal = 13, kSeq = 7;
  const std::vector<int32_t> cu_q = {0, 4, 6, 13}, cu_k = {0, 0, 0, 0}, used = {3, 0, 7};
  void *q, *o, *l;
  int32_t* meta;
  ASSERT_EQ(cudaMalloc(&q, 1 << 16), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&o, 1 << 16), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&l, 1 << 12), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&meta, 256), cudaSuccess);
  cudaMemcpy(meta, cu_q.data(), 16, cudaMemcpyHostToDevice);
  cudaMemcpy(meta + 16, cu_k.data(), 16, cudaMemcpyHostToDevice);
  cudaMemcpy(meta + 32, used.data(), 12, cudaMemcpyHostToDevice);
  const Device g{DeviceKind::cuda, 0};
  void* odd = static_cast<char*>(q) + 1;
  for (bool ragged : {true, false}) {
    for (bool with_used : {true, false}) {
      Args a;
      if (ragged) {
        a.q = make_tensor(q, DType::bf16, {kTotal, H, D}, g);
        a.k = make_tensor(odd, DType::bf16, {0, H, D}, g);
        a.v = make_tensor(odd, DType::bf16, {0, H, D}, g);
        a.out = make_tensor(o, DType::bf16, {kTotal, H, D}, g);
        a.lse = make_tensor(l, DType::f32, {H, kTotal}, g);
        a.cu_seqlens_q = make_tensor(meta, DType::i32, {4}, g);
        a.cu_seqlens_k = make_tensor(meta + 16, DType::i32, {4}, g);
        a.max_seqlen_q = kSeq;
        a.max_seqlen_k = 0;
      } else {
        a.q = make_tensor(q, DType::bf16, {3, kSeq, H, D}, g);
        a.k = make_tensor(odd, DType::bf16, {3, 0, H, D}, g);
        a.v = make_tensor(odd, DType::bf16, {3, 0, H, D}, g);
        a.out = make_tensor(o, DType::bf16, {3, kSeq, H, D}, g);
        a.lse = make_tensor(l, DType::f32, {3, H, kSeq}, g);
      }
      if (with_used) a.seqused_q = make_tensor(meta + 32, DType::i32, {3}, g);
      a.mask.causal = true;
      a.backend = Backend::cuda;
      cudaMemset(o, 0xFF, 1 << 16);
      cudaMemset(l, 0xFF, 1 << 12);
      const Status st = forward(a);
      ASSERT_TRUE(st.ok()) << "ragged " << ragged << ": " << st.message();
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const int64_t rows = ragged ? kTotal : 3 * kSeq;
      std::vector<uint16_t> ho(size_t(rows * H * D));
      std::vector<float> hl(size_t(rows * H));
      cudaMemcpy(ho.data(), o, ho.size() * 2, cudaMemcpyDeviceToHost);
      cudaMemcpy(hl.data(), l, hl.size() * 4, cudaMemcpyDeviceToHost);
      // Row r (ragged: token r; dense: b = r / kSeq, i = r % kSeq) is used when i < used[b].
      auto row_used = [&](int64_t r) {
        int64_t b = r / kSeq, i = r % kSeq;
        if (ragged) {
          b = 0;
          while (r >= cu_q[size_t(b + 1)]) ++b;
          i = r - cu_q[size_t(b)];
        }
        return !with_used || i < used[size_t(b)];
      };
      int64_t bad_out = 0, bad_lse = 0;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t h = 0; h < H; ++h) {
          const bool u = row_used(r);
          for (int64_t d = 0; d < D; ++d) bad_out += ho[size_t((r * H + h) * D + d)] != (u ? 0 : 0xFFFF);
          // LSE: ragged (heads, total); dense (batch, heads, seq).
          const float x = ragged ? hl[size_t(h * kTotal + r)] : hl[size_t(((r / kSeq) * H + h) * kSeq + r % kSeq)];
          bad_lse += u ? !(std::isinf(x) && x < 0) : !std::isnan(x);
        }
      EXPECT_EQ(bad_out, 0) << "ragged " << ragged << " seqused_q " << with_used;
      EXPECT_EQ(bad_lse, 0) << "ragged " << ragged << " seqused_q " << with_used;
    }
  }
  cudaFree(q);
  cudaFree(o);
  cudaFree(l);
  cudaFree(meta);
}

}  // namespace
}  // namespace longattn::gputest
