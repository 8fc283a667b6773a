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
// Work item of a lane (t = lane % 4, q = lane / 4) in step (G, c, kc): the 4 keys {0, 1, 8, 9}
// + 2 t of group g = (q + G) % 8 of key chunk kc, 4 bytes at column 32 c + 4 q: four 4-byte
// loads, a 4 x 4 byte transpose (8 PRMT), four 4-byte stores to Vt rows d .. d + 3 at key
// column 16 g + 4 t. NOTES: g = q + G makes both the loads (32 lanes: 4 rows mod 8 x 8 words)
// and the stores (8 rows mod 8 x 4 words) hit 32 distinct banks.
template <class Cfg>
struct TransposeStep {
  // One step (G, c, kc) of a lane, as 32-bit shared-memory addresses: its 4 source words (4 keys
  // x 4 bytes of V) and where its 4 transposed words go. The accesses are volatile asm (they
  // must stay between the mbarrier waits and the proxy fence); transpose_v issues two steps'
  // loads back to back so their latencies overlap.
  static constexpr int kN = Cfg::kBlockN, kDv = Cfg::kHeadDimV;
  static constexpr int kSteps = 8 * (kDv / 32) * (kN / 128);
  uint32_t src[4], dst[4];
  uint32_t keep;  // bit r: key r exists (else zeros)

  __device__ __forceinline__ TransposeStep(uint32_t v, uint32_t vt, int i, uint32_t t, uint32_t q, int32_t n_valid) {
    const uint32_t G = uint32_t(i) & 7u, c = (uint32_t(i) >> 3) % uint32_t(kDv / 32), kc = uint32_t(i) / (8 * (kDv / 32));
    const uint32_t g = (q + G) & 7u;
    const uint32_t key0 = kc * 128 + 16 * g + 2 * t;
    const uint32_t dbyte = 32 * c + 4 * q;  // this lane's 4 columns of V: d .. d + 3
    // The column chunk of V holding them, their 16-byte unit in a row and offset in it.
    const uint32_t vchunk = v + (dbyte >> 7) * (kN * 128), unit = (dbyte & 127) >> 4, in_unit = dbyte & 15;
    keep = 0;
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const uint32_t key = key0 + (r & 1) + 8 * (r >> 1);
      // Row `key`: the swizzle moves the unit to unit ^ (row % 8).
      src[r] = vchunk + key * 128 + ((unit ^ (key & 7)) << 4) + in_unit;
      keep |= uint32_t(int32_t(key) < n_valid) << r;
    }
    const uint32_t vt_chunk = vt + kc * (kDv * 128);
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      const uint32_t d = dbyte + uint32_t(m);
      dst[m] = vt_chunk + d * 128 + ((g ^ (d & 7u)) << 4) + 4 * t;
    }
  }
  __device__ __forceinline__ void load(uint32_t (&a)[4]) const {
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      asm volatile("ld.shared.b32 %0, [%1];" : "=r"(a[r]) : "r"(src[r]));
      if (!((keep >> r) & 1u)) a[r] = 0u;
    }
  }
  // 4 x 4 byte transpose: out[m] = byte m of a[0], a[1], a[2], a[3].
  __device__ __forceinline__ void store(const uint32_t (&a)[4]) const {
    const uint32_t t0 = __byte_perm(a[0], a[1], 0x5140), t1 = __byte_perm(a[0], a[1], 0x7362);
    const uint32_t t2 = __byte_perm(a[2], a[3], 0x5140), t3 = __byte_perm(a[2], a[3], 0x7362);
    const uint32_t out[4] = {__byte_perm(t0, t2, 0x5410), __byte_perm(t0, t2, 0x7632), __byte_perm(t1, t3, 0x5410),
                             __byte_perm(t1, t3, 0x7632)};
#pragma unroll
    for (int m = 0; m < 4; ++m) asm volatile("st.shared.b32 [%0], %1;" ::"r"(dst[m]), "r"(out[m]));
  }
};

template <class Cfg, int kWarps>
__device__ __forceinline__ void transpose_v(const uint8_t* v, uint8_t* vt, int w, int lane, int32_t n_valid) {
  using Step = TransposeStep<Cfg>;
  const uint32_t t = uint32_t(lane) & 3u, q = uint32_t(lane) >> 2;
  const uint32_t vs = ptx::smem_u32(v), vts = ptx::smem_u32(vt);
  // Two steps per iteration: the second step's loads are in flight while the first one's
  // words are permuted and stored.
  int i = w;
  for (; i + kWarps < Step::kSteps; i += 2 * kWarps) {
    const Step s0(vs, vts, i, t, q, n_valid), s1(vs, vts, i + kWarps, t, q, n_valid);
    uint32_t a0[4], a1[4];
    s0.load(a0);
    s1.load(a1);
    s0.store(a0);
    s1.store(a1);
  }
  if (i < Step::kSteps) {
    const Step s0(vs, vts, i, t, q, n_valid);
    uint32_t a0[4];
    s0.load(a0);
    s0.store(a0);
  }
}

}  // namespace longattn::cuda::sm90
