// Host-only: the paged producer's arithmetic (cuda/sm90/page_math.h) against plain integer
// division and a direct search for the box size.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "cuda/sm90/page_math.h"
#include "cuda/sm90/tile_size.h"

namespace longattn::cuda::sm90 {
namespace {

TEST(PageMath, DivisionByMultiplyHighIsExact) {
  std::mt19937_64 rng(5);
  std::vector<uint32_t> divisors;
  for (uint32_t d = 1; d <= 1100; ++d) divisors.push_back(d);
  for (uint32_t d : {4095u, 4096u, 65537u, 1u << 20, (1u << 30) + 7, 0x7FFFFFFFu}) divisors.push_back(d);
  for (int i = 0; i < 200; ++i) divisors.push_back(uint32_t(rng() % 0x7FFFFFFF) + 1);
  int64_t bad = 0, checked = 0;
  for (uint32_t d : divisors) {
    const PageDiv pd = make_page_div(d);
    auto check = [&](uint32_t n) {
      bad += page_div(n, pd.magic, pd.shift) != n / d;
      ++checked;
    };
    // Around every multiple of d below 4d + small values, then the top of the range, then random.
    for (uint32_t k = 0; k < 5; ++k)
      for (int64_t e = -2; e <= 2; ++e) {
        const int64_t n = int64_t(k) * d + e;
        if (n >= 0 && n < (int64_t(1) << 31)) check(uint32_t(n));
      }
    for (uint32_t n = 0x7FFFFFFFu - 3000; n <= 0x7FFFFFFFu && n >= 0x7FFFFFFFu - 3000; ++n) check(n);
    for (int i = 0; i < 3000; ++i) check(uint32_t(rng() & 0x7FFFFFFF));
  }
  EXPECT_EQ(bad, 0) << "of " << checked;
}

TEST(PageMath, BoxShiftIsLargestPowerOfTwoDividingThePage) {
  for (int bn : {64, 128}) {
    for (int64_t page = 1; page <= 2000; ++page) {
      const int s = box_shift_for(page, bn);
      int64_t best = 1;
      for (int64_t r = 1; r <= bn; r *= 2)
        if (page % r == 0) best = r;
      EXPECT_EQ(int64_t(1) << s, best) << "page " << page << " block_n " << bn;
    }
  }
  EXPECT_EQ(box_shift_for(16, 128), 4);
  EXPECT_EQ(box_shift_for(3, 128), 0);
  EXPECT_EQ(box_shift_for(384, 128), 7);
  EXPECT_EQ(box_shift_for(100, 64), 2);
}

// The gather's destination of each 16-byte piece is where a 128B-swizzled TMA box puts it:
// CUTLASS-style Swizzle<3, 4, 3> of the unswizzled address (bits 4..6 ^= bits 7..9) inside a
// tile of 64-column chunks (chunk c at c x block_n x 128 bytes, row r at r x 128), written
// here from the address, independently of gather_smem_offset's row / unit form. Also: the
// 128 threads' pieces (gather_unit, gather_first_row, kGatherRowStep) cover every piece of
// the tile exactly once, and land inside it.
TEST(PageMath, GatherPiecesLandWhereTheSwizzledBoxPutsThem) {
  for (uint32_t bn : {64u, 128u, 176u}) {
    for (uint32_t chunks : {1u, 2u, 3u, 4u}) {
      std::set<uint32_t> offsets;
      std::set<std::pair<uint32_t, uint32_t>> pieces;
      for (uint32_t t = 0; t < 128; ++t) {
        for (uint32_t r = gather_first_row(t); r < bn; r += kGatherRowStep) {
          for (uint32_t c = 0; c < chunks; ++c) {
            const uint32_t unit = c * 8 + gather_unit(t);
            const uint32_t linear = c * bn * 128 + r * 128 + gather_unit(t) * 16;
            const uint32_t swizzled = linear ^ (((linear >> 7) & 7u) << 4);
            const uint32_t off = gather_smem_offset(r, gather_unit(t), bn) + c * bn * 128;
            EXPECT_EQ(off, swizzled) << "bn " << bn << " row " << r << " unit " << unit;
            EXPECT_EQ(gather_smem_offset(r, unit, bn), off) << "bn " << bn << " row " << r << " unit " << unit;
            EXPECT_LT(off + 16, chunks * bn * 128 + 1);
            EXPECT_EQ(off % 16, 0u);
            offsets.insert(off);
            pieces.insert({r, unit});
          }
        }
      }
      EXPECT_EQ(offsets.size(), size_t(bn * chunks * 8)) << "bn " << bn << " chunks " << chunks;
      EXPECT_EQ(pieces.size(), size_t(bn * chunks * 8)) << "bn " << bn << " chunks " << chunks;
    }
  }
}

// The gather's page-table reads: per warp, every row its threads copy is read by exactly one
// lane (gather_loader_row), and thread t's i-th row (gather_first_row(t) + 16 i) is the row
// of lane gather_loader_lane(t, i) of its own warp; tiles of 64 and 128 keys.
TEST(PageMath, GatherPageEntriesComeFromOneLanePerRow) {
  for (uint32_t bn : {64u, 128u}) {
    for (uint32_t w = 0; w < 4; ++w) {
      std::set<uint32_t> loaded;
      for (uint32_t lane = 0; lane < 32; ++lane) {
        const uint32_t row = gather_loader_row(32 * w + lane);
        if (row < bn) EXPECT_TRUE(loaded.insert(row).second) << "row " << row << " read twice";
      }
      for (uint32_t lane = 0; lane < 32; ++lane) {
        const uint32_t t = 32 * w + lane;
        for (uint32_t i = 0; i < bn / kGatherRowStep; ++i) {
          const uint32_t src = gather_loader_lane(t, i);
          ASSERT_LT(src, 32u);
          const uint32_t row = gather_first_row(t) + i * kGatherRowStep;
          EXPECT_EQ(gather_loader_row(32 * w + src), row) << "bn " << bn << " t " << t << " i " << i;
          EXPECT_EQ(loaded.count(row), 1u);
        }
      }
      EXPECT_EQ(loaded.size(), size_t(4 * bn / kGatherRowStep));
    }
  }
}

// The producer team's single K / V call site walks the loads in the consumers' order:
// K[hi - 1]; K[j], V[j + 1] for j = hi - 2 .. lo; V[lo] (mainloop.cuh tile()).
TEST(PageMath, KvStepsFollowTheConsumersOrder) {
  for (int32_t lo = 0; lo < 6; ++lo) {
    for (int32_t hi = lo + 1; hi < lo + 40; ++hi) {
      std::vector<std::pair<bool, int32_t>> want, got;
      want.push_back({true, hi - 1});
      for (int32_t j = hi - 2; j >= lo; --j) {
        want.push_back({true, j});
        want.push_back({false, j + 1});
      }
      want.push_back({false, lo});
      for (int32_t s = 0; s < 2 * (hi - lo); ++s) {
        const KvStep st = kv_step(s, lo, hi);
        got.push_back({st.is_k, st.j});
      }
      EXPECT_EQ(got, want) << "lo " << lo << " hi " << hi;
    }
  }
}

// One dense tile per head dim, causal or not; the feature and ragged kinds share it at hdim 128.
TEST(TileSize, DenseTile) {
  EXPECT_TRUE(kernel_tile(Kernel::dense, 128, 128) == (TileConfig{128, 128, 2, 2, 32, 232, 2}));
  EXPECT_TRUE(kernel_tile(Kernel::dense, 64, 64) == (TileConfig{192, 128, 2, 3, 32, 160, 2}));
  EXPECT_TRUE(kernel_tile(Kernel::dense, 256, 256) == (TileConfig{128, 80, 2, 2, 24, 240, 1, false}));
  EXPECT_TRUE(kernel_tile(Kernel::dense, 192, 192) == (TileConfig{128, 112, 2, 2, 32, 232, 1}));
  EXPECT_EQ(kernel_tile(Kernel::paged, 192, 192).block_n, 64);  // power-of-two paged boxes
  EXPECT_EQ(kernel_dims(160, 160, false).qk, 192);
  EXPECT_EQ(kernel_dims(160, 128, false).v, 128);
  EXPECT_EQ(kernel_dims(96, 80, true).qk, 128);
  EXPECT_EQ(kernel_dims(200, 64, false).qk, 256);
  EXPECT_EQ(kernel_dims(136, 264, false).qk, 0);
  EXPECT_TRUE(kernel_tile(Kernel::feature, 128, 128) == kernel_tile(Kernel::dense, 128, 128));
  EXPECT_TRUE(kernel_tile(Kernel::ragged, 128, 128) == kernel_tile(Kernel::dense, 128, 128));
  EXPECT_TRUE(kernel_tile(Kernel::ragged, 192, 192) == (TileConfig{128, 80, 2, 2, 32, 232, 1}));
  for (int d : {64, 128, 192, 256})  // paged boxes: a power-of-two block_n
    EXPECT_EQ(paged_tile(d).block_n & (paged_tile(d).block_n - 1), 0) << d;
}

// Mode rule: tile-multiple pages always take one TMA per tile; boxes under 16 rows gather by
// default, longer ones shorter than the tile take the lanes (Overrides::paged_fill forces a
// mode only where boxes are shorter than the tile: plan.cpp).
TEST(PageMath, PagedModeRule) {
  EXPECT_EQ(paged_mode_for(box_shift_for(16, 128), 128), kPagedLanes);
  EXPECT_EQ(paged_mode_for(box_shift_for(48, 128), 128), kPagedLanes);  // 16-row boxes
  EXPECT_EQ(paged_mode_for(box_shift_for(8, 128), 128), kPagedGather);
  EXPECT_EQ(paged_mode_for(box_shift_for(3, 128), 128), kPagedGather);
  EXPECT_EQ(paged_mode_for(box_shift_for(100, 64), 64), kPagedGather);
  EXPECT_EQ(paged_mode_for(box_shift_for(24, 128), 128), kPagedGather);  // 8-row boxes
  EXPECT_EQ(paged_mode_for(box_shift_for(32, 128), 128), kPagedLanes);
  EXPECT_EQ(paged_mode_for(box_shift_for(64, 128), 128), kPagedLanes);
  EXPECT_EQ(paged_mode_for(box_shift_for(128, 128), 128), kPagedTma);
  EXPECT_EQ(paged_mode_for(box_shift_for(384, 128), 128), kPagedTma);
  // The team modes are compiled where the paged producer has 56 registers: not hdim 256.
  EXPECT_TRUE(paged_team_ok(paged_tile(64)));
  EXPECT_TRUE(paged_tile(128) == (TileConfig{128, 128, 2, 2, 56, 224, 2}));
  EXPECT_TRUE(paged_team_ok(paged_tile(192, 128)));
  EXPECT_FALSE(paged_team_ok(paged_tile(256)));
  for (int d : {64, 128, 192, 256}) {  // setmaxnreg: 128 producer + 256 consumer threads within 64512
    const TileConfig t = paged_tile(d);
    EXPECT_LE(128 * t.producer_regs + 128 * t.consumer_wgs * t.consumer_regs, 64512) << d;
  }
  EXPECT_EQ(paged_team(kPagedTma), 1);
  EXPECT_EQ(paged_team(kPagedLanes), 32);
  EXPECT_EQ(paged_team(kPagedGather), 128);
}

}  // namespace
}  // namespace longattn::cuda::sm90
