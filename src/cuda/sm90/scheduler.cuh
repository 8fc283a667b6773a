// Persistent tile scheduler: which (batch, head, q-block) each CTA computes, in order.
//
// Tile ids enumerate L2 sections of (batch, head) pairs (schedule_rule.h: the budget rule),
// query heads sharing a kv head adjacent (h = hk * group + g), then batch.
// Uniform-cost tiles (non-causal): sections of one pair, so q-blocks of one head run
// fastest and the CTAs running together read one head's K/V; dealt round-robin. (Non-causal
// windows on the kinds without the counter: one section of every pair, q-block-major; plan.cpp.)
// Causal (lpt): inside each section, longest tiles first (LPT), snake-dealt to balance CTAs.
// Ragged batches (tile_list): a device list of (sequence, head, q-block) tiles, sequence-major
// (sequences heaviest first, one kv head at a time; tile_list.cuh), snake-dealt or taken from
// the counter; no empty tiles. The hdim-256 dense kinds (causal, sections cut): the sectioned
// LPT snake written out as a device list (section_list_entry; KernelConfig kSectionList), id
// k * grid + c for CTA c's k-th tile, since their producer has no registers for tile_id<true>;
// the list may deal each section from a rotating first CTA (rotated_tile_id, rotation_rule).
// Persistent grid of #SMs CTAs (no gridDim.y/z); producer and consumers of a CTA walk the
// same deterministic tile sequence, so no tile ids cross between them.
// Dynamic assignment (kernels of hdim 64 / 128 with two consumer warpgroups, p.tile_counter
// set): the CTAs take tile ids from one atomic counter in id order instead of the static snake
// (or, without LPT, the round-robin deal), so a CTA that drew short tiles takes more and the
// tail does not idle SMs; see DynamicTiles. NOTES: an
// earlier version made ptxas spill the hdim-256 consumer (156 bytes at 232 registers), so
// hdim 256 (TileConfig::lpt_sections false) keeps a static order (the snake or its list).
// The kernel only sees tile_id() / decode() / DynamicTiles.
#pragma once

#include <cstdint>

#include "common/mask_rule.h"  // LONGATTN_HD
#include "cuda/sm90/params.h"
#include "cuda/sm90/schedule_rule.h"  // arc_start, arc_count
#if defined(__CUDACC__)
#include "cuda/ptx/tma.cuh"  // mbarriers (DynamicTiles)
#endif

