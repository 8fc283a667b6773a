// Masking for the sm90 kernel: which key blocks a q-tile visits, which of those need an
// element mask, and the element mask itself (key tails and the causal diagonal).
// Causal alignment is resolved on the host into `causal_offset` (bottom-right: seq_k -
// seq_q; top-left: 0), the key position of query 0. Windows / chunks (issue 5) add a
// lower bound n_lo here and one more predicate in apply().
#pragma once

#include <cstdint>

#include "cuda/sm90/params.h"

namespace longattn::cuda::sm90 {

template <int kBlockM, int kBlockN>
struct TileMask {
  int64_t seq_k, offset;
  int64_t m0;  // first query row of the tile
  bool causal;

  __device__ TileMask(const FwdParams& p, int64_t m_block)
      : seq_k(p.seq_k), offset(p.causal_offset), m0(m_block * kBlockM), causal(p.causal) {}

  // Key blocks [lo, hi) with any visible key for rows [m0, min(m0 + kBlockM, seq_q)).
  __device__ void block_range(int64_t seq_q, int64_t* lo, int64_t* hi) const {
    int64_t key_end = seq_k;
    if (causal) {
      int64_t last_row = (m0 + kBlockM < seq_q ? m0 + kBlockM : seq_q) - 1;
      int64_t e = last_row + offset + 1;
      if (e < key_end) key_end = e;
    }
    *lo = 0;
    *hi = key_end <= 0 ? 0 : (key_end + kBlockN - 1) / kBlockN;
  }

  // Does key block n need the element mask (some element of it invisible to some row)?
  __device__ bool needs_mask(int64_t n_block) const {
    int64_t n0 = n_block * kBlockN;
    if (n0 + kBlockN > seq_k) return true;
    return causal && n0 + kBlockN - 1 > m0 + offset;
  }

  // needs_mask(j) is monotone in j: it holds exactly for j >= this block (computed once per
  // tile so the loop tests one integer).
  __device__ int64_t first_masked_block() const {
    int64_t j = seq_k / kBlockN;  // the block holding the key tail (or one past the end)
    if (causal) {
      const int64_t x = m0 + offset - kBlockN + 1;  // blocks ending past the first row's diagonal
      const int64_t jc = (x >= 0 ? x / kBlockN : -((-x + kBlockN - 1) / kBlockN)) + 1;
      if (jc < j) j = jc;
    }
    return j;
  }

  // Set invisible elements of the S accumulator fragment (64 x kBlockN per warpgroup) to
  // -inf. `row0` is this thread's first row within the tile (the second is row0 + 8).
  template <int NS>
  __device__ void apply(float (&s)[NS], int64_t n_block, int row0, int lane) const {
    int64_t n0 = n_block * kBlockN;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      int64_t row = m0 + row0 + 8 * half;
      int64_t lim = seq_k;  // exclusive key limit for this row
      if (causal && row + offset + 1 < lim) lim = row + offset + 1;
      int64_t rel = lim - n0;  // columns [rel, kBlockN) are masked
      int limit = rel < 0 ? 0 : (rel > kBlockN ? kBlockN : int(rel));
#pragma unroll
      for (int c = 0; c < NS / 4; ++c) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          int col = 8 * c + 2 * (lane % 4) + e;
          if (col >= limit) s[4 * c + 2 * half + e] = -INFINITY;
        }
      }
    }
  }
};

}  // namespace longattn::cuda::sm90
