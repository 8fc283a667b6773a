// Masking for the sm90 kernel: which key blocks a q-tile visits, which of those need an
// element mask, and the element mask itself (key tails and the causal diagonal).
// Causal alignment is resolved on the host into `causal_offset` (bottom-right: seq_k -
// seq_q; top-left: 0), the key position of query 0 (windows and chunks use the same one).
// kWindow (the feature kernels only) adds sliding windows and chunks, alone or together
// (their intersection): the visited blocks get a lower bound, and a block needs the element
// mask when it lies outside the keys every row of the tile sees. The dense kernels (kWindow
// false) compile none of it (kCp: one compare per tile, below).
// kPack (with kWindow; pack_gqa.h): a tile of kBlockM packed rows holds kBlockM / g query
// positions x the g query heads of one kv head, row r at position m0 + r / g; the bounds and
// the element mask use the row's position, never its index.
#pragma once

#include <cmath>
#include <cstdint>

#include "cuda/sm90/params.h"

// Host and device (the host tests check the bounds and the element mask against
// mask_rule.h); on the device exactly the plain __device__ functions they were.
#if defined(__CUDACC__)
#define LONGATTN_MASK_FN __host__ __device__ inline
#else
#define LONGATTN_MASK_FN inline
#endif

namespace longattn::cuda::sm90 {

// One sequence of a (possibly ragged) batch: first q row / key row in the tensors' token
// dimension and the lengths (seqused_q / seqused_k applied). Dense: 0, seq_q, 0, seq_k.
// Every per-sequence extent the kernels use comes from here: the visited key blocks and the
// masks' alignment (TileMask), the live q-blocks (tile_list.cuh), the stored rows (the
// epilogue's row limit), so seqused_q needs nothing else.
struct SeqCoord {
  int32_t q0, q_len, k0, k_len;
};

LONGATTN_MASK_FN SeqCoord seq_coord(const FwdParams& p, int32_t b) {
  SeqCoord s{0, int32_t(p.seq_q), 0, int32_t(p.seq_k)};
  if (p.cu_seqlens_q) {
    s.q0 = p.cu_seqlens_q[b];
    s.q_len = p.cu_seqlens_q[b + 1] - s.q0;
  }
  if (p.cu_seqlens_k) {
    s.k0 = p.cu_seqlens_k[b];
    s.k_len = p.cu_seqlens_k[b + 1] - s.k0;
  }
  if (p.seqused_k) s.k_len = p.seqused_k[b];
  if (p.seqused_q) s.q_len = p.seqused_q[b];
  return s;
}

// kCp: zigzag context parallelism compiled in (params.h cp_q_split / cp_q_shift: the rank's
// second chunk of query rows sits further along the sequence).
template <int kBlockM, int kBlockN, bool kWindow = false, bool kPack = false, bool kCp = false>
struct TileMask {
  static_assert(kWindow || !kPack, "packed GQA tiles run the feature kernels only");
  int64_t seq_k, offset;
  int64_t m0;  // first query row (kPack: query position) of the tile
  bool causal;
  int32_t pshift = 0;  // kPack: log2 of the group (rows per query position)
  // kWindow only. 32-bit: the host sends the feature kernel only problems with
  // 2 (seq_q + seq_k) < 2^31 and clamps windows and chunks to seq_q + seq_k, so positions,
  // bounds and their sums fit (the producer runs on 24-32 registers).
  int32_t wl = -1, wr = -1, chunk = 0, chunk_bias = 0;
  int32_t pos0 = 0, sk = 0;  // kWindow: key position of the tile's first row; key count

  LONGATTN_MASK_FN TileMask(const FwdParams& p, int64_t m_block)
      : seq_k(p.seq_k),
        offset(p.causal_offset + (kCp && m_block * kBlockM >= p.cp_q_split ? p.cp_q_shift : 0)),
        m0(m_block * kBlockM),
        causal(p.causal) {
    if constexpr (kPack) {
      pshift = p.pack_shift;
      m0 = m_block * (kBlockM >> pshift);
    }
    if constexpr (kWindow) {
      wl = int32_t(p.window_left);
      wr = int32_t(p.window_right);
      chunk = p.chunk;
      chunk_bias = p.chunk_bias;
      pos0 = int32_t(m0 + offset);
      sk = int32_t(seq_k);
    }
  }

