// The persistent tile schedule, checked on the host for every CTA: each tile id is produced
// exactly once, decode() is a bijection onto (batch, head, q-block), causal tiles come
// longest first inside a section, and the per-CTA work is balanced. Needs no GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <tuple>
#include <vector>

#include "cuda/sm90/schedule_rule.h"
#include "cuda/sm90/scheduler.cuh"

namespace longattn::cuda::sm90 {
namespace {

struct Case {
  int64_t batch, heads, m_blocks, grid, section;  // section 0: the rule's choice
  bool causal, sections_kernel;
};

void check(const Case& cs) {
  FwdParams p;
  p.batch = cs.batch;
  p.heads_q = cs.heads;
  p.num_m_blocks = cs.m_blocks;
  p.num_tiles = cs.batch * cs.heads * cs.m_blocks;
  p.causal = cs.causal;
  const int64_t grid = std::min<int64_t>(cs.grid, p.num_tiles);
  p.section_bh = cs.section ? cs.section
                            : causal_section_pairs(cs.batch * cs.heads, cs.m_blocks, grid, 1,
                                                   int64_t(cs.m_blocks) * 128 * 512, 50 << 20);
  if (!cs.sections_kernel) p.section_bh = cs.batch * cs.heads;
  fill_schedule_constants(&p, grid);

  std::vector<int> seen(size_t(p.num_tiles), 0);
  std::set<std::tuple<int, int, int>> coords;
  int64_t max_work = 0, total = 0;
  for (int64_t c = 0; c < grid; ++c) {
    int64_t work = 0;
    for (int64_t k = 0;; ++k) {
      const int64_t t = cs.sections_kernel ? TileScheduler::tile_id<true>(p, k, uint32_t(grid), uint32_t(c))
                                           : TileScheduler::tile_id<false>(p, k, uint32_t(grid), uint32_t(c));
      if (t < 0) break;
      ASSERT_LT(t, p.num_tiles);
      ++seen[size_t(t)];
      const TileCoord tc = TileScheduler::decode(p, t);
      ASSERT_TRUE(tc.b >= 0 && tc.b < cs.batch && tc.h >= 0 && tc.h < cs.heads && tc.m_block >= 0 &&
                  tc.m_block < cs.m_blocks);
      coords.insert({tc.b, tc.h, tc.m_block});
      work += cs.causal ? tc.m_block + 1 : 1;  // causal cost ~ key blocks visited
    }
    max_work = std::max(max_work, work);
    total += work;
  }
  for (int64_t t = 0; t < p.num_tiles; ++t) ASSERT_EQ(seen[size_t(t)], 1) << "tile " << t;
  EXPECT_EQ(int64_t(coords.size()), p.num_tiles) << "decode is not a bijection";
  const double imbalance = double(max_work) * double(grid) / double(total);
  printf("b%lld h%lld m%lld grid %lld section %lld causal %d: max/mean work %.3f\n", (long long)cs.batch,
         (long long)cs.heads, (long long)cs.m_blocks, (long long)grid, (long long)p.section_bh, cs.causal,
         imbalance);
  // Balance bound for what the rule produces: many tiles per CTA and sections of at least
  // one round (smaller forced sections restart the snake at CTA 0 each time, so CTAs past
  // the section size get nothing: see scheduler.cuh).
  if (p.num_tiles >= 8 * grid && int64_t(p.sec_tiles) >= grid) EXPECT_LT(imbalance, 1.12);
}

TEST(TileScheduler, EveryTileOnceAndBalanced) {
  const Case cases[] = {
      {16, 16, 8, 132, 0, true, true},     // causal 1k: sections (pairs > grid/2)
      {8, 16, 16, 132, 0, true, true},     // causal 2k
      {4, 16, 32, 132, 0, true, true},     // causal 4k: no sections by the rule
      {1, 16, 128, 132, 0, true, true},    // causal 16k
      {3, 5, 6, 132, 3, true, true},       // section not dividing the pairs
      {3, 5, 6, 7, 1, true, true},         // tiny grid
      {2, 16, 64, 132, 0, true, false},    // hdim-256 kernel: global schedule
      {16, 16, 8, 132, 0, false, true},    // non-causal
      {1, 1, 1, 132, 0, true, true},       // one tile
  };
  for (const Case& c : cases) check(c);
}

}  // namespace
}  // namespace longattn::cuda::sm90
