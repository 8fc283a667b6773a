// The V tail of a sequence's last key block (ragged and paged kernels).
#pragma once

#include <cstdint>

#include "cuda/ptx/sync.cuh"

namespace longattn::cuda::sm90 {

// Rows [first_row, kBlockN) of a V stage set to zero by all consumer threads (`ctid` in
// [0, 128 kWGs)), then made visible to wgmma (async proxy) and to every consumer warpgroup.
// Used on a sequence's last V tile only: TMA fetched whatever lies past the sequence's keys
// there (unused cache rows past seqused_k, the next sequence of a packed tensor, or nothing
// for boxes the paged producer skipped), and P = 0 for those keys does not cancel a NaN or
// Inf in V (0 * NaN = NaN in P.V). Whole 128-byte rows: the 128B swizzle permutes the 16-byte
// units inside a row's line and never moves a row, so the swizzle needs no care here.
// NOTES: all consumer warpgroups must call it for the same tile, outside their ping-pong
// turns (a warpgroup waiting here while holding the turn would deadlock the other).
template <class Cfg>
__device__ __forceinline__ void clear_tail_rows(uint8_t* stage, int32_t first_row, int ctid, uint32_t g_shift) {
  constexpr int kThreads = 128 * Cfg::kWGs;
  if constexpr (Cfg::kPaged) {
    if ((1u << g_shift) != uint32_t(Cfg::kBlockN)) {  // grouped V (params.h v_group_shift)
      const uint32_t g = 1u << g_shift;
      const int32_t words = (Cfg::kBlockN - first_row) * 32;
      for (int32_t u = ctid; u < words; u += kThreads) {
        const uint32_t row = uint32_t(first_row) + (uint32_t(u) >> 5);
        uint32_t* base = reinterpret_cast<uint32_t*>(stage + (row >> g_shift) * g * (Cfg::kChunksV * 128) +
                                                     (row & (g - 1)) * 128) + (u & 31);
#pragma unroll
        for (int c = 0; c < Cfg::kChunksV; ++c) base[c * g * 32] = 0u;
      }
      ptx::fence_proxy_async_smem();
      ptx::named_sync(ptx::kBarClearTail, kThreads);
      return;
    }
  }
  // NOTES: 4-byte stores of zero (STS from RZ): 16-byte stores need four zeroed registers,
  // and with them the hdim-256 ragged consumer spilled 8 bytes. At most 32 stores per thread,
  // once per tile.
  const int32_t units = (Cfg::kBlockN - first_row) * 32;  // 4-byte words per chunk
  uint32_t* rows = reinterpret_cast<uint32_t*>(stage + first_row * 128);
#pragma unroll
  for (int c = 0; c < Cfg::kChunksV; ++c)
    for (int32_t u = ctid; u < units; u += kThreads) rows[c * Cfg::kBlockN * 32 + u] = 0u;
  ptx::fence_proxy_async_smem();
  ptx::named_sync(ptx::kBarClearTail, kThreads);
}


}  // namespace longattn::cuda::sm90