  // kWindow: one sequence of a ragged batch (its key count and alignment offset).
  LONGATTN_MASK_FN TileMask(const FwdParams& p, int64_t m_block, const SeqCoord& sc)
      : TileMask(p, m_block) {
    seq_k = sc.k_len;
    if (p.offset_per_seq) offset = int64_t(sc.k_len) - sc.q_len;
    pos0 = int32_t(m0 + offset);
    sk = sc.k_len;
  }

  // kWindow: keys [lo, hi) visible to key position `pos` (mask_rule.h visible_range, without
  // the final clamp: hi < lo means none). Causal, window and chunk each allow one interval of
  // keys, so together (chunk with a window included) they allow one interval: the largest
  // lower bound and the smallest upper bound, in any order. Every bound (pos - wl, the chunk
  // start c0(pos); pos + 1, pos + wr + 1, c0(pos) + chunk, sk) is non-decreasing in pos, and
  // so are their max and min: lo and hi are non-decreasing in pos, so a tile's first and last
  // rows bound every row between them (block_range, unmasked_blocks).
  LONGATTN_MASK_FN void row_limits(int32_t pos, int32_t* lo, int32_t* hi) const {
    int32_t l = 0, h = sk;
    if (causal && pos + 1 < h) h = pos + 1;
    if (wl >= 0 && pos - wl > l) l = pos - wl;
    if (wr >= 0 && pos + wr + 1 < h) h = pos + wr + 1;
    if (chunk > 0) {
      // floor(pos / chunk) chunk, through an unsigned division of the biased position (its
      // true value < 3 x 2^30: exact in uint32; the result fits int32).
      const uint32_t ub = uint32_t(pos) + uint32_t(chunk_bias);
      const int32_t c0 = int32_t(ub / uint32_t(chunk) * uint32_t(chunk) - uint32_t(chunk_bias));
      if (c0 > l) l = c0;
      if (c0 + chunk < h) h = c0 + chunk;
    }
    *lo = l;
    *hi = h;
  }

  // First and last key positions of the tile's rows that exist (kWindow).
  LONGATTN_MASK_FN int32_t first_pos() const { return pos0; }
  LONGATTN_MASK_FN int32_t last_pos(int64_t seq_q) const {
    if constexpr (kPack) {
      const int64_t end = m0 + positions();
      return int32_t((end < seq_q ? end : seq_q) - 1 + offset);
    }
    return int32_t((m0 + kBlockM < seq_q ? m0 + kBlockM : seq_q) - 1 + offset);
  }
  // Query positions per tile, and the position offset of tile row r (kPack: r / g).
  LONGATTN_MASK_FN int64_t positions() const { return kPack ? int64_t(kBlockM >> pshift) : int64_t(kBlockM); }
  LONGATTN_MASK_FN int32_t row_pos(int32_t r) const { return kPack ? (r >> pshift) : r; }

  // Key blocks [lo, hi) with any visible key for rows [m0, min(m0 + kBlockM, seq_q)).
  // kWindow: every row's keys lie in [lf, hl) (monotone bounds, row_limits); hl <= lf means
  // every row's interval is empty. Blocks of the range may hold no key some row sees (a tile
  // across two chunks): the element mask covers them (unmasked_blocks).
  LONGATTN_MASK_FN void block_range(int64_t seq_q, int64_t* lo, int64_t* hi) const {
    if constexpr (kWindow) {
      int32_t lf, hf, ll, hl;
      row_limits(first_pos(), &lf, &hf);
      row_limits(last_pos(seq_q), &ll, &hl);
      if (hl <= lf) {
        *lo = *hi = 0;
      } else {
        *lo = lf / kBlockN;
        *hi = (hl + kBlockN - 1) / kBlockN;
      }
    } else {
      block_range_dense(seq_q, lo, hi);
    }
  }

