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
//
// Warp w takes the 16-key groups G = w, w + kWarps, ... (G = 8 kc + g) with every column unit
// pair up of each: with w a template argument, G and up are compile-time constants, and each
// address is a per-lane constant, one XOR with an immediate (the swizzle) and an immediate
// offset: the loads' XOR term is up's, the stores' g's (one store base per group).
// Recomputing the addresses per item at run time was most of the transposer's instructions.
template <class Cfg, int kWarps, int kW>
__device__ __forceinline__ void transpose_v_warp(const uint8_t* v, uint8_t* vt, int lane, int32_t n_valid) {
  constexpr int kN = Cfg::kBlockN, kDv = Cfg::kHeadDimV, kUp = kDv / 32, kGroups = (kN / 128) * 8;
  static_assert(kUp % 2 == 0, "column unit pairs go two at a time");
  const uint32_t m = uint32_t(lane) >> 3, r = uint32_t(lane) & 7u, t = uint32_t(lane) & 3u, q = uint32_t(lane) >> 2;
  const uint32_t mh = m >> 1;
  // This lane's row of the pieces it addresses: load piece m = (unit 2 up + m / 2, keys
  // 8 (m % 2) + r); store matrix m = (unit 2 up + m / 2, X if m is even else Y), row r, Vt row
  // 16 u + st_d. Key rows are 8-aligned plus r, Vt rows 16-aligned plus st_d: their swizzle
  // phases (row % 8) are r and st_d % 8 whatever the item.
  const uint32_t st_d = 2 * r + ((m & 1u) == 0 ? (r >= 4 ? 1u : 0u) : (r < 4 ? 1u : 0u));
  const uint32_t src_lane = ptx::smem_u32(v) + (8 * (m & 1u) + r) * 128;
  const uint32_t dst_lane = ptx::smem_u32(vt) + st_d * 128 + mh * (16 * 128);
  const uint32_t st_ph4 = (st_d & 7u) << 4;
  // Column unit u = 2 up + mh of a key row sits at its 16-byte unit (u % 8) ^ r, and
  // (u % 8) ^ r = 2 (up % 4) ^ (mh ^ r): one XOR with an immediate per item.
  const uint32_t mr4 = (mh ^ r) << 4;
  auto src_of = [&](int up, int G) {
    return src_lane + ((uint32_t(2 * (up % 4)) << 4) ^ mr4) + uint32_t((up / 4) * (kN * 128) + G * (16 * 128));
  };
  // This lane's own words: X holds the even row for q < 4, the odd one for q >= 4; Y the other.
  const uint32_t sel_x = q < 4 ? 0x6420u : 0x7531u, sel_y = q < 4 ? 0x7531u : 0x6420u;
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
  constexpr int kMine = (kGroups - kW + kWarps - 1) / kWarps;
#pragma unroll
  for (int j = 0; j < kMine; ++j) {
    const int G = kW + j * kWarps, g = G % 8, kc = G / 8;  // compile-time once unrolled
    const uint32_t dst_g = dst_lane + ((uint32_t(g) << 4) ^ st_ph4) + uint32_t(kc * (kDv * 128));
    const uint32_t key_lo = uint32_t(16 * G) + 2 * t;  // this thread's first key in the lo pieces
    // Two items per step: the second one's loads are in flight while the first is stored.
#pragma unroll
    for (int up = 0; up < kUp; up += 2) {
      uint32_t a0[4], a1[4];
      ptx::ldmatrix_x4_trans(src_of(up, G), a0);
      ptx::ldmatrix_x4_trans(src_of(up + 1, G), a1);
      finish(a0, dst_g + uint32_t(up * (2 * 16 * 128)), key_lo);
      finish(a1, dst_g + uint32_t((up + 1) * (2 * 16 * 128)), key_lo);
    }
  }
}

template <class Cfg, int kWarps>
__device__ __forceinline__ void transpose_v(const uint8_t* v, uint8_t* vt, int w, int lane, int32_t n_valid) {
  static_assert(kWarps == 3, "transpose_v dispatches warps 0..2");
  if (w == 0) transpose_v_warp<Cfg, kWarps, 0>(v, vt, lane, n_valid);
  else if (w == 1) transpose_v_warp<Cfg, kWarps, 1>(v, vt, lane, n_valid);
  else transpose_v_warp<Cfg, kWarps, 2>(v, vt, lane, n_valid);
}

}  // namespace longattn::cuda::sm90
