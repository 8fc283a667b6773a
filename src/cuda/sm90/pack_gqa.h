// Packed GQA (issue 5, "small seq_q with GQA"): the rule that chooses it and the row map.
//
// Unpacked, a q tile of kBlockM rows holds query positions of ONE query head, so with
// seq_q = 16 a 128-row tile is 1/8 useful and each kv head's K/V is read g = heads_q /
// heads_kv times (once per query head of the group). Packed, a tile holds rows of the g query
// heads that share one kv head: row r of tile m_block is
//   query position  m_block * (kBlockM / g) + r / g,   query head  hk * g + r % g,
// so every row of the tile shares every K/V tile, and a tile is full once seq_q * g >= kBlockM.
// Q[b, t, hk g .. hk g + g - 1, :] are adjacent in the (batch, seq, heads, dim) layout, so the
// tile's Q is one TMA box (64 columns, g heads, kBlockM / g positions) per 64-column chunk
// (launch_args.cpp, tensor_map.h pack_group). Masks use the row's position (mask.cuh kPack), sinks and
// LSE the row's head, the epilogue scatters rows back to (position, head) (epilogue.cuh).
//
// When (pack_gqa_worth): g a power of two (shifts, not divisions, in the kernel; g = 3, 5, 6,
// 7 groups stay unpacked), 2 <= g <= kBlockM (at least one position per tile; the box's
// g <= 256 follows), equal q / v head dims (192 / 128 runs its own kernel, unpacked), and
//  1. the tiles' fill improves by more than 10%: fill(n) = n / (kBlockM ceil(n / kBlockM)) is
//     the useful fraction of the tiles holding n rows; fill(seq_q) < 0.9 fill(seq_q g).
//     seq_q 16, g 4: 0.125 -> 0.5; seq_q 64, g 4: 0.5 -> 1; seq_q 100, g 4: 0.78 -> 0.78 (no:
//     the same tiles, only reshuffled); any multiple of 128 (tiles already full): no;
//     seq_q 129, g 4: 0.50 -> 0.81.
//  2. it cuts the waves of tiles over the SMs: ceil(packed tiles / SMs) < ceil(unpacked tiles
//     / SMs). A tile costs the same packed or not (all kBlockM rows go through the tensor
//     cores, useful or not), so with the same number of waves the call takes as long, only
//     on fewer SMs (batch 4 x 32 query heads x seq_q 16: 128 unpacked tiles, 32 packed, both
//     one wave on 132 SMs); batch 16: 512 unpacked tiles (4 waves) vs 128 (1 wave).
//  3. the unpacked call would not split the keys (split-KV, schedule_rule.h kv_splits: dense
//     batch-1 calls with too few tiles for the SMs): the feature kernels do not split, and
//     1/g of the tiles unsplit would leave most SMs idle.
// Rule 2 is a model, not a measurement yet: STAGES=gbench (bench.py --gqa) times packed,
// unpacked and the rule's choice side by side.
// Overrides::pack_gqa (plan.cpp) forces it off / on (on: wherever eligible).
#pragma once

#include <cstdint>

namespace longattn::cuda::sm90 {

// log2(g) if g can be packed into tiles of block_m rows, else 0.
inline int pack_gqa_shift(int64_t group, int block_m) {
  if (group < 2 || group > block_m || (group & (group - 1)) != 0) return 0;
  int s = 0;
  while ((int64_t(1) << s) < group) ++s;
  return s;
}

// Useful fraction of the block_m-row tiles that hold n rows (n > 0).
inline double tile_fill(int64_t n, int block_m) {
  const int64_t tiles = (n + block_m - 1) / block_m;
  return tiles > 0 ? double(n) / double(tiles * block_m) : 1.0;
}

// One call as the rule sees it. seq_q: the longest sequence's queries; block_m: the packed
// kernel's tile rows; unpacked_block_m: the tile rows of the kernel that would run unpacked;
// splits: the key splits the unpacked call would run (1: none); sms: the SMs (the grid).
struct PackQuery {
  int64_t group = 1, seq_q = 0, batch = 1, heads_q = 1;
  int block_m = 128, unpacked_block_m = 128;
  bool same_dims = true;
  int64_t splits = 1, sms = 132;
};

// The rule (see the top of the file).
inline bool pack_gqa_worth(const PackQuery& c) {
  if (!c.same_dims || c.splits > 1 || c.seq_q <= 0 || pack_gqa_shift(c.group, c.block_m) == 0) return false;
  if (!(tile_fill(c.seq_q, c.block_m) < 0.9 * tile_fill(c.seq_q * c.group, c.block_m))) return false;
  const int64_t per = c.block_m / c.group, sms = c.sms > 0 ? c.sms : 1;
  const int64_t unpacked = c.batch * c.heads_q * ((c.seq_q + c.unpacked_block_m - 1) / c.unpacked_block_m);
  const int64_t packed = c.batch * (c.heads_q / c.group) * ((c.seq_q + per - 1) / per);
  return (packed + sms - 1) / sms < (unpacked + sms - 1) / sms;
}

// Packed row r of tile m_block (kv head hk): its query position and head. The kernel inlines
// the same shifts (mask.cuh row_pos, epilogue.cuh store_packed); the host tests check that
// the map covers every (position, head) of the group exactly once.
struct PackedRow {
  int64_t pos;
  int64_t head;
};
inline PackedRow packed_row(int64_t m_block, int64_t hk, int r, int shift, int block_m) {
  return {m_block * (block_m >> shift) + (r >> shift), (hk << shift) + (r & ((1 << shift) - 1))};
}

}  // namespace longattn::cuda::sm90
