// Host-side rules of the tile scheduler (scheduler.cuh): the L2 budget and the head sections.
//
// The budget rule. A 128-row Q tile does ~128 FLOP per byte of K/V, below the H100's ridge
// (DESIGN.md): the kernel stays compute-bound only while most K/V reads hit L2. So the tiles
// that run at the same time should read few heads' K/V, and those heads' K+V should stay in
// L2 until every tile that needs them has run. A "section" is a run of (batch, query head)
// pairs, query heads of one kv head adjacent (GQA: they read the same K/V), whose K+V fit the
// budget:
//   budget  = Args::l2_budget_bytes, else half the device's L2
//             (cudaDevAttrL2CacheSize; the other half holds Q / O traffic and the tail of
//             the previous section);
//   fit     = max(1, budget / (seq_k x (dim_qk + dim_v) x 2 bytes)) kv heads, x group pairs.
// Tiles of one section run before the next section starts.
//
// Uniform-cost tiles (no causal mask): q-tiles of one pair fastest, i.e. sections of one pair.
// Every tile costs the same, so the CTAs finish a pair together and all of them read one
// head's K/V at a time (in lockstep, from the last key block down); nothing is gained by
// larger sections. "Sections off" (Overrides::sections = 0) is a genuinely different order: one
// section of all pairs, pairs fastest, so the CTAs running together read every head at once.
//
// Causal tiles: longest first (LPT) inside each section, snake-dealt over the CTAs, the snake
// restarting at CTA 0 in every section (scheduler.cuh). The restart makes each section's
// balance its own, so a section must hold an even number of snake rounds (forward and
// backward rounds pair long with short tiles) or so many rounds that the partial one holds
// only the cheapest tiles; it must hold at least one round or the high CTAs would get nothing.
// Sections of two rounds ran causal 1k (256 pairs) 1.5x faster than none; the first version
// (a snake running across sections) lost 14% at 8k, which the per-section restart fixed
// (docs/PERFORMANCE.md).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cuda/sm90/params.h"

