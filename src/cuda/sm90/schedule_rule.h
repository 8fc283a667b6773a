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
#include <array>
#include <cstdint>
#include <numeric>
#include <vector>

#include "common/mask_rule.h"  // LONGATTN_HD
#include "cuda/sm90/params.h"

namespace longattn::cuda::sm90 {

// The rotated section list's arc (TileScheduler::rotated_tile_id, rotated_last_first): the full
// sections' partial-round tiles lie on line positions from arc_start on, position x on CTA
// x mod g; a forward partial round (even `rounds`) starts at CTA 0, a backward one ends just
// before it.
LONGATTN_HD int64_t arc_start(int64_t rounds, int64_t rem, int64_t g) { return (rounds & 1) ? g - rem : 0; }
// How many of the line positions [0, x) land on CTA c.
LONGATTN_HD int64_t arc_count(int64_t x, int64_t c, int64_t g) { return x > c ? (x - c - 1) / g + 1 : 0; }

// The scheduler's cost model of a causal tile: its key blocks plus this many block times of
// fixed cost (tile start, last P.V, epilogue; docs/PERFORMANCE.md "Per-tile fixed cost").
inline constexpr int64_t kTileFixedBlocks = 3;

// K+V bytes a section may keep in L2: the caller's budget (Args::l2_budget_bytes) if > 0,
// else half the device's L2 size.
inline int64_t l2_budget(int64_t requested, int64_t device_l2_bytes) {
  if (requested > 0) return requested;
  return std::max<int64_t>(1, device_l2_bytes / 2);
}

// The sectioned snake's balance in the scheduler's cost model: mean over max per-CTA load
// when `pairs` (batch, head) pairs of `m_blocks` causal q-tiles run in sections of `s` pairs,
// each dealt longest first (LPT rank i of a section of n pairs: cost m_blocks - i / n +
// kTileFixedBlocks) as a snake over `grid` CTAs from CTA 0 (scheduler.cuh tile_id). All full
// sections load the CTAs alike, so one is dealt and counted full-sections times; the shorter
// last section is dealt once. A run of equal-cost tiles inside one round covers a range of
// CTAs: one add and one subtract in `diff` (grid + 1 entries), so a section costs ~m_blocks +
// 2 x its rounds steps and the loads one pass over the grid.
inline double snake_balance(int64_t s, int64_t pairs, int64_t m_blocks, int64_t grid, std::vector<int64_t>& diff) {
  std::fill(diff.begin(), diff.end(), 0);
  const int64_t full = pairs / s, last = pairs % s;
  int64_t total = 0;
  auto deal = [&](int64_t n, int64_t times) {  // no divisions: rank and round advance by runs
    const int64_t tiles = n * m_blocks;
    int64_t i = 0, rank = 0, rank_end = n, round = 0, round_start = 0;
    while (i < tiles) {
      const int64_t round_end = std::min(tiles, round_start + grid), run_end = std::min(round_end, rank_end);
      const int64_t cost = (m_blocks - rank + kTileFixedBlocks) * times;
      int64_t c0 = i - round_start, c1 = run_end - round_start;  // CTAs [c0, c1) of a forward round
      if (round & 1) std::swap(c0, c1), c0 = grid - c0, c1 = grid - c1;  // a backward round: mirrored
      diff[size_t(c0)] += cost;
      diff[size_t(c1)] -= cost;
      total += cost * (run_end - i);
      i = run_end;
      if (i == rank_end) ++rank, rank_end += n;
      if (i == round_end) ++round, round_start += grid;
    }
  };
  deal(s, full);
  if (last > 0) deal(last, 1);
  int64_t worst = 0, acc = 0;
  for (int64_t c = 0; c < grid; ++c) worst = std::max(worst, acc += diff[size_t(c)]);
  return worst > 0 ? double(total) / double(grid) / double(worst) : 1.0;
}

// (batch, head) pairs per section. `lpt`: causal tiles (longest first, snake-dealt);
// otherwise uniform-cost tiles (sections of one pair, see above). `pairs` = batch x heads_q,
// `m_blocks` q-tiles per pair, `grid` launched CTAs, `group` query heads per kv head,
// `kv_bytes_per_head` the K+V bytes of one (batch, kv head). `restart`: the order deals each
// section's snake from CTA 0 (the kernels' own sectioned snake; false: the rotated section
// list, whose partial rounds rotate over the grid, keeps the near-even rule below).
inline int64_t section_pairs(bool lpt, int64_t pairs, int64_t m_blocks, int64_t grid, int64_t group,
                             int64_t kv_bytes_per_head, int64_t budget, bool restart = true) {
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
  // Many rounds: the partial round holds only the cheapest tiles; whole kv heads.
  if (fit * m_blocks >= 16 * grid) return std::max(fit, one_round);
  // Few rounds. First the largest s <= fit whose tiles are exactly an even number of snake
  // rounds (forward and backward rounds pair long with short tiles), else the largest such s
  // <= 1.5 x fit (the budget is half the L2, so the other half still holds some of it); whole
  // kv heads where s >= group. An exact section past the budget lost to an exact one within
  // it (docs/PERFORMANCE.md, session 9).
  const int64_t two = 2 * grid;
  for (const int64_t cap : {fit, fit + fit / 2}) {
    for (int64_t s = std::min(pairs, cap); s >= 1; --s) {
      if (s >= group && s % group != 0) continue;
      if ((s * m_blocks) % two == 0) return s;
    }
  }
  // Else the largest s <= fit at most half a pair's tiles short of an even round count (a
  // section a little short costs nothing: CTAs 0..e-1 get less), whole kv heads; else about
  // two rounds (a section of 1.3 rounds left CTAs idle for ~1.5x the mean work).
  int64_t near = 0;
  for (int64_t s = fit; s >= 1 && near == 0; --s) {
    if (s >= group && s % group != 0) continue;
    const int64_t tiles = s * m_blocks, r = (tiles + two - 1) / two;  // pairs of rounds covering it
    if (2 * (r * two - tiles) <= m_blocks) near = s;
  }
  if (near == 0) near = std::min(std::max((2 * grid + m_blocks / 2) / m_blocks, one_round), pairs);
  if (!restart) return near;
  // Where that balances badly in the sectioned snake's model (snake_balance below 0.95), the
  // model decides: the smallest section of whole kv heads, of at least one round and at most
  // twice the budget, within 1% of the best balance there, if it beats `near` by 0.03. The
  // snake restarts at CTA 0 in every section, so a section's partial round lands on the same
  // CTAs each time and the last, shorter section adds its own (measurements:
  // docs/history/PERFORMANCE-sessions-16-33.md,
  // "Head sections by the snake's modelled balance").
  // Host work: at most 64 candidates of ~m_blocks + 2 x rounds + grid steps each.
  std::vector<int64_t> diff(static_cast<size_t>(grid) + 1);
  const double near_balance = snake_balance(near, pairs, m_blocks, grid, diff);
  if (near_balance >= 0.95) return near;
  const int64_t lo = std::min(pairs, one_round), hi = std::min({pairs, std::max(2 * fit, lo), lo + 63});
  std::array<double, 64> score;  // [s - lo]; -1: not a whole number of kv heads
  score.fill(-1.0);
  double best = -1.0;
  for (int64_t s = lo; s <= hi; ++s) {
    if (s >= group && s % group != 0) continue;
    score[size_t(s - lo)] = snake_balance(s, pairs, m_blocks, grid, diff);
    best = std::max(best, score[size_t(s - lo)]);
  }
  if (best < near_balance + 0.03) return near;
  for (int64_t s = lo; s <= hi; ++s)
    if (score[size_t(s - lo)] >= best - 0.01) return s;
  return near;
}

// Dynamic assignment rule (scheduler.cuh DynamicTiles): only when the longest tile visits at
// least 1536 key blocks (192k keys at block_n 128): it lost 13% at causal 1k and 3% at 8k,
// won 3% at 256k (docs/PERFORMANCE.md). The producer takes each id with a global atomic when
// it starts a tile, so short tiles pay its latency; on long tiles it absorbs the spread of
// tile times that the snake's cost model ignores.
inline bool dynamic_worth(int64_t max_key_blocks) { return max_key_blocks >= 1536; }

// Tiles where deal_unbalanced can say yes (the caller checks before building `blocks`): more
// than two rounds (the launch's condition for the counter), at most 2^16 (below).
inline bool deal_in_reach(int64_t tiles, int64_t grid) {
  return grid > 0 && tiles > 2 * grid && tiles <= (int64_t(1) << 16);
}

// Both-sided windows (no causal mask) on the kinds that compile the counter (plan.cpp): the
// counter only where the static deal leaves the CTAs unbalanced. Without LPT, CTA c runs ids
// c, c + g, c + 2g, ... with one pair's q-blocks fastest, so with g close to a multiple of the
// q-blocks per pair each CTA gets the same few q-blocks of every pair, and a window's edge
// q-blocks see fewer keys (batch 1 x 16k, window (2048, 2048): modelled 1.10x the mean load).
// `blocks[m]`: the key blocks q-block m visits (the same for every pair of a uniform batch);
// a tile costs them plus kTileFixedBlocks. The counter's max load is taken as the mean plus
// half a mean tile (it ends within about a tile of the mean), and it must win 2% in this
// model: below that the counter's own cost (the producer's atomic before each tile's Q load)
// ate the gain (docs/history/PERFORMANCE-sessions-16-33.md, "Both-sided windows on the counter").
// Host work: CTA c's q-blocks repeat with period P = nm / gcd(g mod nm, nm) in its tile index,
// so its load is whole periods plus a prefix of one: min(P, its tiles) steps per CTA (16 x 1k:
// 2 each; 1 x 16k: 16). Calls of more than 2^16 tiles keep the deal: their CTAs run hundreds
// of tiles each, nearly whole periods, which balances them.
inline bool deal_unbalanced(const std::vector<int64_t>& blocks, int64_t pairs, int64_t grid) {
  const int64_t nm = int64_t(blocks.size()), n = pairs * nm;
  if (nm == 0 || !deal_in_reach(n, grid)) return false;
  const int64_t step = grid % nm;
  const int64_t period = nm / std::gcd(step, nm);  // step 0: period 1
  int64_t total = 0, worst = 0;
  for (int64_t c = 0; c < grid; ++c) {
    const int64_t tiles = (n - c + grid - 1) / grid;  // ids c, c + g, ... below n
    const int64_t walk = std::min(tiles, period), rest = tiles % period;
    int64_t sum = 0, prefix = 0;  // one period (or all of c's tiles), and its first `rest` tiles
    for (int64_t k = 0, m = c % nm; k < walk; ++k) {
      if (k == rest) prefix = sum;
      sum += blocks[size_t(m)] + kTileFixedBlocks;
      m += step;
      if (m >= nm) m -= nm;
    }
    const int64_t load = tiles < period ? sum : (tiles / period) * sum + prefix;
    total += load;
    worst = std::max(worst, load);
  }
  const double mean = double(total) / double(grid), tile = double(total) / double(n);
  return double(worst) >= 1.02 * (mean + tile / 2);
}

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

// The sectioned snake's rotation (FwdParams::sec_rot): sections of whole rounds (sec_rem 0),
// at least two of them, and fewer pairs than CTAs: section j's deal starts at CTA j x
// section_bh (mod grid), so each CTA runs a different LPT rank pair in successive sections. In
// the snake a round pairs a CTA's long tile with a short one of the same key-block sum (8 + 1,
// 7 + 2, ... at causal 1k), but measured tile times are not linear in key blocks (a long
// tile's blocks run faster than a short one's: docs/PERFORMANCE.md, "Each tile's time"), so
// without rotation the CTAs of the middle pairs (5 + 4) end later in every section. 0: none.
// The product j x section_bh stays below 2^31 (FastDiv).
inline uint32_t snake_rotation(const FwdParams& p, int64_t grid) {
  if (!p.lpt || p.sec_rem != 0 || p.full_secs < 2 || p.section_bh >= grid) return 0;
  if ((int64_t(p.full_secs) + 1) * p.section_bh >= (int64_t(1) << 31)) return 0;
  return uint32_t(p.section_bh);
}

// Grid-dependent constants of TileScheduler::tile_id (tiles per section, full sections, and
// rounds / remainder of a full and of the last section; the rotation). `grid` is the launched
// CTA count.
inline void fill_schedule_constants(FwdParams* p, int64_t grid) {
  const int64_t nbh = p->heads_q * p->batch, sec_tiles = p->section_bh * p->num_m_blocks;
  const int64_t last_tiles = (nbh % p->section_bh) * p->num_m_blocks;
  p->sec_tiles = uint32_t(sec_tiles);
  p->full_secs = uint32_t(nbh / p->section_bh);
  p->sec_rounds = uint32_t(sec_tiles / grid);
  p->sec_rem = uint32_t(sec_tiles % grid);
  p->last_rounds = uint32_t(last_tiles / grid);
  p->last_rem = uint32_t(last_tiles % grid);
  auto fd = [](int64_t d) { return FastDiv(uint32_t(d > 0 ? d : 1)); };  // every d < 2^31 here
  p->fd_nm = fd(p->num_m_blocks);
  p->fd_nh = fd(p->heads_q);
  p->fd_group = fd(p->group);
  p->fd_sec_tiles = fd(sec_tiles);
  p->fd_sec_bh = fd(p->section_bh);
  p->fd_last_bh = fd(nbh % p->section_bh);
  p->fd_rounds = fd(p->sec_rounds);
  p->fd_rounds1 = fd(int64_t(p->sec_rounds) + 1);
  p->fd_grid = fd(grid);
  p->sec_rot = snake_rotation(*p, grid);
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
// nm - r + kTileFixedBlocks), of the full sections counting only the surplus tiles (their whole
// rounds balance in pairs where the rule rotates). A last section of more than 4 rounds
// balances like the full ones and continues the arc. Host work: at most ~5 grids of tiles.
inline uint32_t rotated_last_first(const FwdParams& sec, int64_t grid) {
  const int64_t g = grid, rem = sec.sec_rem, full = sec.full_secs, tiles_last = sec.last_rounds * g + sec.last_rem;
  const int64_t a = arc_start(sec.sec_rounds, rem, g);
  const int64_t starts[2] = {(a + full * rem) % g, a % g};
  if (tiles_last == 0 || tiles_last > 4 * g || starts[0] == starts[1]) return uint32_t(starts[0]);
  const int64_t nm = sec.num_m_blocks, pairs = sec.section_bh, last_pairs = sec.heads_q * sec.batch - full * pairs;
  int64_t surplus = 0;  // a full section's partial-round tiles, mean cost
  for (int64_t i = sec.sec_rounds * g; i < int64_t(sec.sec_tiles); ++i)
    surplus += nm - i / pairs + kTileFixedBlocks;
  surplus = rem ? surplus / rem : 0;
  std::vector<int64_t> load(size_t(g), 0), last(size_t(g), 0);
  for (int64_t c = 0; c < g; ++c)  // c's count on the arc [a, a + full * rem)
    load[size_t(c)] = (arc_count(a + full * rem, c, g) - arc_count(a, c, g)) * surplus;
  for (int64_t i = 0; i < tiles_last; ++i) {
    const int64_t round = i / g, at = i - round * g;
    last[size_t((round & 1) ? g - 1 - at : at)] += nm - i / last_pairs + kTileFixedBlocks;
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