namespace longattn::cuda::sm90 {

// 32-bit: these are TMA coordinates (int32 in hardware); the host refuses problems with 2^31
// tiles or more. Element offsets built from them are 64-bit.
struct TileCoord {
  int32_t b, h, m_block;
};

struct TileScheduler {
  // The k-th tile (k = 0, 1, ...) of this CTA, or -1 when it has no more work.
  // Causal: inside each L2 section (see decode) tiles are sorted by cost, longest first
  // (LPT), and dealt in snake order (rounds alternate direction over the CTAs), restarting
  // at every section so each section is balanced on its own (a snake running across the
  // sections' cost sawtooth unbalanced long sequences). Plain round-robin over one LPT list
  // gave some CTAs 1.6x the mean work.
  // NOTES: kept to a handful of 32-bit operations (the producer has 32 registers). Every
  // section restarts at CTA 0, so sections smaller than the grid (never produced by
  // schedule_rule.h, only forced through Overrides::sections) leave the high CTAs idle.
  // g = gridDim.x, c = blockIdx.x (parameters so host tests can enumerate every CTA).
  template <bool kSections = true>
  LONGATTN_HD static int64_t tile_id(const FwdParams& p, int64_t k, uint32_t g, uint32_t c) {
    if (!p.lpt || !kSections) {  // without sections: one snake over everything
      const int64_t t = k * g + ((p.lpt && (k & 1)) ? g - 1 - c : c);
      return t < p.num_tiles ? t : -1;
    }
    // Per section: whole rounds plus a partial round of r tiles, which runs forward (CTAs
    // 0..r-1) after an even number of rounds and backward after an odd one. The host
    // precomputes rounds/remainder of the full and the last section.
    const uint32_t kk0 = uint32_t(k);
    if (p.sec_rot) {  // whole-round sections (sec_rem 0), section j from CTA (j x sec_rot) mod g
      uint32_t sec = p.fd_rounds.div(kk0);
      if (sec > p.full_secs) sec = p.full_secs;
      const uint32_t kk = kk0 - sec * p.sec_rounds, r = sec * p.sec_rot, shift = r - p.fd_grid.div(r) * g;
      const uint32_t v = c >= shift ? c - shift : c + g - shift;  // c's place in section sec's deal
      if (sec == p.full_secs) {
        const uint32_t per_last = p.last_rounds + ((p.last_rounds & 1) ? (v >= g - p.last_rem) : (v < p.last_rem));
        if (kk >= per_last) return -1;
      }
      return int64_t(sec) * p.sec_tiles + int64_t(kk) * g + ((kk & 1) ? g - 1 - v : v);
    }
    const uint32_t extra = (p.sec_rounds & 1) ? (c >= g - p.sec_rem) : (c < p.sec_rem);
    const uint32_t per_full = p.sec_rounds + extra;
    uint32_t sec = per_full ? (extra ? p.fd_rounds1 : p.fd_rounds).div(kk0) : p.full_secs;
    if (sec > p.full_secs) sec = p.full_secs;
    uint32_t kk = kk0 - sec * per_full;
    if (sec == p.full_secs) {
      const uint32_t per_last = p.last_rounds + ((p.last_rounds & 1) ? (c >= g - p.last_rem) : (c < p.last_rem));
      if (kk >= per_last) return -1;
    }
    const uint32_t pos = (kk & 1) ? g - 1 - c : c;
    return int64_t(sec) * p.sec_tiles + int64_t(kk) * g + pos;
  }
  // The sectioned schedule as a list (KernelConfig kSectionList: kernels whose producer has
  // no registers for tile_id<true>): entry k * g + c is CTA c's k-th tile (decoded), or b = -1
  // once it has none. The kernel then takes ids k * g + c (p.lpt 0: no snake) and decode<true>
  // reads the entry. rotate false: exactly tile_id<true>'s order with `sec`'s constants.
  // rotate true: section j is dealt as tile_id<true> deals a section, but starting at CTA
  // (j * sec_rem) mod g, so the partial rounds' tiles of successive sections go to successive
  // CTAs around the grid instead of CTAs 0..sec_rem-1 (or the top sec_rem) every time: with
  // many sections that leave a few tiles over (e.g. 17 pairs of 16 q-blocks on 132 CTAs) those
  // CTAs otherwise ran one extra tile per section. Only the list's pre-kernel computes it (one
  // thread per entry, registers to spare), so it may search: the count of CTA c's tiles in the
  // sections before j is closed-form, and a binary search over j finds the section of its k-th.
  // The last section (shorter) starts at CTA `last_first` (schedule_rule.h rotated_last_first).
  LONGATTN_HD static TileCoord section_list_entry(const FwdParams& sec, int64_t k, uint32_t g, uint32_t c,
                                                  bool rotate, uint32_t last_first) {
    const int64_t t = rotate ? rotated_tile_id(sec, k, g, c, last_first) : tile_id<true>(sec, k, g, c);
    if (t < 0) return TileCoord{-1, 0, 0};
    return decode<false>(sec, t);
  }
  // Where the rule rotates (LaunchArgs::section_rotate -1): full sections with a partial round
  // after an even number of whole rounds, or after an odd number where it covers at most 3/4
  // of the grid. Even: the whole rounds balance in pairs and leave the partial round's tiles as
  // surplus on the same CTAs every section. Odd: the backward partial round goes to the CTAs
  // the last forward round gave its shortest tiles, which balances them only when it covers
  // nearly the whole grid; otherwise CTAs below g - sec_rem take that round's longest tiles and
  // nothing more in every section (the host model and the device runs:
  // docs/history/PERFORMANCE-sessions-16-33.md,
  // "The section list's sections from rotating first CTAs").
  LONGATTN_HD static bool rotation_rule(const FwdParams& sec, uint32_t g) {
    return sec.sec_rem != 0 && (!(sec.sec_rounds & 1) || 4 * uint64_t(sec.sec_rem) <= 3 * uint64_t(g));
  }
  // CTA c's k-th tile under the rotated sectioned snake (section_list_entry), or -1.
  LONGATTN_HD static int64_t rotated_tile_id(const FwdParams& sec, int64_t k, uint32_t g, uint32_t c,
                                             uint32_t last_first) {
    const int64_t rounds = sec.sec_rounds, rem = sec.sec_rem, full = sec.full_secs, gg = g, cc = c;
    // Full section j's partial-round tiles land on line positions [a + j * rem, a + (j + 1) *
    // rem) (schedule_rule.h arc_start).
    const int64_t a = arc_start(rounds, rem, gg);
    auto on_c = [&](int64_t x) { return arc_count(x, cc, gg); };  // [0, x) on CTA c
    auto before = [&](int64_t j) { return j * rounds + on_c(a + j * rem) - on_c(a); };    // c's tiles, sections < j
    int64_t lo = 0, hi = full;  // the last j in [0, full] with before(j) <= k (before is monotone)
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo + 1) / 2;
      if (before(mid) <= k)
        lo = mid;
      else
        hi = mid - 1;
    }
    const int64_t kk = k - before(lo);
    const int64_t first = lo == full ? int64_t(last_first) : (lo * rem) % gg;  // deals section lo's first tile
    const int64_t v = (cc - first + gg) % gg;                                  // c's place in that dealing
    if (lo == full) {  // the last (short) section, or past every tile
      const int64_t lr = sec.last_rounds, lm = sec.last_rem;
      if (kk >= lr + ((lr & 1) ? (v >= gg - lm) : (v < lm))) return -1;
    }
    const int64_t pos = (kk & 1) ? gg - 1 - v : v;
    return lo * int64_t(sec.sec_tiles) + kk * gg + pos;
  }
  // Rounds of the list: every CTA's tile count under the (rotated) sectioned snake, plus one
  // of padding where each CTA stops. Unrotated, a CTA may get a partial-round tile in every
  // section; rotated, at most ceil(full_secs * sec_rem / g) of them.
  LONGATTN_HD static int64_t section_list_rounds(const FwdParams& sec, uint32_t g, bool rotate) {
    const int64_t extras = rotate ? (int64_t(sec.full_secs) * sec.sec_rem + g - 1) / g : int64_t(sec.full_secs);
    return int64_t(sec.full_secs) * sec.sec_rounds + extras + sec.last_rounds + 1 + 1;
  }
  // Split-KV: clamp a tile's key blocks [lo, hi) to its split's (the batch index b).
  LONGATTN_HD static void split_range(const FwdParams& p, int32_t b, int64_t* lo, int64_t* hi) {
    const int64_t a = int64_t(b) * p.split_blocks, e = a + p.split_blocks;
    if (*lo < a) *lo = a;
    if (*hi > e) *hi = e;
    if (*hi < *lo) *hi = *lo;
  }
  // 32-bit divisions by launch constants, as multiply-shifts (FwdParams fd_*, fast_div.h; the
  // host refuses >= 2^31 tiles).
  // Sections of `section_bh` pairs; inside a section, rank slowest, then pair (batch, head).
  // lpt: rank 0 is the last q-block (the longest causal tile); otherwise rank = q-block, and
  // with one-pair sections (the non-causal rule) q-blocks of one head run fastest. Without
  // sections (rank slowest over all heads) the CTAs running at once all read different heads
  // and K/V came from DRAM (causal 1k ran at 0.65x cuDNN).
  // kList (ragged kernels, kSectionList): entry t of the device tile list, (b, h, m_block) in
  // dealing order (tile_list.cuh); b < 0 is padding: the caller stops (its later ids are
  // padding too: the section list pads each CTA's column after its last tile).
  template <bool kList = false>
  LONGATTN_HD static TileCoord decode(const FwdParams& p, int64_t t) {
    const uint32_t nm = uint32_t(p.num_m_blocks), nh = uint32_t(p.heads_q), tt = uint32_t(t);
    TileCoord c;
    if constexpr (kList) {
      if (p.tile_list) {  // null: the padded grid below (plan.h tile_list)
#if defined(__CUDA_ARCH__)
        const int4 e = __ldg(reinterpret_cast<const int4*>(p.tile_list) + tt);  // one 16-byte load
        c.b = e.x;
        c.h = e.y;
        c.m_block = e.z;
#else
        c.b = p.tile_list[4 * size_t(tt)];
        c.h = p.tile_list[4 * size_t(tt) + 1];
        c.m_block = p.tile_list[4 * size_t(tt) + 2];
#endif
        return c;
      }
    }
    if (!p.lpt && p.section_bh == 1) {  // the non-causal rule, without the section arithmetic
      const uint32_t rest = p.fd_nm.div(tt), b = p.fd_nh.div(rest);
      c.m_block = int32_t(tt - rest * nm);
      c.h = int32_t(rest - b * nh);
      c.b = int32_t(b);
      return c;
    }
    const uint32_t nbh = nh * uint32_t(p.batch), sec_bh = uint32_t(p.section_bh);
    const uint32_t sec = p.fd_sec_tiles.div(tt), local = tt - sec * sec_bh * nm;
    const uint32_t first = sec * sec_bh;
    const bool short_last = nbh - first < sec_bh;  // the last section may be short
    const uint32_t n = short_last ? nbh - first : sec_bh;
    const uint32_t rank = (short_last ? p.fd_last_bh : p.fd_sec_bh).div(local), bh = first + local - rank * n;
    const uint32_t b = p.fd_nh.div(bh);
    c.m_block = int32_t(p.lpt ? nm - 1 - rank : rank);
    c.h = int32_t(bh - b * nh);
    c.b = int32_t(b);
    return c;
  }
};

