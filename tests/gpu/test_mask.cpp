// The sm90 kernel's tile mask (cuda/sm90/mask.cuh), checked on the host against the one
// visibility rule (common/mask_rule.h): the feature kinds' mask for windows, chunks, both
// together, and causal in both alignments, on whole dense problems and on one sequence of a
// ragged batch using fewer query rows than the batch's longest (seqused_q, through
// seq_coord): every visible (row, key) pair lies in the visited key blocks, blocks outside
// the element-masked ones hold only visible pairs, and the element mask of the accumulator
// fragment (every lane of every warp) keeps exactly the visible keys; the dense kinds' own
// mask (causal, key tails) likewise. Needs no GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "common/mask_rule.h"
#include "cuda/sm90/mask.cuh"
#include "cuda/sm90/tile_list.cuh"
#include "mask_fragments.h"

namespace longattn::cuda::sm90 {
namespace {

struct MCase {
  int64_t seq_q, seq_k, wl, wr, chunk;
  bool causal, top_left;
};

// used_q < 0: the dense problem (seq_q rows). used_q >= 0: sequence 0 of a ragged-kind call
// whose longest sequence has seq_q rows (p.seq_q, which sets chunk_bias) uses used_q of them
// (seqused_q): its rows and bottom-right offset follow used_q.
template <int kM, int kN>
int check(const MCase& c, int32_t used_q = -1) {
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
  const bool per_seq = used_q >= 0;
  const int32_t used_buf[1] = {used_q};
  SeqCoord sc{0, int32_t(c.seq_q), 0, int32_t(c.seq_k)};
  if (per_seq) {
    p.seqused_q = used_buf;
    p.offset_per_seq = c.top_left ? 0 : 1;  // launch_args.cpp: bottom-right masks
    p.num_m_blocks = (c.seq_q + kM - 1) / kM;
    sc = seq_coord(p, 0);
    if (sc.q_len != used_q) ADD_FAILURE() << "seq_coord ignores seqused_q";
    if (live_m_blocks<kM>(p, sc) != (used_q + kM - 1) / kM) ADD_FAILURE() << "live_m_blocks ignores seqused_q";
  }
  const int64_t seq_q = sc.q_len;  // the rows this sequence computes
  const int64_t off = rule.offset(seq_q, c.seq_k);
  int errors = 0;
  auto fail = [&](const char* what, int64_t mb, int64_t row, int64_t key) {
    if (errors++ < 5)
      ADD_FAILURE() << what << ": sq " << c.seq_q << " sk " << c.seq_k << " wl " << c.wl << " wr " << c.wr
                    << " chunk " << c.chunk << " causal " << c.causal << " tl " << c.top_left << " used_q "
                    << used_q << " tile " << kM << "x" << kN << " m_block " << mb << " row " << row << " key "
                    << key;
  };
  const int64_t nm = (seq_q + kM - 1) / kM;
  for (int64_t mb = 0; mb < nm; ++mb) {
    const TileMask<kM, kN, true> m = per_seq ? TileMask<kM, kN, true>(p, mb, sc) : TileMask<kM, kN, true>(p, mb);
    int64_t lo, hi, ja, jb;
    m.block_range(seq_q, &lo, &hi);
    m.unmasked_blocks(seq_q, &ja, &jb);
    const int64_t r_end = std::min<int64_t>((mb + 1) * kM, seq_q);
    for (int64_t i = mb * kM; i < r_end; ++i)
      for (int64_t j = 0; j < c.seq_k; ++j) {
        const bool vis = detail::key_visible(rule, i + off, j);
        const int64_t b = j / kN;
        if (vis && (b < lo || b >= hi)) fail("visible key outside the visited blocks", mb, i, j);
        if (!vis && b >= lo && b < hi && b >= ja && b < jb) fail("invisible key in an unmasked block", mb, i, j);
      }
    // Element mask on every visited block.
    for (int64_t b = lo; b < hi; ++b)
      check_fragments<kM, kN>(
          mb, b, seq_q, [&](float(&s)[kN / 2], int row0, int lane) { m.apply(s, b, row0, lane); },
          [&](int r) { return mb * kM + r; },
          [&](int64_t row, int64_t key) { return key < c.seq_k && detail::key_visible(rule, row + off, key); }, fail);
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
      // Chunk with a window (the intersection): window inside the chunk and around it, two-
      // sided and right-only, both alignments, seq_q above and below seq_k (negative
      // positions), chunks below / at / above the tile, window 0 (the diagonal).
      {1000, 1000, 50, -1, 128, true, false},  {1000, 1000, 300, -1, 100, true, false},
      {1111, 1111, 127, 0, 333, true, false},  {900, 900, 40, 40, 256, false, false},
      {900, 1300, 200, 77, 500, false, false}, {900, 900, -1, 50, 64, false, false},
      {300, 1000, 64, -1, 256, true, false},   {1000, 300, 5, -1, 64, true, true},
      {600, 800, 100, 30, 128, false, true},   {1000, 300, 20, 10, 77, false, false},
      {777, 777, 100, -1, 77, true, false},    {500, 500, 5000, -1, 128, true, false},
      {500, 500, 0, -1, 100, true, false},     {700, 700, 30, 30, 50, false, false},
      {1000, 300, 3, 200, 40, false, false},   {64, 5000, 4096, -1, 8192, true, false},
      {1200, 1200, 1, 1, 1, false, false},     {1200, 1200, 129, 0, 127, true, true},
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

// The dense kinds' mask (TileMask without kWindow: causal in both alignments, key tails):
// visited blocks hold every visible key, blocks before first_masked_block only visible ones,
// and the element mask (dense_limits + apply_limits, what the consumer runs on the blocks
// from first_masked_block on) keeps exactly the visible keys on every visited block.
template <int kM, int kN>
int check_dense(int64_t seq_q, int64_t seq_k, bool causal, bool top_left) {
  detail::MaskRule rule;
  rule.causal = causal;
  rule.top_left = top_left;
  FwdParams p;
  p.seq_q = seq_q;
  p.seq_k = seq_k;
  p.causal = causal;
  p.causal_offset = rule.offset(seq_q, seq_k);
  const int64_t off = p.causal_offset;
  int errors = 0;
  auto fail = [&](const char* what, int64_t mb, int64_t row, int64_t key) {
    if (errors++ < 5)
      ADD_FAILURE() << what << ": sq " << seq_q << " sk " << seq_k << " causal " << causal << " tl " << top_left
                    << " tile " << kM << "x" << kN << " m_block " << mb << " row " << row << " key " << key;
  };
  for (int64_t mb = 0; mb < (seq_q + kM - 1) / kM; ++mb) {
    const TileMask<kM, kN> m(p, mb);
    int64_t lo, hi;
    m.block_range(seq_q, &lo, &hi);
    const int64_t j_mask = m.first_masked_block();
    const int64_t r_end = std::min<int64_t>((mb + 1) * kM, seq_q);
    for (int64_t i = mb * kM; i < r_end; ++i)
      for (int64_t j = 0; j < seq_k; ++j) {
        const bool vis = detail::key_visible(rule, i + off, j);
        const int64_t b = j / kN;
        if (vis && (b < lo || b >= hi)) fail("visible key outside the visited blocks", mb, i, j);
        if (!vis && b >= lo && b < hi && b < j_mask) fail("invisible key before first_masked_block", mb, i, j);
      }
    for (int64_t b = lo; b < hi; ++b)
      check_fragments<kM, kN>(
          mb, b, seq_q,
          [&](float(&s)[kN / 2], int row0, int lane) {
            int32_t lim[2];
            m.dense_limits(b, row0, lane, lim);
            m.apply_limits(s, lim);
          },
          [&](int r) { return mb * kM + r; },
          [&](int64_t row, int64_t key) { return key < seq_k && detail::key_visible(rule, row + off, key); }, fail);
  }
  return errors;
}

TEST(TileMaskDense, MatchesMaskRule) {
  std::vector<std::pair<int64_t, int64_t>> sizes = {{1, 1},     {17, 5},     {128, 128},  {1000, 1000},
                                                    {1111, 1111}, {300, 1000}, {1000, 300}, {129, 257}};
  std::mt19937_64 rng(31);
  for (int t = 0; t < 40; ++t) sizes.push_back({1 + int64_t(rng() % 900), 1 + int64_t(rng() % 900)});
  for (const auto& [sq, sk] : sizes)
    for (int mode = 0; mode < 3; ++mode) {  // full, causal bottom-right, causal top-left
      const bool causal = mode > 0, tl = mode == 2;
      // The dense tiles: 128 x 128 (hdim 128), 192 x 128 (hdim 64), 128 x 112 (hdim 192),
      // 128 x 80 (hdim 256).
      EXPECT_EQ((check_dense<128, 128>(sq, sk, causal, tl)), 0);
      EXPECT_EQ((check_dense<192, 128>(sq, sk, causal, tl)), 0);
      EXPECT_EQ((check_dense<128, 112>(sq, sk, causal, tl)), 0);
      EXPECT_EQ((check_dense<128, 80>(sq, sk, causal, tl)), 0);
    }
}

// seqused_q (ragged kinds): a sequence computing fewer rows than the longest, its masks
// aligned to the rows it uses (bottom-right: offset keys - used); the tiles past its rows are
// not live. Ragged tiles: 128 x 128 (hdim 64 / 128), 128 x 64 (hdim 256).
TEST(TileMaskWindow, SeqUsedQMatchesMaskRule) {
  std::mt19937_64 rng(23);
  for (const MCase& c : cases()) {
    for (int32_t used : {int32_t(0), int32_t(1), int32_t(c.seq_q / 2 + 1), int32_t(rng() % uint64_t(c.seq_q + 1)),
                         int32_t(c.seq_q)}) {
      if (used > c.seq_q) continue;
      EXPECT_EQ((check<128, 128>(c, used)), 0);
      EXPECT_EQ((check<128, 64>(c, used)), 0);
    }
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
