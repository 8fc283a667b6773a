// The one table of tile decisions for the sm90 forward kernel: (head dim, causal) ->
// block sizes, pipeline stages, consumer warpgroups, register split. Kernels take the
// result as template parameters; nothing else in the backend picks a tile.
//
// Shared memory per CTA = q_stages x Q (kBlockM x d) + stages x (K + V) (kBlockN x d each), 16-bit
// elements, at most 227 KB. Registers per consumer thread: O (d/2) + S (kBlockN/2) +
// P (kBlockN/4) live at once in the overlapped loop.
#pragma once

namespace longattn::cuda::sm90 {

struct TileConfig {
  int block_m;        // query rows per CTA tile (64 per consumer warpgroup)
  int block_n;        // keys per K/V tile
  int stages;         // K/V ring depth
  int consumer_wgs;   // consumer warpgroups
  int producer_regs;  // setmaxnreg for the producer warpgroup
  int consumer_regs;  // setmaxnreg for each consumer warpgroup
  int q_stages = 1;   // Q buffers: 2 lets the next tile's Q land while this tile finishes
  bool lpt_sections = true;  // causal: L2-section LPT schedule (else one global LPT snake)
};

// `variant` selects a non-default tile: for measurements (LONGATTN_TILE env,
// forward_sm90.cpp) and for the short-sequence rule in default_variant(). 0 = the table's
// choice, 1 = the causal tile for a non-causal problem, 2 = a wider key tile, 3 = 128x128
// with a 3-stage K/V ring, 4 = the causal tile with one Q buffer (also for causal problems),
// 5 = hdim 256 128 x 64 with the sectioned causal schedule (also for causal problems).
// NOTES: setmaxnreg splits must fit the entry allocation: 128 * producer + 256 * consumer
// <= 168 * 384 = 64512 (else setmaxnreg.inc waits forever): 24/240, 32/232, 40/224, 56/224.
constexpr TileConfig tile_config(int head_dim, bool causal, int variant = 0) {
  if (causal && variant != 4 && variant != 5) variant = 0;
  if (variant == 1) causal = true;
  const bool d128 = head_dim > 64 && head_dim <= 128;
  if (variant == 2 && d128) return {128, 192, 2, 2, 24, 240, 1, false};
  if (variant == 3 && d128) return {128, 128, 3, 2, 32, 232};
  if (variant == 4 && d128) return {128, 128, 2, 2, 32, 232, 1};
  if (variant == 4 && head_dim <= 64) return {192, 128, 2, 3, 32, 160, 1};
  if (variant == 5 && head_dim > 128) return {128, 64, 2, 2, 40, 224};
  // Producer registers: 24 is enough for the global schedule; with the sectioned causal
  // schedule the producer spills at 24, so those configs use 32/232.
  // hdim 64: 192 x 128 with three consumer warpgroups (128*32 + 384*160 = 64K registers;
  // 40/152 spilled 48 bytes); two Q buffers (112 KB smem).
  if (head_dim <= 64) return {192, 128, 2, 3, 32, 160, 2};
  // hdim 128: 128 x 176 non-causal (208 KB smem, no room for a second Q; S 88 + P 44 + O 64
  // registers), 128 x 128 causal (finer diagonal tiles) with two Q buffers (192 KB).
  if (d128) return causal ? TileConfig{128, 128, 2, 2, 32, 232, 2} : TileConfig{128, 176, 2, 2, 32, 232};
  // hdim 256: O alone takes 128 registers; 128 x 80 (224 KB smem) at 24/240. The sectioned
  // causal schedule does not fit there (producer spills at 24 and 32 registers, consumer at
  // 232), so hdim 256 keeps the global one. The clean alternative, 128 x 64 at 40/224 with
  // sections (variant 5), ran 665 vs 759 TFLOP/s full and 463 vs 629 causal (8k, H100).
  return {128, 80, 2, 2, 24, 240, 1, false};
}

// The feature kernel's tile (sinks, softcap, windows, chunks; kernel.cuh kFeat): the causal
// tile (finer key blocks for window edges than the wide non-causal hdim-128 tile). Its
// consumer holds a little more than the dense one; NOTES: the window element mask spilled on
// hdim 64 (28 bytes) and 256 (4 bytes) until it became one unsigned compare per element
// (mask.cuh) and its arithmetic 32-bit.
constexpr TileConfig feature_tile(int head_dim) { return tile_config(head_dim, true, 0); }

// The ragged feature kernel's tile (kernel.cuh kRagged: per-sequence starts and lengths read
// per tile). NOTES: on the hdim-64 (192 x 128 at 160 registers) and hdim-256 (128 x 80 at
// 240) tiles its consumer spilled 8 / 4 bytes; these have room.
// head_dim_v != head_dim (192 / 128): 128 x 128 with one Q buffer (48 KB Q + 2 x 48 KB K +
// 2 x 32 KB V = 208 KB); registers as hdim 128 (S 64 + P 32 + O 64).
constexpr TileConfig ragged_tile(int head_dim, int head_dim_v = 0) {
  if (head_dim_v > 0 && head_dim_v != head_dim) return {128, 128, 2, 2, 32, 232, 1};
  if (head_dim <= 64) return {128, 128, 2, 2, 32, 232, 2};
  if (head_dim <= 128) return tile_config(head_dim, true, 0);
  return {128, 64, 2, 2, 24, 240, 1, false};
}

// The paged kernel's tile (kernel.cuh kPaged: the producer resolves each K/V tile's page):
// the ragged tile with 24 more producer registers where it had 32 (consumers 232 -> 224;
// 128 x 56 + 256 x 224 = 64512, the whole file). NOTES: at 32 its producer spilled 4 bytes
// (after the page lookup was cut to a shift and a 32-bit offset); 40 held the one-thread TMA
// path; the cp.async gather / lanes team (mainloop.cuh team_load) spilled 120 bytes at 40,
// none at 56. hdim 256 (24 / 240) keeps its split: its consumer spilled 52 bytes at 224, so
// that kernel has no team path (paged_team_ok) and runs every page size on TMA boxes.
constexpr TileConfig paged_tile(int head_dim, int head_dim_v = 0) {
  TileConfig t = ragged_tile(head_dim, head_dim_v);
  if (t.producer_regs == 32) {
    t.producer_regs = 56;
    t.consumer_regs = 224;
  }
  return t;
}

// Whether a paged kernel compiles the producer-team modes (page_math.h PagedMode lanes /
// gather): they need the 56-register producer.
constexpr bool paged_team_ok(const TileConfig& t) { return t.producer_regs >= 56; }

// The variant the table picks for a problem: short non-causal hdim-128 problems run the
// 128 x 128 tile (measured on H200, interleaved: seq 1k 546 vs 525 TFLOP/s for 128 x 176,
// 2k 587 vs 577), 4k..16k keys the 128 x 192 tile (H100, 2026-11-25, interleaved, vs 128 x
// 176: 16 heads 4k 602 vs 593, 8k 635 vs 623, 16k 643 vs 630; 32 / 8 heads 8k 639 vs 622,
// 16k 645 vs 629), longer ones 128 x 176 (the 128 x 192 tile loses there: 32 / 8 heads 64k
// 642 vs 653, 128k 603 vs 632; both run the same non-causal order, q-blocks of one head
// fastest, so the cause is not the tile order; not profiled).
constexpr int default_variant(int head_dim, bool causal, long long seq_k) {
  if (causal || head_dim <= 64 || head_dim > 128) return 0;
  return seq_k <= 2048 ? 1 : seq_k <= 16384 ? 2 : 0;
}

constexpr bool operator==(const TileConfig& a, const TileConfig& b) {
  return a.block_m == b.block_m && a.block_n == b.block_n && a.stages == b.stages &&
         a.consumer_wgs == b.consumer_wgs && a.producer_regs == b.producer_regs &&
         a.consumer_regs == b.consumer_regs && a.q_stages == b.q_stages &&
         a.lpt_sections == b.lpt_sections;
}

}  // namespace longattn::cuda::sm90
