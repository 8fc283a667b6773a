// The one table of tile decisions for the sm90 forward kernel: (head dim, causal) ->
// block sizes, pipeline stages, consumer warpgroups, register split. Kernels take the
// result as template parameters; nothing else in the backend picks a tile.
//
// Shared memory per CTA = Q (kBlockM x d) + stages x (K + V) (kBlockN x d each), 16-bit
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
};

// `variant` exists for measurements only (LONGATTN_TILE env, forward_sm90.cpp) and applies
// to non-causal problems: 0 = the table's choice, 1 = the causal tile, 2 = a wider key
// tile, 3 = the causal tile with a 3-stage K/V ring.
constexpr TileConfig tile_config(int head_dim, bool causal, int variant = 0) {
  if (causal) variant = 0;
  if (variant == 1) causal = true;
  if (variant == 2 && head_dim > 64 && head_dim <= 128) return {128, 192, 2, 2, 24, 240};
  if (variant == 3 && head_dim > 64 && head_dim <= 128) return {128, 128, 3, 2, 24, 240};
  // Producer registers: 24 spilled once the producer decoded tiles with 64-bit math; 40
  // (32 with three consumers) does not.
  // hdim 64: 192 x 128 with three consumer warpgroups (128*32 + 384*160 = 64K registers;
  // 40/152 spilled 48 bytes).
  if (head_dim <= 64) return {192, 128, 2, 3, 32, 160};
  // hdim 128: 128 x 176 non-causal (208 KB smem; S 88 + P 44 + O 64 registers), 128 x 128
  // causal (finer diagonal tiles).
  if (head_dim <= 128) return causal ? TileConfig{128, 128, 2, 2, 24, 240} : TileConfig{128, 176, 2, 2, 24, 240};
  // hdim 256: O alone takes 128 registers; 128 x 80 keeps smem at 224 KB.
  return {128, 80, 2, 2, 24, 240};
}

constexpr bool operator==(const TileConfig& a, const TileConfig& b) {
  return a.block_m == b.block_m && a.block_n == b.block_n && a.stages == b.stages &&
         a.consumer_wgs == b.consumer_wgs && a.producer_regs == b.producer_regs &&
         a.consumer_regs == b.consumer_regs;
}

}  // namespace longattn::cuda::sm90
