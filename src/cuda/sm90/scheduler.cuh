// Persistent tile scheduler: which (batch, head, q-block) each CTA computes, in order.
//
// Order: q-blocks of one head fastest, then heads (query heads sharing a kv head are
// adjacent, h = hk * group + g), then batch: consecutive tiles reuse the same K/V from L2.
// Causal: q-blocks longest first (LPT) so the short tiles fill the tail.
// Static round-robin over a grid of #SMs CTAs; 64-bit tile ids (no gridDim.y/z).
// Issue 6 replaces this with L2-budgeted head sections and an atomic work counter; the
// producer and consumers only use first()/next()/decode(), so that swap is local.
#pragma once

#include <cstdint>

#include "cuda/sm90/params.h"

namespace longattn::cuda::sm90 {

struct TileCoord {
  int64_t b, h, m_block;
};

struct StaticScheduler {
  __device__ static int64_t first() { return blockIdx.x; }
  __device__ static int64_t next(int64_t t) { return t + gridDim.x; }
  __device__ static TileCoord decode(const FwdParams& p, int64_t t) {
    int64_t m = t % p.num_m_blocks;
    int64_t rest = t / p.num_m_blocks;
    TileCoord c;
    c.h = rest % p.heads_q;
    c.b = rest / p.heads_q;
    c.m_block = p.causal ? p.num_m_blocks - 1 - m : m;
    return c;
  }
};

}  // namespace longattn::cuda::sm90
