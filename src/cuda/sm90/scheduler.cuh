// Persistent tile scheduler: which (batch, head, q-block) each CTA computes, in order.
//
// Order: q-blocks of one head fastest, then heads (query heads sharing a kv head are
// adjacent, h = hk * group + g), then batch: consecutive tiles reuse the same K/V from L2.
// Causal: q-blocks longest first (LPT) so the short tiles fill the tail.
// Persistent grid of #SMs CTAs (no gridDim.y/z); producer and consumers of a CTA walk the
// same deterministic tile sequence, so no tile ids cross between them.
// NOTES: a dynamic version (atomic counter in the producer, ids handed to the consumers
// through a shared-memory slot) made ptxas spill the hdim-256 consumer (156 bytes at 232
// registers), so it waits for issue 6, which adds L2-budgeted head sections here too; the
// kernel only sees tile_id()/decode().
#pragma once

#include <cstdint>

#include "cuda/sm90/params.h"

namespace longattn::cuda::sm90 {

// 32-bit: these are TMA coordinates (int32 in hardware); the host refuses problems with 2^31
// tiles or more. Element offsets built from them are 64-bit.
struct TileCoord {
  int32_t b, h, m_block;
};

struct TileScheduler {
  // The k-th tile (k = 0, 1, ...) of this CTA, or -1 when it has no more work.
  // Causal: tiles are sorted by cost (longest first, LPT) and dealt in snake order (rounds
  // alternate direction over the CTAs), which balances the per-CTA sums: plain round-robin
  // over the LPT order gave some CTAs 1.6x the mean work (causal seq 16k: 434 TFLOP/s, 0.70x
  // cuDNN, on H200).
  __device__ static int64_t tile_id(const FwdParams& p, int64_t k) {
    const int64_t g = gridDim.x, c = blockIdx.x;
    const int64_t t = k * g + ((p.causal && (k & 1)) ? g - 1 - c : c);
    return t < p.num_tiles ? t : -1;
  }
  // 32-bit divisions (cheap in registers; the host refuses >= 2^31 tiles).
  // Non-causal: q-blocks of one head fastest (K/V reuse from L2), query heads of one kv head
  // adjacent. Causal: (batch, head) pairs are cut into sections of `section_bh` pairs whose
  // K+V fit half the L2; inside a section, cost rank (q-block, from the last) slowest, then
  // (batch, head). Without sections (rank slowest over all heads) the CTAs running at once
  // all read different heads and K/V came from DRAM: causal 1k on H100 ran at 251 TFLOP/s
  // (0.65x cuDNN).
  __device__ static TileCoord decode(const FwdParams& p, int64_t t) {
    const uint32_t nm = uint32_t(p.num_m_blocks), nh = uint32_t(p.heads_q), tt = uint32_t(t);
    TileCoord c;
    if (p.causal) {
      const uint32_t nbh = nh * uint32_t(p.batch), sec_bh = uint32_t(p.section_bh);
      const uint32_t sec = tt / (sec_bh * nm), local = tt - sec * sec_bh * nm;
      const uint32_t first = sec * sec_bh;
      const uint32_t n = nbh - first < sec_bh ? nbh - first : sec_bh;  // last section may be short
      const uint32_t rank = local / n, bh = first + local % n;
      c.m_block = int32_t(nm - 1 - rank);
      c.h = int32_t(bh % nh);
      c.b = int32_t(bh / nh);
    } else {
      const uint32_t m = tt % nm, rest = tt / nm;
      c.m_block = int32_t(m);
      c.h = int32_t(rest % nh);
      c.b = int32_t(rest / nh);
    }
    return c;
  }
};

}  // namespace longattn::cuda::sm90
