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
  FwdParams p = a.p;
  // Stream-ordered scratch (freed after the kernel, no library state): the dynamic tile
  // counter (16 bytes) and the ragged tile list (tile_list.cuh).
  bool want_list = false, want_dynamic = false;
  if constexpr (Cfg::kRagged) want_list = a.tile_list && a.list_items > 0;
  FwdParams pre = p;  // the tile-list pre-kernel sees the real batch
  if (want_list) {
    // The tile space becomes (list items x heads), dealt by one LPT snake (no sections: items
    // of equal cost come from different sequences); decode reads the list, so batch and
    // num_m_blocks here only describe that space to tile_id's constants.
    p.lpt = 1;
    p.batch = 1;
    p.num_m_blocks = a.list_items;
    p.num_tiles = a.list_items * p.heads_q;
    p.section_bh = p.heads_q;
  }
  const int64_t grid = p.num_tiles < a.num_sms ? p.num_tiles : a.num_sms;
  // Dynamic only with more than two rounds of tiles: below that it cannot balance better than
  // the snake, and the counter costs a memset and an allocation on the stream.
  // NOTES: not with a paged producer team (page_math.h paged_team > 1): its threads each run
  // the schedule, and only one could take ids from the counter.
  if constexpr (Cfg::kDynamic) want_dynamic = a.dynamic && p.lpt && p.num_tiles > 2 * grid && p.paged_mode == kPagedTma;
  if (!Cfg::kTile.lpt_sections && p.lpt) p.section_bh = p.heads_q * p.batch;  // one section
  int32_t* scratch = nullptr;
  if (want_list || want_dynamic) {
    const int64_t tiles = want_list ? p.num_tiles : 0;  // list capacity: items x heads (< 2^31)
    cudaError_t e = cudaMallocAsync(reinterpret_cast<void**>(&scratch), 16 + size_t(tiles) * 16, a.stream);
    if (e != cudaSuccess) return e;
    if (want_dynamic) p.tile_counter = scratch;
    if (want_list) {  // also zeroes the counter
      p.tile_list = scratch + 4;  // 16-byte entries after the 16-byte counter
      // Padding the CTAs can read past the live tiles: a static snake CTA's next id is < 2
      // rounds past its last live one, a dynamic CTA takes one id past the end. Chunks of one
      // round (tile_list.cuh).
      const int32_t pad = int32_t(2 * grid + 2);
      if (a.cost_order)
        tile_list_kernel<Cfg::kBlockM, Cfg::kBlockN><<<1, kTileListThreads, 0, a.stream>>>(
            pre, reinterpret_cast<int4*>(scratch + 4), int32_t(a.list_items), pad, int32_t(grid), p.tile_counter);
      else
        tile_list_seq_kernel<Cfg::kBlockM, Cfg::kBlockN><<<1, kTileListThreads, 0, a.stream>>>(
            pre, reinterpret_cast<int4*>(scratch + 4), int32_t(a.list_items), pad, p.tile_counter);
    } else {
      e = cudaMemsetAsync(scratch, 0, 16, a.stream);
    }
    if (e == cudaSuccess) e = cudaGetLastError();
    if (e != cudaSuccess) {
      cudaFreeAsync(scratch, a.stream);
      return e;
    }
  }
  fill_schedule_constants(&p, grid);
  kern<<<dim3(unsigned(grid)), dim3(Cfg::kThreads), Cfg::kSmemBytes, a.stream>>>(a.tm_q, a.tm_k,
                                                                              a.tm_v, p);
  cudaError_t e = cudaGetLastError();
  if (scratch) {
    const cudaError_t f = cudaFreeAsync(scratch, a.stream);
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
    if (a.pack) {  // packed GQA (pack_gqa.h): the ragged / paged kernels with packed tiles
      if (a.paged) return launch_cfg<KernelConfig<T, kHeadDim, true, 0, true, true, true, kHeadDim, true>>(a);
      return launch_cfg<KernelConfig<T, kHeadDim, true, 0, true, true, false, kHeadDim, true>>(a);
    }
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
