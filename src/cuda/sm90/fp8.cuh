// The fp8 (e4m3) kernels' two extra pieces: P as the A operand of an fp8 wgmma, and V
// transposed in shared memory (an fp8 wgmma reads its B operand K-major only, and P V
// contracts over the keys, which are V's rows).
//
// The key permutation. The S accumulator of one thread holds, per 16 keys, columns
// {2t, 2t+1, 8+2t, 9+2t} of its rows (t = lane % 4); an fp8 k32 A fragment wants columns
// {4t .. 4t+3} (wgmma.cuh). Instead of moving P between threads, P's column c of every
// 16-key group is taken to be key pi(c) = 8 (i / 2) + 2 t + i % 2 (c = 4 t + i), and the
// transposer writes key pi(c) of V to column c of Vt. P V sums over the keys, so any
// permutation applied to both P's columns and Vt's columns leaves O unchanged.
#pragma once

#include <cstdint>

#include "cuda/ptx/ldst_matrix.cuh"
#include "cuda/ptx/smem_desc.cuh"
#include "cuda/ptx/wgmma.cuh"

namespace longattn::cuda::sm90 {

// S (fp32 accumulator of a 64 x kBlockN block) -> P as e4m3 A fragments, kBlockN / 32 k32 steps
// of 4 registers each (see the key permutation above): no shuffles, two cvt per register.
template <int NS>
__device__ __forceinline__ void acc_to_a_frag_fp8(const float (&s)[NS], uint32_t (&p)[NS / 4]) {
#pragma unroll
  for (int kk = 0; kk < NS / 16; ++kk) {
    const float* x = s + 16 * kk;
    p[4 * kk + 0] = ptx::pack4_e4m3(x[0], x[1], x[4], x[5]);
    p[4 * kk + 1] = ptx::pack4_e4m3(x[2], x[3], x[6], x[7]);
    p[4 * kk + 2] = ptx::pack4_e4m3(x[8], x[9], x[12], x[13]);
    p[4 * kk + 3] = ptx::pack4_e4m3(x[10], x[11], x[14], x[15]);
  }
}

// V stage (TMA layout: [128-byte column chunk][kBlockN key rows][128 B], 128B swizzle) ->
// Vt stage ([128-key chunk][kHeadDimV rows][128 B], 128B swizzle, keys permuted by pi), by
// the `kWarps` transposer warps (warp index w). Keys at or past `n_valid` become zeros (a
// sequence's last tile: what TMA fetched past its keys may be NaN, and 0 x NaN is NaN).
//
// Work item (kc, g, up): keys 16 g .. 16 g + 15 of key chunk kc by V bytes (columns)
// 32 up .. 32 up + 31, i.e. Vt rows d = 32 up .. 32 up + 31 at key columns 16 g .. 16 g + 15.
// One ldmatrix.x4.trans reads the four 8 x 16-byte pieces (keys lo / hi 8) x (column units
// u = 2 up, 2 up + 1); treated as 16-bit elements, lane (q = lane / 4, t = lane % 4) gets per
// piece the bytes V[2t][2q], V[2t][2q + 1], V[2t + 1][2q], V[2t + 1][2q + 1] (keys relative
// to the piece, columns to the unit). The Vt word of row 16 u + 2 q at key column 16 g + 4 t
// holds keys {2t, 2t + 1, 8 + 2t, 9 + 2t} (pi): bytes 0, 2 of the lo piece and 0, 2 of the hi
// piece (PRMT 0x6420); row 16 u + 2 q + 1 takes bytes 1, 3 (0x7531). One stmatrix.x4 writes
// them: its matrix X of unit u takes row 16 u + 2 r (r < 4) or 16 u + 2 r + 1 (r >= 4) as row r,
// Y the other parity, so a matrix's 8 rows cover 8 distinct values of d % 8 and its stores
// hit 8 distinct 16-byte swizzle units (no bank conflict; the loads' 8 key rows likewise).
template <class Cfg, int kWarps>
__device__ __forceinline__ void transpose_v(const uint8_t* v, uint8_t* vt, int w, int lane, int32_t n_valid) {
  constexpr int kN = Cfg::kBlockN, kDv = Cfg::kHeadDimV, kUp = kDv / 32;
  constexpr int kItems = (kN / 128) * 8 * kUp;
  const uint32_t m = uint32_t(lane) >> 3, r = uint32_t(lane) & 7u, t = uint32_t(lane) & 3u, q = uint32_t(lane) >> 2;
  const uint32_t vs = ptx::smem_u32(v), vts = ptx::smem_u32(vt);
  // This lane's row of the pieces it addresses: load piece m = (unit 2 up + m / 2, keys
  // 8 (m % 2) + r); store matrix m = (unit 2 up + m / 2, X if m is even else Y), row r, Vt row
  // 16 u + st_d. Key rows are 8-aligned plus r, Vt rows 16-aligned plus st_d: their swizzle
  // phases (row % 8) are r and st_d % 8 whatever the item.
  const uint32_t st_d = 2 * r + ((m & 1u) == 0 ? (r >= 4 ? 1u : 0u) : (r < 4 ? 1u : 0u));
  const uint32_t src_lane = vs + (8 * (m & 1u) + r) * 128, dst_lane = vts + st_d * 128, st_ph = st_d & 7u;
  // This lane's own words: X holds the even row for q < 4, the odd one for q >= 4; Y the other.
  const uint32_t sel_x = q < 4 ? 0x6420u : 0x7531u, sel_y = q < 4 ? 0x7531u : 0x6420u;
  auto item = [&](int i, uint32_t& src, uint32_t& dst, uint32_t& key_lo) {
    const uint32_t up = uint32_t(i) % kUp, g = (uint32_t(i) / kUp) & 7u, kc = uint32_t(i) / (8 * kUp);
    const uint32_t u = 2 * up + (m >> 1);  // this lane's 16-byte column unit of V
    const uint32_t key0 = kc * 128 + 16 * g;
    src = src_lane + (u >> 3) * (kN * 128) + key0 * 128 + (((u & 7u) ^ r) << 4);
    dst = dst_lane + kc * (kDv * 128) + u * (16 * 128) + ((g ^ st_ph) << 4);
    key_lo = key0 + 2 * t;  // this thread's first key in the lo pieces
  };
  auto finish = [&](uint32_t (&a)[4], uint32_t dst, uint32_t key_lo) {
    if (n_valid < kN) {  // a sequence's last block: zero the keys past its end (both bytes of a key)
      const auto keep = [&](uint32_t k) {
        return (int32_t(k) < n_valid ? 0x0000FFFFu : 0u) | (int32_t(k + 1) < n_valid ? 0xFFFF0000u : 0u);
      };
      const uint32_t klo = keep(key_lo), khi = keep(key_lo + 8);
      a[0] &= klo;
      a[1] &= khi;
      a[2] &= klo;
      a[3] &= khi;
    }
    const uint32_t out[4] = {__byte_perm(a[0], a[1], sel_x), __byte_perm(a[0], a[1], sel_y),
                             __byte_perm(a[2], a[3], sel_x), __byte_perm(a[2], a[3], sel_y)};
    ptx::stmatrix_x4(dst, out);
  };
  // Two items per iteration: the second one's loads are in flight while the first is stored.
  int i = w;
  for (; i + kWarps < kItems; i += 2 * kWarps) {
    uint32_t s0, d0, k0, s1, d1, k1, a0[4], a1[4];
    item(i, s0, d0, k0);
    item(i + kWarps, s1, d1, k1);
    ptx::ldmatrix_x4_trans(s0, a0);
    ptx::ldmatrix_x4_trans(s1, a1);
    finish(a0, d0, k0);
    finish(a1, d1, k1);
  }
  if (i < kItems) {
    uint32_t s0, d0, k0, a0[4];
    item(i, s0, d0, k0);
    ptx::ldmatrix_x4_trans(s0, a0);
    finish(a0, d0, k0);
  }
}

}  // namespace longattn::cuda::sm90
