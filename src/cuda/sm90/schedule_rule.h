// Host-side rule for the causal L2 sections of the tile scheduler (scheduler.cuh).
//
// Without sections, causal tiles run longest-first over all (batch, head) pairs at once. When
// there are more pairs than about half the CTAs, the CTAs running together all read
// different heads and every K/V byte comes from DRAM: H100, causal 1k (256 pairs): 238
// TFLOP/s vs 353 with sections; 2k (128 pairs): 316 vs 424. With few pairs the CTAs share
// heads anyway and sections only cost balance: 4k (64 pairs) 526 without vs 487 with, 8k
// 600 vs 519. A section holds about two rounds of tiles (2 x grid), so the snake's
// forward and backward rounds pair long with short tiles, capped by K+V fitting half the L2.
#pragma once

#include <algorithm>
#include <cstdint>

#include "cuda/sm90/params.h"

namespace longattn::cuda::sm90 {

// (batch, head) pairs per section; `pairs` (one section) means no sectioning.
inline int64_t causal_section_pairs(int64_t pairs, int64_t m_blocks, int64_t grid,
                                    int64_t group, int64_t kv_bytes_per_head, int64_t l2_bytes) {
  if (pairs * 2 <= grid) return pairs;
  const int64_t fit = std::max<int64_t>(1, (l2_bytes / 2) / std::max<int64_t>(1, kv_bytes_per_head)) * group;
  const int64_t two_rounds = std::max<int64_t>(1, (2 * grid + m_blocks / 2) / m_blocks);
  return std::clamp<int64_t>(std::min(two_rounds, fit), 1, pairs);
}

// Grid-dependent constants of TileScheduler::tile_id (tiles per section, full sections, and
// rounds / remainder of a full and of the last section). `grid` is the launched CTA count.
inline void fill_schedule_constants(FwdParams* p, int64_t grid) {
  const int64_t nbh = p->heads_q * p->batch, sec_tiles = p->section_bh * p->num_m_blocks;
  const int64_t last_tiles = (nbh % p->section_bh) * p->num_m_blocks;
  p->sec_tiles = uint32_t(sec_tiles);
  p->full_secs = uint32_t(nbh / p->section_bh);
  p->sec_rounds = uint32_t(sec_tiles / grid);
  p->sec_rem = uint32_t(sec_tiles % grid);
  p->last_rounds = uint32_t(last_tiles / grid);
  p->last_rem = uint32_t(last_tiles % grid);
}

}  // namespace longattn::cuda::sm90
