// The consumers' GEMMs: S = Q K^T (wgmma SS, both K-major) and O += P V (wgmma RS, P from
// registers; V MN-major for 16-bit inputs, the transposed Vt K-major for fp8), over the
// shared-memory stages the producer fills (128B swizzle, 128-byte chunks: 64 16-bit or 128
// fp8 columns; paged kernels may use the grouped K / V stage layouts).
#pragma once

#include <cstdint>

#include "cuda/ptx/smem_desc.cuh"
#include "cuda/ptx/wgmma.cuh"

namespace longattn::cuda::sm90 {

// The K stage's geometry for S = Q K^T: bytes between 64-column chunks and between 8-row
// groups. Usual tile [chunk][kBlockN rows][128 B]: kBlockN x 128 and 1024; grouped K (paged
// kernel, params.h k_grouped) [8-row group][chunk][8 rows][128 B]: 1024 and chunks x 1024.
template <class Cfg>
struct KStageGeom {
  uint32_t chunk, group;
  __device__ __forceinline__ explicit KStageGeom(uint32_t k_grouped) : chunk(Cfg::kBlockN * 128), group(1024) {
    if constexpr (Cfg::kPaged) {
      if (k_grouped) {
        chunk = 1024;
        group = Cfg::kChunks * 1024;
      }
    }
  }
};

// S(64 x kBlockN) = Q(64 rows of this warpgroup) K^T: both K-major, one SS wgmma per 32 bytes
// of the head dim (k16 for 16-bit inputs, k32 for fp8): 4 per 128-byte chunk.
template <class Cfg>
__device__ __forceinline__ void gemm_qk(float (&s)[Cfg::kBlockN / 2], const uint8_t* q_wg,
                                        const uint8_t* k_stage, uint32_t k_grouped = 0) {
  using T = typename Cfg::Element;
  const KStageGeom<Cfg> g(k_grouped);
  const ptx::TileDesc qd = ptx::TileDesc::k_major(ptx::smem_u32(q_wg));
  const ptx::TileDesc kd = ptx::TileDesc::k_major(ptx::smem_u32(k_stage), g.group);
  ptx::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < Cfg::kChunks * 4; ++kk) {
    const uint32_t off = (kk % 4) * 32;
    const uint64_t da = qd.at((kk / 4) * Cfg::kBlockM * 128 + off);
    const uint64_t db = kd.at((kk / 4) * g.chunk + off);
    if constexpr (Cfg::kFp8) {
      ptx::wgmma_ss_fp8<Cfg::kBlockN>(s, da, db, kk > 0);
    } else {
      ptx::wgmma_ss<T, Cfg::kBlockN>(s, da, db, kk > 0);
    }
  }
  ptx::wgmma_commit();
}

// O(64 x hdim_v) += P(64 x kBlockN, registers) V(kBlockN x hdim_v, MN-major): kBlockN/16 RS wgmmas.
// Paged kernel: V may be grouped (params.h v_group_shift, g = 2^g_shift rows >= 16): the k16
// step kk lies in group kk 16 / g at row (kk 16) % g, chunks g x 128 bytes apart. g = kBlockN
// is the usual tile (the same descriptors as the other kernels).
template <class Cfg>
__device__ __forceinline__ void gemm_pv(float (&o)[Cfg::kHeadDimV / 2],
                                        const uint32_t (&p)[Cfg::kBlockN / 4],
                                        const uint8_t* v_stage, uint32_t g_shift = 0) {
  using T = typename Cfg::Element;
  const uint32_t va = ptx::smem_u32(v_stage);
  const ptx::TileDesc vd = ptx::TileDesc::mn_major(va, Cfg::kPaged ? 128u << g_shift : Cfg::kBlockN * 128);
  ptx::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < Cfg::kBlockN / 16; ++kk) {
    const uint32_t a[4] = {p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3]};
    uint32_t off = kk * 16 * 128;
    if constexpr (Cfg::kPaged) {
      const uint32_t r0 = kk * 16;
      off = (r0 >> g_shift) * ((Cfg::kChunksV * 128) << g_shift) + ((r0 & ((1u << g_shift) - 1)) << 7);
    }
    const uint64_t db = vd.at(off);
    ptx::wgmma_rs<T, Cfg::kHeadDimV, 1>(o, a, db, true);
  }
  ptx::wgmma_commit();
}

// fp8: O(64 x hdim_v) += P(64 x kBlockN, e4m3 registers) Vt(hdim_v x kBlockN, K-major):
// kBlockN / 32 RS wgmmas. Vt stage: [128-key chunk][hdim_v rows][128 bytes] (fp8.cuh
// transpose_v; its keys permuted within each 16 so that P needs no shuffle).
template <class Cfg>
__device__ __forceinline__ void gemm_pv_fp8(float (&o)[Cfg::kHeadDimV / 2], const uint32_t (&p)[Cfg::kBlockN / 8],
                                            const uint8_t* vt_stage) {
  const ptx::TileDesc vd = ptx::TileDesc::k_major(ptx::smem_u32(vt_stage));
  ptx::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < Cfg::kBlockN / 32; ++kk) {
    const uint32_t a[4] = {p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3]};
    const uint64_t db = vd.at((kk / 4) * (Cfg::kHeadDimV * 128) + (kk % 4) * 32);
    ptx::wgmma_rs_fp8<Cfg::kHeadDimV>(o, a, db, true);
  }
  ptx::wgmma_commit();
}

}  // namespace longattn::cuda::sm90

