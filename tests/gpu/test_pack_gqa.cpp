// Packed GQA on the host (no GPU): the rule (cuda/sm90/pack_gqa.h), the row map (every
// (position, head) of a kv head's group in exactly one tile row), and the packed tile mask
// (mask.cuh kPack) against the one visibility rule (common/mask_rule.h): visited key blocks,
// unmasked blocks and the element mask of every lane, with each row at its query position.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "common/mask_rule.h"
#include "cuda/sm90/mask.cuh"
#include "cuda/sm90/pack_gqa.h"
#include "mask_fragments.h"

namespace longattn::cuda::sm90 {
namespace {

TEST(PackGqaRule, Eligibility) {
  EXPECT_EQ(pack_gqa_shift(1, 128), 0);
  EXPECT_EQ(pack_gqa_shift(2, 128), 1);
  EXPECT_EQ(pack_gqa_shift(4, 128), 2);
  EXPECT_EQ(pack_gqa_shift(16, 128), 4);
  EXPECT_EQ(pack_gqa_shift(128, 128), 7);
  EXPECT_EQ(pack_gqa_shift(256, 128), 0);  // no whole position per tile
  EXPECT_EQ(pack_gqa_shift(3, 128), 0);    // not a power of two
  EXPECT_EQ(pack_gqa_shift(7, 128), 0);
}

PackQuery Q(int64_t group, int64_t seq_q, int64_t batch = 16, int64_t heads_q = 32) {
  PackQuery q;
  q.group = group;
  q.seq_q = seq_q;
  q.batch = batch;
  q.heads_q = heads_q;
  return q;
}

TEST(PackGqaRule, Decisions) {
  // 32 / 8 heads (g 4), batch 16: seq_q 16 and 64 pack (512 unpacked tiles = 4 waves on 132
  // SMs, 128 / 256 packed = 1 / 2 waves), 128 and 512 do not (tiles already full).
  EXPECT_TRUE(pack_gqa_worth(Q(4, 16)));
  EXPECT_TRUE(pack_gqa_worth(Q(4, 64)));
  EXPECT_FALSE(pack_gqa_worth(Q(4, 128)));
  EXPECT_FALSE(pack_gqa_worth(Q(4, 512)));
  EXPECT_TRUE(pack_gqa_worth(Q(4, 1)));
  EXPECT_TRUE(pack_gqa_worth(Q(4, 129)));  // 129 / 256 -> 516 / 640; 1024 -> 640 tiles
  // Batch 4: 128 unpacked tiles, one wave already: packing cuts no wave.
  EXPECT_FALSE(pack_gqa_worth(Q(4, 16, 4)));
  EXPECT_FALSE(pack_gqa_worth(Q(4, 64, 4)));
  EXPECT_TRUE(pack_gqa_worth(Q(4, 16, 8)));   // 256 tiles (2 waves) -> 64 (1)
  EXPECT_TRUE(pack_gqa_worth(Q(16, 3, 16, 16)));  // MQA: 256 -> 16
  EXPECT_FALSE(pack_gqa_worth(Q(4, 100)));  // 100/128 vs 400/512: the same fill
  EXPECT_TRUE(pack_gqa_worth(Q(2, 37)));    // 0.29 -> 0.58, 512 -> 256 tiles
  EXPECT_FALSE(pack_gqa_worth(Q(1, 16)));   // no group
  EXPECT_FALSE(pack_gqa_worth(Q(6, 16, 16, 48)));  // g not a power of two
  PackQuery q = Q(4, 16);
  q.same_dims = false;  // 192 / 128 head dims
  EXPECT_FALSE(pack_gqa_worth(q));
  q = Q(4, 16);
  q.splits = 4;  // the unpacked call splits the keys
  EXPECT_FALSE(pack_gqa_worth(q));
  q = Q(4, 16);
  q.unpacked_block_m = 192;  // hdim 64 dense tile: 512 tiles unpacked as well
  EXPECT_TRUE(pack_gqa_worth(q));
  // Never packs what it cannot fill better or run in fewer waves.
  for (int64_t g : {2, 4, 8, 16, 32})
    for (int64_t b : {1, 4, 16, 64})
      for (int64_t sq = 1; sq < 700; ++sq) {
        const PackQuery c = Q(g, sq, b, 8 * g);
        if (!pack_gqa_worth(c)) continue;
        EXPECT_GT(tile_fill(sq * g, 128) * 0.9, tile_fill(sq, 128)) << g << " " << sq;
        EXPECT_NE(sq % 128, 0);  // full unpacked tiles never pack
        const int64_t tu = b * 8 * g * ((sq + 127) / 128), tp = b * 8 * ((sq + 128 / g - 1) / (128 / g));
        EXPECT_LT((tp + 131) / 132, (tu + 131) / 132) << g << " " << sq << " " << b;
      }
}

// Every (position, head) of one kv head's group is exactly one row of one packed tile.
TEST(PackGqaRule, RowMapCoversGroupOnce) {
  for (int shift = 1; shift <= 7; ++shift) {
    const int g = 1 << shift, per = 128 >> shift;
    const int64_t seq_q = 3 * per + 5, hk = 3, tiles = (seq_q + per - 1) / per;
    std::vector<int> seen(size_t(seq_q * g), 0);
    for (int64_t m = 0; m < tiles; ++m)
      for (int r = 0; r < 128; ++r) {
        const PackedRow pr = packed_row(m, hk, r, shift, 128);
        ASSERT_GE(pr.head, hk * g);
        ASSERT_LT(pr.head, (hk + 1) * g);
        if (pr.pos < seq_q) ++seen[size_t(pr.pos * g + (pr.head - hk * g))];
      }
    for (int c : seen) EXPECT_EQ(c, 1) << "g " << g;
  }
}

struct PCase {
  int64_t seq_q, seq_k, wl, wr, chunk;
  bool causal, top_left;
};

// The packed tile mask against mask_rule.h for one case and group 2^shift (tile 128 x kN).
template <int kN>
int check_packed(const PCase& c, int shift) {
  constexpr int kM = 128;
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
  const int64_t span = c.seq_q + c.seq_k;  // the host's clamps (forward_sm90.cpp)
  p.window_left = c.wl < 0 ? -1 : std::min(c.wl, span);
  p.window_right = c.wr < 0 ? -1 : std::min(c.wr, span);
  p.chunk = c.chunk > 0 ? int32_t(std::min(c.chunk, span)) : 0;
  if (p.chunk > 0) p.chunk_bias = int32_t((c.seq_q + p.chunk - 1) / p.chunk * p.chunk);
  p.pack_shift = shift;
  const int64_t off = p.causal_offset, per = kM >> shift;
  int errors = 0;
  auto fail = [&](const char* what, int64_t mb, int64_t pos, int64_t key) {
    if (errors++ < 5)
      ADD_FAILURE() << what << ": sq " << c.seq_q << " sk " << c.seq_k << " wl " << c.wl << " wr " << c.wr
                    << " chunk " << c.chunk << " causal " << c.causal << " tl " << c.top_left << " g "
                    << (1 << shift) << " block_n " << kN << " m_block " << mb << " pos " << pos << " key " << key;
  };
  const int64_t nm = (c.seq_q + per - 1) / per;
  for (int64_t mb = 0; mb < nm; ++mb) {
    TileMask<kM, kN, true, true> m(p, mb);
    if (m.m0 != mb * per) fail("first position", mb, m.m0, -1);
    int64_t lo, hi, ja, jb;
    m.block_range(c.seq_q, &lo, &hi);
    m.unmasked_blocks(c.seq_q, &ja, &jb);
    for (int64_t i = mb * per; i < std::min<int64_t>((mb + 1) * per, c.seq_q); ++i)
      for (int64_t j = 0; j < c.seq_k; ++j) {
        const bool vis = detail::key_visible(rule, i + off, j);
        const int64_t b = j / kN;
        if (vis && (b < lo || b >= hi)) fail("visible key outside the visited blocks", mb, i, j);
        if (!vis && b >= lo && b < hi && b >= ja && b < jb) fail("invisible key in an unmasked block", mb, i, j);
      }
    // Element mask, fragment layout of kernel.cuh: tile row r = wg*64 + warp*16 + lane/4 (+8)
    // is position m0 + r / g (packed_row).
    for (int64_t b = lo; b < hi; ++b)
      check_fragments<kM, kN>(
          mb, b, c.seq_q, [&](float(&s)[kN / 2], int row0, int lane) { m.apply(s, b, row0, lane); },
          [&](int r) { return packed_row(mb, 0, r, shift, kM).pos; },
          [&](int64_t pos, int64_t key) { return key < c.seq_k && detail::key_visible(rule, pos + off, key); }, fail);
  }
  return errors;
}

TEST(PackGqaMask, MatchesMaskRule) {
  std::vector<PCase> v = {
      {16, 8192, -1, -1, 0, true, false},  {16, 8192, -1, -1, 0, true, true},   {1, 1, -1, -1, 0, true, false},
      {3, 200, -1, -1, 0, false, false},   {37, 1000, 50, -1, 0, true, false},  {64, 999, -1, -1, 100, true, false},
      {100, 4099, 7, 3, 0, false, false},  {100, 60, -1, -1, 0, true, false},   {37, 200, -1, -1, 0, true, true},
      {64, 300, -1, 0, 64, false, true},
      // Chunk with a window; positions left of key 0 (bottom-right, seq_q > seq_k).
      {100, 900, 50, -1, 64, true, false}, {37, 500, 30, 30, 50, false, false}, {120, 40, 10, 5, 16, false, false},
      {100, 60, -1, -1, 100, false, false},
  };
  std::mt19937_64 rng(11);
  for (int t = 0; t < 40; ++t) {
    auto r = [&](int64_t n) { return int64_t(rng() % uint64_t(n)); };
    v.push_back({1 + r(130), 1 + r(600), r(3) ? -1 : r(200), r(3) ? -1 : r(200), r(3) ? 0 : 1 + r(200), r(2) == 0,
                 r(3) == 0});
  }
  for (const PCase& c : v)
    for (int shift : {1, 2, 3, 4, 7}) {
      EXPECT_EQ(check_packed<128>(c, shift), 0);  // hdim 64 / 128 ragged tile
      EXPECT_EQ(check_packed<64>(c, shift), 0);   // hdim 256 ragged tile
    }
}

}  // namespace
}  // namespace longattn::cuda::sm90
