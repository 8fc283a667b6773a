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

constexpr TileConfig tile_config(int head_dim, bool causal) {
  // Producer registers: 24 spilled once the producer decoded tiles with 64-bit math; 40
  // (32 with three consumers) does not.
  // hdim 64: 192 x 128 with three consumer warpgroups (128*32 + 384*160 = 64K registers;
  // 40/152 spilled 48 bytes).
  if (head_dim <= 64) return {192, 128, 2, 3, 32, 160};
  // hdim 128: 128 x 176 non-causal (208 KB smem; S 88 + P 44 + O 64 registers), 128 x 128
  // causal (finer diagonal tiles).
  if (head_dim <= 128) return causal ? TileConfig{128, 128, 2, 2, 40, 232} : TileConfig{128, 176, 2, 2, 40, 232};
  // hdim 256: O alone takes 128 registers; 128 x 80 keeps smem at 224 KB.
  return {128, 80, 2, 2, 40, 232};
}

constexpr int smem_bytes(int head_dim, const TileConfig& c) {
  return (c.block_m + 2 * c.stages * c.block_n) * head_dim * 2 + 1024 /*align*/ + 256 /*barriers*/;
}

}  // namespace longattn::cuda::sm90
