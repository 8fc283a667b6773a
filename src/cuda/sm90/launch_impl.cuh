// Definition of launch_fwd, included by the per-(dtype, head dim) translation units.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <atomic>

#include "cuda/sm90/kernel.cuh"
#include "cuda/sm90/launch.h"
#include "cuda/sm90/schedule_rule.h"
#include "cuda/sm90/tile_list.cuh"

namespace longattn::cuda::sm90 {

template <class Cfg>
cudaError_t launch_cfg(const LaunchArgs& a) {
  auto kern = fwd_kernel<Cfg>;
  // Above 48 KB of dynamic shared memory needs an explicit opt-in per kernel and device;
  // done once per device (it is a driver call on every launch otherwise).
  static std::atomic<uint64_t> opted_in{0};
  int dev = 0;
  cudaGetDevice(&dev);
  const uint64_t bit = dev < 64 ? uint64_t(1) << dev : 0;
  if (!bit || !(opted_in.load(std::memory_order_relaxed) & bit)) {
    cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         Cfg::kSmemBytes);
    if (e != cudaSuccess) return e;
    opted_in.fetch_or(bit, std::memory_order_relaxed);
  }
  const int64_t grid = a.p.num_tiles < a.num_sms ? a.p.num_tiles : a.num_sms;
  FwdParams p = a.p;
  if (!Cfg::kTile.lpt_sections && p.lpt) p.section_bh = p.heads_q * p.batch;  // one section
  // Ragged: the cost-sorted tile list (tile_list.cuh) in stream-ordered scratch, one LPT
  // snake over it (no sections: items of equal cost come from different sequences).
  int32_t* list = nullptr;
  if constexpr (Cfg::kRagged) {
    if (a.tile_list) {
      const int64_t items = p.batch * p.num_m_blocks;  // < 2^31 (host check on num_tiles)
      cudaError_t e = cudaMallocAsync(reinterpret_cast<void**>(&list), size_t(items) * 8, a.stream);
      if (e != cudaSuccess) return e;
      tile_list_kernel<Cfg::kBlockM, Cfg::kBlockN><<<1, kTileListThreads, 0, a.stream>>>(p, list, int32_t(items));
      p.tile_list = list;
      p.lpt = 1;
      p.section_bh = p.heads_q * p.batch;
    }
  }
  fill_schedule_constants(&p, grid);
  kern<<<dim3(unsigned(grid)), dim3(Cfg::kThreads), Cfg::kSmemBytes, a.stream>>>(a.tm_q, a.tm_k,
                                                                              a.tm_v, p);
  cudaError_t e = cudaGetLastError();
  if (list) {
    const cudaError_t f = cudaFreeAsync(list, a.stream);
    if (e == cudaSuccess) e = f;
  }
  return e;
}

template <InType kIn, int kHeadDim>
cudaError_t launch_fwd(const LaunchArgs& a) {
  using T = std::conditional_t<kIn == InType::bf16, __nv_bfloat16, __half>;
  constexpr TileConfig t00 = tile_config(kHeadDim, false, 0), t10 = tile_config(kHeadDim, true, 0),
                       t02 = tile_config(kHeadDim, false, 2), t03 = tile_config(kHeadDim, false, 3),
                       t04 = tile_config(kHeadDim, false, 4), t05 = tile_config(kHeadDim, false, 5);
  // Sinks, softcap, windows, chunks: one feature kernel per (dtype, head dim), on
  // feature_tile (the tile variant switch does not apply).
  if (a.features) {
    if (a.paged) return launch_cfg<KernelConfig<T, kHeadDim, true, 0, true, true, true>>(a);
    if (a.ragged) return launch_cfg<KernelConfig<T, kHeadDim, true, 0, true, true>>(a);
    return launch_cfg<KernelConfig<T, kHeadDim, true, 0, true>>(a);
  }
  // Each distinct tile is instantiated once; (causal, variant) picks one at run time.
  const TileConfig want = tile_config(kHeadDim, a.p.causal, a.tile_variant);
  if (want == t00) return launch_cfg<KernelConfig<T, kHeadDim, false, 0>>(a);
  if constexpr (!(t10 == t00)) {
    if (want == t10) return launch_cfg<KernelConfig<T, kHeadDim, true, 0>>(a);
  }
  if constexpr (!(t02 == t00) && !(t02 == t10)) {
    if (want == t02) return launch_cfg<KernelConfig<T, kHeadDim, false, 2>>(a);
  }
  if constexpr (!(t03 == t00) && !(t03 == t10) && !(t03 == t02)) {
    if (want == t03) return launch_cfg<KernelConfig<T, kHeadDim, false, 3>>(a);
  }
  if constexpr (!(t04 == t00) && !(t04 == t10) && !(t04 == t02) && !(t04 == t03)) {
    if (want == t04) return launch_cfg<KernelConfig<T, kHeadDim, false, 4>>(a);
  }
  if constexpr (!(t05 == t00) && !(t05 == t10) && !(t05 == t02) && !(t05 == t03) && !(t05 == t04)) {
    if (want == t05) return launch_cfg<KernelConfig<T, kHeadDim, false, 5>>(a);
  }
  return cudaErrorInvalidValue;
}

template <InType kIn, int kHeadDim, int kHeadDimV>
cudaError_t launch_fwd_split(const LaunchArgs& a) {
  using T = std::conditional_t<kIn == InType::bf16, __nv_bfloat16, __half>;
  if (a.paged) return launch_cfg<KernelConfig<T, kHeadDim, true, 0, true, true, true, kHeadDimV>>(a);
  return launch_cfg<KernelConfig<T, kHeadDim, true, 0, true, true, false, kHeadDimV>>(a);
}

}  // namespace longattn::cuda::sm90