#if defined(__CUDACC__)
// Dynamic assignment. The producer thread takes ids from p.tile_counter (when it starts a
// tile; NOTES: taking one ahead kept one more register live and the 32-register producers
// spilled) and hands each tile's id to the
// consumers through a shared-memory slot per Q buffer: it waits the buffer's q_empty, writes
// the slot, then the Q load arrives on q_full (release); a consumer that has waited q_full
// (acquire) reads the id of the tile whose Q it holds. Consumers read the slot before they
// release q_empty, so the producer never overwrites an unread id. Id -1 or a ragged list's
// padding: no more work (the producer arrives on q_full without a load; the consumers decode
// the id and stop as the producer does). Ids are tile ids in the static order
// (sections, LPT): only which CTA runs a tile changes, never its arithmetic.
template <int kQStages>
struct DynamicTiles {
  int32_t* slot;  // kQStages ids in shared memory

  __device__ static int32_t* slots() {
    __shared__ int32_t s[kQStages];
    return s;
  }
  __device__ static int32_t take(const FwdParams& p) {
    const int32_t t = atomicAdd(p.tile_counter, 1);
    return t < p.num_tiles ? t : -1;
  }
  // Producer: publish `t` for the Q buffer `stage`, after its q_empty wait. Its Q load (or,
  // at the end, a plain arrive) then completes q_full.
  // The slot is written and read with atomics: the mbarriers already order the two (release
  // arrive, acquire wait), but compute-sanitizer's racecheck does not see that ordering and
  // reported the plain store/load as a race; atomics it does not flag.
  __device__ void publish(int32_t t, int stage, uint32_t phase, uint64_t* q_empty) const {
    ptx::mbar_wait(q_empty, phase ^ 1u);
    atomicExch(&slot[stage], t);
  }
  // Consumer: the id of the tile whose Q is in buffer `stage` (-1: end). One atomic read per
  // warp, broadcast by shuffle.
  __device__ int32_t next(int stage, uint32_t phase, uint64_t* q_full) const {
    ptx::mbar_wait(q_full, phase);
    int32_t t = 0;
    if ((threadIdx.x & 31) == 0) t = atomicOr(&slot[stage], 0);
    return __shfl_sync(0xffffffffu, t, 0);
  }
};
#endif

}  // namespace longattn::cuda::sm90
