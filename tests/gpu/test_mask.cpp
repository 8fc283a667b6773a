// The sm90 kernel's tile mask (cuda/sm90/mask.cuh), checked on the host against the one
// visibility rule (common/mask_rule.h) for windows, chunks and causal in both alignments:
// every visible (row, key) pair lies in the visited key blocks, blocks outside the element-
// masked ones hold only visible pairs, and the element mask of the accumulator fragment
// (every lane of every warp) keeps exactly the visible keys. Needs no GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "common/mask_rule.h"
#include "cuda/sm90/mask.cuh"

namespace longattn::cuda::sm90 {
namespace {

struct MCase {
  int64_t seq_q, seq_k, wl, wr, chunk;
  bool causal, top_left;
};

template <int kM, int kN>
int check(const MCase& c) {
  detail::MaskRule rule;
  rule.causal = c.causal;
  rule.top_left = c.top_left;
  rule.window_left = c.wl;
  rule.window_right = c.wr;
  rule.chunk = c.chunk;
  FwdParams p;
  p.seq_q = c.seq_q;
  p.seq_k = c.seq_k;
  p.causal = c.causal;
  p.causal_offset = rule.offset(c.seq_q, c.seq_k);
  // The host's clamps (forward_sm90.cpp).
  const int64_t span = c.seq_q + c.seq_k;
  p.window_left = c.wl < 0 ? -1 : std::min(c.wl, span);
  p.window_right = c.wr < 0 ? -1 : std::min(c.wr, span);
  p.chunk = c.chunk > 0 ? int32_t(std::min(c.chunk, span)) : 0;
  if (p.chunk > 0) p.chunk_bias = int32_t((c.seq_q + p.chunk - 1) / p.chunk * p.chunk);
  const int64_t off = p.causal_offset;
  int errors = 0;
  auto fail = [&](const char* what, int64_t mb, int64_t row, int64_t key) {
    if (errors++ < 5)
      ADD_FAILURE() << what << ": sq " << c.seq_q << " sk " << c.seq_k << " wl " << c.wl << " wr " << c.wr
                    << " chunk " << c.chunk << " causal " << c.causal << " tl " << c.top_left << " tile "
                    << kM << "x" << kN << " m_block " << mb << " row " << row << " key " << key;
  };
  const int64_t nm = (c.seq_q + kM - 1) / kM;
  for (int64_t mb = 0; mb < nm; ++mb) {
    TileMask<kM, kN, true> m(p, mb);
    int64_t lo, hi, ja, jb;
    m.block_range(c.seq_q, &lo, &hi);
    m.unmasked_blocks(c.seq_q, &ja, &jb);
    const int64_t r_end = std::min<int64_t>((mb + 1) * kM, c.seq_q);
    for (int64_t i = mb * kM; i < r_end; ++i)
      for (int64_t j = 0; j < c.seq_k; ++j) {
        const bool vis = detail::key_visible(rule, i + off, j);
        const int64_t b = j / kN;
        if (vis && (b < lo || b >= hi)) fail("visible key outside the visited blocks", mb, i, j);
        if (!vis && b >= lo && b < hi && b >= ja && b < jb) fail("invisible key in an unmasked block", mb, i, j);
      }
    // Element mask on every visited block: fragment layout of kernel.cuh (warpgroup wg,
    // warp, lane: rows wg*64 + warp*16 + lane/4 (+8), columns 8c + 2(lane%4) + e).
    for (int64_t b = lo; b < hi; ++b)
      for (int wg = 0; wg < kM / 64; ++wg)
        for (int warp = 0; warp < 4; ++warp)
          for (int lane = 0; lane < 32; ++lane) {
            float s[kN / 2];
            for (float& x : s) x = 1.f;
            const int row0 = wg * 64 + warp * 16 + lane / 4;
            m.apply(s, b, row0, lane);
            for (int cc = 0; cc < kN / 8; ++cc)
              for (int half = 0; half < 2; ++half)
                for (int e = 0; e < 2; ++e) {
                  const int64_t row = mb * kM + row0 + 8 * half, key = b * kN + 8 * cc + 2 * (lane % 4) + e;
                  if (row >= c.seq_q) continue;
                  const bool vis = key < c.seq_k && detail::key_visible(rule, row + off, key);
                  const bool kept = s[4 * cc + 2 * half + e] == 1.f;
                  if (vis != kept) fail(vis ? "visible key masked" : "invisible key kept", mb, row, key);
                }
          }
  }
  return errors;
}

std::vector<MCase> cases() {
  std::vector<MCase> v = {
      {1000, 1000, 0, -1, 0, true, false},    {1000, 1000, 5, -1, 0, true, false},
      {1111, 1111, 127, -1, 0, true, false},  {1000, 1000, 128, -1, 0, true, false},
      {700, 700, 5, 3, 0, false, false},      {900, 1300, 200, 77, 0, false, false},
      {900, 900, -1, 50, 0, false, false},    {500, 500, 5000, 5000, 0, false, false},
      {300, 1000, 64, -1, 0, true, false},    {1000, 300, 5, 0, 0, false, true},
      {1000, 300, 5, 0, 0, false, false},     {1000, 1000, -1, -1, 128, true, false},
      {1000, 1000, -1, -1, 100, true, false}, {900, 900, -1, -1, 50, false, false},
      {300, 1000, -1, -1, 256, true, false},  {1000, 300, -1, -1, 64, true, true},
      {1000, 300, -1, -1, 64, false, false},  {400, 400, -1, -1, 100000, true, false},
      {1200, 1200, 150, -1, 512, true, false}, {500, 640, 40, 40, 0, false, false},
      {1, 1, 0, 0, 0, true, false},           {17, 5, 2, -1, 3, true, false},
  };
  std::mt19937_64 rng(5);
  for (int t = 0; t < 60; ++t) {
    auto r = [&](int64_t n) { return int64_t(rng() % uint64_t(n)); };
    MCase c{1 + r(700), 1 + r(700), r(3) ? -1 : r(300), r(3) ? -1 : r(300), r(3) ? 0 : 1 + r(300),
            r(2) == 0, r(3) == 0};
    v.push_back(c);
  }
  return v;
}

TEST(TileMaskWindow, MatchesMaskRule) {
  for (const MCase& c : cases()) {
    // The kernel's tiles: 128 x 128 (hdim 128 causal / feature), 192 x 128 (hdim 64),
    // 128 x 80 (hdim 256).
    EXPECT_EQ((check<128, 128>(c)), 0);
    EXPECT_EQ((check<192, 128>(c)), 0);
    EXPECT_EQ((check<128, 80>(c)), 0);
  }
}

// Tiles cost what they see: a sliding window visits about window / block_n + 1 blocks per
// tile, however long the sequence.
TEST(TileMaskWindow, VisitsOnlyWindowBlocks) {
  FwdParams p;
  p.seq_q = p.seq_k = 65536;
  p.causal = true;
  p.window_left = 4096;
  int64_t most = 0, total = 0;
  for (int64_t mb = 0; mb < 512; ++mb) {
    TileMask<128, 128, true> m(p, mb);
    int64_t lo, hi;
    m.block_range(p.seq_q, &lo, &hi);
    most = std::max(most, hi - lo);
    total += hi - lo;
  }
  EXPECT_LE(most, 4096 / 128 + 2);
  printf("window 4096 at 64k: at most %lld blocks per tile, %lld in all (causal: %lld)\n", (long long)most,
         (long long)total, (long long)(512 * 513 / 2));
}

}  // namespace
}  // namespace longattn::cuda::sm90