  LONGATTN_MASK_FN void block_range_dense(int64_t seq_q, int64_t* lo, int64_t* hi) const {
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
  LONGATTN_MASK_FN bool needs_mask(int64_t n_block) const {
    int64_t n0 = n_block * kBlockN;
    if (n0 + kBlockN > seq_k) return true;
    return causal && n0 + kBlockN - 1 > m0 + offset;
  }

  // needs_mask(j) is monotone in j: it holds exactly for j >= this block (computed once per
  // tile so the loop tests one integer).
  LONGATTN_MASK_FN int64_t first_masked_block() const {
    int64_t j = seq_k / kBlockN;  // the block holding the key tail (or one past the end)
    if (causal) {
      const int64_t x = m0 + offset - kBlockN + 1;  // blocks ending past the first row's diagonal
      const int64_t jc = (x >= 0 ? x / kBlockN : -((-x + kBlockN - 1) / kBlockN)) + 1;
      if (jc < j) j = jc;
    }
    return j;
  }

  // kWindow: blocks [*ja, *jb) hold only keys every row of the tile sees (between the last
  // row's lower bound and the first row's upper bound); every other visited block needs the
  // element mask (ja >= jb: all of them).
  LONGATTN_MASK_FN void unmasked_blocks(int64_t seq_q, int64_t* ja, int64_t* jb) const {
    int32_t lf, hf, ll, hl;
    row_limits(first_pos(), &lf, &hf);
    row_limits(last_pos(seq_q), &ll, &hl);
    *ja = (ll + kBlockN - 1) / kBlockN;  // ll >= 0
    *jb = hf <= 0 ? 0 : hf / kBlockN;
  }

  // Set invisible elements of the S accumulator fragment (64 x kBlockN per warpgroup) to
  // -inf. `row0` is this thread's first row within the tile (the second is row0 + 8).
  template <int NS>
  LONGATTN_MASK_FN void apply(float (&s)[NS], int64_t n_block, int row0, int lane) const {
    if constexpr (kWindow) {
      const int64_t n0 = n_block * kBlockN;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        int32_t l, h;
        if constexpr (kPack) {
          row_limits(first_pos() + row_pos(row0 + 8 * half), &l, &h);
        } else {
          row_limits(first_pos() + row0 + 8 * half, &l, &h);
        }
        const int32_t rl = l - int32_t(n0), rh = h - int32_t(n0);  // visible columns [rl, rh)
        // Visible columns [lo_c, lo_c + width): one unsigned compare per element.
        const int lo_c = rl < 0 ? 0 : (rl > kBlockN ? kBlockN : rl);
        const int hi_c = rh < 0 ? 0 : (rh > kBlockN ? kBlockN : rh);
        const uint32_t width = hi_c > lo_c ? uint32_t(hi_c - lo_c) : 0u;
        const int base = 2 * (lane % 4) - lo_c;
#pragma unroll
        for (int c = 0; c < NS / 4; ++c) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            if (uint32_t(8 * c + e + base) >= width) s[4 * c + 2 * half + e] = -INFINITY;
          }
        }
      }
    } else {
      int32_t lim[2];
      dense_limits(n_block, row0, lane, lim);
      apply_limits(s, lim);
    }
  }

  // The dense element mask in two parts: the limits, then the compares. lim[half]: the first
  // masked column of the thread's row row0 + 8 half, minus the thread's first column
  // 2 (lane % 4), so that apply_limits compares each element's column offset 8 c + e (a
  // compile-time constant) with it: one compare with an immediate per element; no clamp (a
  // limit at or below 0 masks every column, one at or past kBlockN none). The block-relative
  // terms are warp-uniform and the per-thread part is 32-bit: forward_sm90.cpp refuses
  // seq_q + seq_k > 2^31 - 1024, and every term (the key tail minus the block's first key,
  // in [1, seq_k] on a visited block; the causal limit of row m0 minus it, within about
  // seq_q + seq_k + 192 either way, the anchor shift and the zigzag chunk included; plus row0
  // + 8 half < 192) fits in int32.
  LONGATTN_MASK_FN void dense_limits(int64_t n_block, int row0, int lane, int32_t (&lim)[2]) const {
    const int64_t n0 = n_block * kBlockN;
    const int32_t kl = int32_t(seq_k - n0);            // the key tail, relative to the block
    const int32_t dl = int32_t(m0 + offset + 1 - n0);  // row m0's causal limit, relative
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      int32_t l = kl;
      if (causal && dl + row0 + 8 * half < kl) l = dl + row0 + 8 * half;
      lim[half] = l - 2 * (lane % 4);
    }
  }

  template <int NS>
  LONGATTN_MASK_FN static void apply_limits(float (&s)[NS], const int32_t (&lim)[2]) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
#pragma unroll
      for (int c = 0; c < NS / 4; ++c) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          if (8 * c + e >= lim[half]) s[4 * c + 2 * half + e] = -INFINITY;
        }
      }
    }
  }
};

}  // namespace longattn::cuda::sm90