namespace longattn::cuda::sm90 {

// K+V bytes a section may keep in L2: the caller's budget (Args::l2_budget_bytes) if > 0,
// else half the device's L2 size.
inline int64_t l2_budget(int64_t requested, int64_t device_l2_bytes) {
  if (requested > 0) return requested;
  return std::max<int64_t>(1, device_l2_bytes / 2);
}

// (batch, head) pairs per section. `lpt`: causal tiles (longest first, snake-dealt);
// otherwise uniform-cost tiles (sections of one pair, see above). `pairs` = batch x heads_q,
// `m_blocks` q-tiles per pair, `grid` launched CTAs, `group` query heads per kv head,
// `kv_bytes_per_head` the K+V bytes of one (batch, kv head).
inline int64_t section_pairs(bool lpt, int64_t pairs, int64_t m_blocks, int64_t grid, int64_t group,
                             int64_t kv_bytes_per_head, int64_t budget) {
  if (!lpt) return 1;
  grid = std::max<int64_t>(1, grid);
  m_blocks = std::max<int64_t>(1, m_blocks);
  group = std::max<int64_t>(1, group);
  const int64_t fit = std::min(pairs, std::max<int64_t>(1, budget / std::max<int64_t>(1, kv_bytes_per_head)) * group);
  // Everything fits and the pairs are few (<= half the grid: the CTAs share heads anyway):
  // one LPT list balances best. This rule also sections 4k-16k x 16 heads (K+V of all heads
  // 128 MB > 25 MB).
  if (fit >= pairs && pairs * 2 <= grid) return pairs;
  const int64_t one_round = (grid + m_blocks - 1) / m_blocks;
  const int64_t two_rounds = std::max<int64_t>(1, (2 * grid + m_blocks / 2) / m_blocks);
  // Many rounds: the partial round holds only the cheapest tiles; whole kv heads.
  if (fit * m_blocks >= 16 * grid) return std::max(fit, one_round);
  // Few rounds. A section's tiles past its last even round go, cheapest, to the same low CTAs
  // in every section (the snake restarts at CTA 0), so an excess accumulates over the
  // sections (17 pairs of 16 q-blocks: 272 tiles = 2 x 132 + 8, and CTAs 0..7 got 8% more
  // work than the mean over the 8 sections of causal 2k x 8 x 16 heads), while a section a
  // little short of an even round count costs nothing (CTAs 0..e-1 get less).
  // So: first the largest s <= fit whose tiles are exactly an even number of rounds, else
  // the largest such s <= 1.5 x fit (the budget is half the L2, so the other half still holds
  // some of it); then the largest s <= fit at most half a pair's tiles short of one; whole kv
  // heads where s >= group. Past the budget only where nothing within it is exact: an exact
  // section past it lost to an exact one within it (docs/PERFORMANCE.md, session 9).
  const int64_t two = 2 * grid;
  for (const int64_t cap : {fit, fit + fit / 2}) {
    for (int64_t s = std::min(pairs, cap); s >= 1; --s) {
      if (s >= group && s % group != 0) continue;
      if ((s * m_blocks) % two == 0) return s;
    }
  }
  for (int64_t s = fit; s >= 1; --s) {
    if (s >= group && s % group != 0) continue;
    const int64_t tiles = s * m_blocks, r = (tiles + two - 1) / two;  // pairs of rounds covering it
    if (2 * (r * two - tiles) <= m_blocks) return s;
  }
  // Fewer than two rounds fit the budget: balance wins (a section of 1.3 rounds left CTAs
  // idle for ~1.5x the mean work in the host model), so about two rounds.
  return std::min(std::max(two_rounds, one_round), pairs);
}

// Dynamic assignment rule (scheduler.cuh DynamicTiles): only when the longest tile visits at
// least 1536 key blocks (192k keys at block_n 128): it lost 13% at causal 1k and 3% at 8k,
// won 3% at 256k (docs/PERFORMANCE.md). The producer takes each id with a global atomic when
// it starts a tile, so short tiles pay its latency; on long tiles it absorbs the spread of
// tile times that the snake's cost model ignores.
inline bool dynamic_worth(int64_t max_key_blocks) { return max_key_blocks >= 1536; }

// With Args::sm_margin (a grid smaller than the device, other kernels on the free SMs), from
// 128 key blocks (16k keys at block_n 128) on: there the counter's latency is small next to a
// tile (it lost 3% at 8k on the full grid), while the static snake's sections, chosen for the
// grid's whole rounds, balance badly on grids like 116-124 CTAs (host model,
// test_scheduler.cpp SharedGpuGridsTakeTheCounter: key-prefix calls 1.32-1.44x of the ideal
// makespan, causal 8k-32k up to 1.10x) and assume CTAs that start together.
inline bool dynamic_on_shared_gpu(int64_t max_key_blocks) { return max_key_blocks >= 128; }

// Split-KV rule. A call whose tiles fill less than half the SMs (few heads, or a short query
// chunk against a long KV prefix) leaves most SMs idle; splitting the keys into S ranges
// multiplies the tiles by S, and cuda_combine merges the S f32 partials (exact up to
// rounding: the empty-partial rule of longattn::combine). S = min(SMs / tiles, key blocks /
// 16, 16): about one wave of tiles, and every split keeps >= 16 key blocks (2048 keys at
// block_n 128), so its f32 partial write (4 x dim bytes per query row) and the combine pass
// stay small next to its K/V reads (>= 2 x 2048 x dim x 2 bytes per tile). Only dense batch-1
// calls without sinks / softcap / windows / chunks (the dense kernels; a sink would count once
// per split), so a row's result never depends on other sequences in a batch: a batched call
// never splits. S < 2: no split.
inline int64_t kv_splits(int64_t tiles, int64_t sms, int64_t key_blocks) {
  if (tiles <= 0 || tiles * 2 > sms) return 1;
  const int64_t s = std::min<int64_t>({sms / tiles, key_blocks / 16, 16});
  return s >= 2 ? s : 1;
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

// The rotated section list's last section (TileScheduler::rotated_tile_id: shorter than the
// others) starts at one of two CTAs. The full sections' partial-round tiles cover the arc
// [a, a + full_secs * sec_rem) around the grid (a: rotated_tile_id), once more on its first
// (full_secs * sec_rem) mod g CTAs. Starting where the arc stops gives a section whose first
// CTAs get the most (its longest tiles, a forward partial round) to the CTAs that had one tile
// fewer; starting where it starts puts its first CTAs on those that had one more, right where
// they are its lightest (an odd number of rounds and a long backward partial round leave the
// first g - last_rem CTAs one tile short). The pick: the lower max per-CTA load in the
// scheduler's cost model (causal ramp, LPT rank r of n pairs' tiles: i / n, a tile costs its
// nm - r key blocks + 3), of the full sections counting only the surplus tiles (their whole
// rounds balance in pairs where the rule rotates). A last section of more than 4 rounds
// balances like the full ones and continues the arc. Host work: at most ~5 grids of tiles.
inline uint32_t rotated_last_first(const FwdParams& sec, int64_t grid) {
  const int64_t g = grid, rem = sec.sec_rem, full = sec.full_secs, tiles_last = sec.last_rounds * g + sec.last_rem;
  const int64_t a = (sec.sec_rounds & 1) ? g - rem : 0;
  const int64_t starts[2] = {(a + full * rem) % g, a % g};
  if (tiles_last == 0 || tiles_last > 4 * g || starts[0] == starts[1]) return uint32_t(starts[0]);
  const int64_t nm = sec.num_m_blocks, pairs = sec.section_bh, last_pairs = sec.heads_q * sec.batch - full * pairs;
  int64_t surplus = 0;  // a full section's partial-round tiles, mean cost
  for (int64_t i = sec.sec_rounds * g; i < int64_t(sec.sec_tiles); ++i) surplus += nm - i / pairs + 3;
  surplus = rem ? surplus / rem : 0;
  std::vector<int64_t> load(size_t(g), 0), last(size_t(g), 0);
  for (int64_t c = 0; c < g; ++c) {  // c's count on the arc: positions x in [a, a + full * rem), x = c mod g
    auto upto = [&](int64_t x) { return x > c ? (x - c - 1) / g + 1 : int64_t(0); };
    load[size_t(c)] = (upto(a + full * rem) - upto(a)) * surplus;
  }
  for (int64_t i = 0; i < tiles_last; ++i) {
    const int64_t round = i / g, at = i - round * g;
    last[size_t((round & 1) ? g - 1 - at : at)] += nm - i / last_pairs + 3;
  }
  int64_t best = -1, pick = starts[0];
  for (const int64_t s : starts) {
    int64_t worst = 0;
    for (int64_t c = 0; c < g; ++c) worst = std::max(worst, load[size_t(c)] + last[size_t((c - s + g) % g)]);
    if (best < 0 || worst < best) best = worst, pick = s;
  }
  return uint32_t(pick);
}

}  // namespace longattn::cuda::sm90
