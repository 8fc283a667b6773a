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
// (forward_sm90.cpp packed_q_map). Masks use the row's position (mask.cuh kPack), sinks and
// LSE the row's head, the epilogue scatters rows back to (position, head) (epilogue.cuh).
//
// When (pack_gqa_worth): g a power of two (shifts, not divisions, in the kernel; g = 3, 5, 6,
// 7 groups stay unpacked), 2 <= g <= kBlockM (at least one position per tile; the box's
// g <= 256 follows), equal q / v head dims (192 / 128 runs its own kernel, unpacked), and
// the tiles' fill improves by more than 10%: fill(n) = n / (kBlockM ceil(n / kBlockM)) is
// the useful fraction of the tiles holding n rows; pack when fill(seq_q) < 0.9 fill(seq_q g).
// seq_q 16, g 4: 0.125 -> 0.5 (pack); seq_q 64, g 4: 0.5 -> 1 (pack); seq_q 100, g 4:
// 0.78 -> 0.78 (no: the same tiles, only reshuffled); seq_q 128 (any multiple of 128:
// tiles already full): never; seq_q 129, g 4: 0.50 -> 0.81 (pack).
// Not where the unpacked call would split the keys (split-KV, schedule_rule.h kv_splits: a
// dense batch-1 call with too few tiles for the SMs): the feature kernels do not split, and
// 1/g of the tiles with no split would leave most SMs idle.
// LONGATTN_PACK_GQA=0 / 1 (forward_sm90.cpp) forces it off / on (on: wherever eligible).
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

// The rule (see the top of the file). seq_q: the longest sequence's queries; splits: the
// key splits the unpacked call would run (1: none).
inline bool pack_gqa_worth(int64_t group, int block_m, int64_t seq_q, bool same_dims, int64_t splits) {
  if (!same_dims || splits > 1 || seq_q <= 0 || pack_gqa_shift(group, block_m) == 0) return false;
  return tile_fill(seq_q, block_m) < 0.9 * tile_fill(seq_q * group, block_m);
}

// Packed row r of tile m_block (kv head hk): its query position and head. The kernel inlines
// the same shifts (mask.cuh row_pos, epilogue.cuh store_o_packed); the host tests check that
// the map covers every (position, head) of the group exactly once.
struct PackedRow {
  int64_t pos;
  int64_t head;
};
inline PackedRow packed_row(int64_t m_block, int64_t hk, int r, int shift, int block_m) {
  return {m_block * (block_m >> shift) + (r >> shift), (hk << shift) + (r & ((1 << shift) - 1))};
}

}  // namespace longattn::cuda::sm90
