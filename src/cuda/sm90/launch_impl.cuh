// Definition of launch_fwd, included by the per-(dtype, head dims) translation units.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <atomic>

#include "cuda/sm90/kernel.cuh"
#include "cuda/sm90/kernel_config.cuh"
#include "cuda/sm90/launch.h"
#include "cuda/sm90/schedule_rule.h"
#include "cuda/sm90/tile_list.cuh"

namespace longattn::cuda::sm90 {
// Internal linkage: the opt-in cache below must belong to this copy of the library. A static
// local of a template with external linkage is one process-wide (GNU unique) symbol, so a
// second copy of the library in the process (a Python extension beside a ctypes-loaded one)
// skipped its own opt-in and its launches failed with "invalid argument".
namespace {

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
  // counter (16 bytes) and the ragged tile list, or the section list (tile_list.cuh; never
  // both: KernelConfig's static_assert).
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
  // the snake, and the counter costs a memset and an allocation on the stream. The ids keep
  // the static order (LPT sections, or q-blocks fastest without LPT): the counter only
  // changes which CTA runs a tile.
  // NOTES: not with a paged producer team (page_math.h paged_team > 1): its threads each run
  // the schedule, and only one could take ids from the counter.
  if constexpr (Cfg::kDynamic) want_dynamic = a.dynamic && p.num_tiles > 2 * grid && p.paged_mode == kPagedTma;
  // The sectioned causal order as a list (kSectionList): `sec` holds the rule's sections; the
  // kernel then takes ids k * grid + c (no snake) and reads the list's entries.
  bool want_slist = false;
  FwdParams sec = p;
  int64_t slist_rounds = 0;
  bool rotate = false;
  uint32_t last_first = 0;
  if constexpr (Cfg::kSectionList) {
    want_slist = a.section_list && p.lpt && p.section_bh < p.heads_q * p.batch;
    if (want_slist) {
      fill_schedule_constants(&sec, grid);
      rotate = a.section_rotate < 0 ? TileScheduler::rotation_rule(sec, uint32_t(grid)) : a.section_rotate > 0;
      slist_rounds = TileScheduler::section_list_rounds(sec, uint32_t(grid), rotate);
      // The list's entries, its padding included (section_list_rounds), must stay 32-bit
      // indexable (TileScheduler::decode); beyond that the call keeps the snake.
      want_slist = slist_rounds * grid < int64_t(INT32_MAX);
      if (want_slist && rotate) last_first = rotated_last_first(sec, grid);
    }
    if (want_slist) {
      p.lpt = 0;
      p.num_tiles = slist_rounds * grid;
    }
  }
  if (!Cfg::kTile.lpt_sections && p.lpt) p.section_bh = p.heads_q * p.batch;  // one section
  int32_t* scratch = nullptr;
  if (want_slist) {
    cudaError_t e = cudaMallocAsync(reinterpret_cast<void**>(&scratch), size_t(p.num_tiles) * 16, a.stream);
    if (e != cudaSuccess) return e;
    p.tile_list = scratch;
    const int64_t entries = slist_rounds * grid;  // = p.num_tiles < 2^31
    tile_list_sections_kernel<256><<<unsigned((entries + 255) / 256), 256, 0, a.stream>>>(
        sec, reinterpret_cast<int4*>(scratch), int32_t(slist_rounds), uint32_t(grid), rotate, last_first);
    e = cudaGetLastError();
    if (e != cudaSuccess) {
      cudaFreeAsync(scratch, a.stream);
      return e;
    }
  }
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
  if (a.section_rotate == 0) p.sec_rot = 0;  // Overrides::section_rotate off: every section from CTA 0
  kern<<<dim3(unsigned(grid)), dim3(Cfg::kThreads), Cfg::kSmemBytes, a.stream>>>(a.tm_q, a.tm_k, a.tm_v,
                                                                              a.tm_o, p);
  cudaError_t e = cudaGetLastError();
  if (scratch) {
    const cudaError_t f = cudaFreeAsync(scratch, a.stream);
    if (e == cudaSuccess) e = f;
  }
  return e;
}

}  // namespace

// A kind with features: calls without a softcap run on its kernel compiled without one, whose
// key-block step has no softcap branches (consumer.cuh capped; docs/PERFORMANCE.md, "The
// feature kind's step without softcap branches").
template <class T, int D, int DV, Kernel K>
cudaError_t launch_feature(const LaunchArgs& a) {
  if (a.p.softcap_in == 0.f) return launch_cfg<KernelConfig<T, D, DV, K, false>>(a);
  return launch_cfg<KernelConfig<T, D, DV, K>>(a);
}

template <InType kIn, int kHeadDim, int kHeadDimV>
cudaError_t launch_fwd(const LaunchArgs& a) {
  using T = std::conditional_t<kIn == InType::bf16, __nv_bfloat16,
                               std::conditional_t<kIn == InType::f16, __half, __nv_fp8_e4m3>>;
  constexpr int D = kHeadDim, DV = kHeadDimV;
  if constexpr (kIn == InType::e4m3) {
    // The fp8 kinds' tiles: tile_size.h fp8_tile; the feature kind runs on the ragged one (which
    // takes dense layouts too). Above 128: dense_vt alone (kVtGlobal).
    if constexpr (D > 128) {
      return a.kernel == Kernel::dense_vt ? launch_cfg<KernelConfig<T, D, DV, Kernel::dense_vt>>(a) : cudaErrorInvalidValue;
    } else {
      switch (a.kernel) {
        case Kernel::dense: return launch_cfg<KernelConfig<T, D, DV, Kernel::dense>>(a);
        case Kernel::dense_vt: return launch_cfg<KernelConfig<T, D, DV, Kernel::dense_vt>>(a);
        case Kernel::feature:
        case Kernel::ragged: return launch_feature<T, D, DV, Kernel::ragged>(a);
        case Kernel::paged: return launch_feature<T, D, DV, Kernel::paged>(a);
        case Kernel::ragged_packed: return launch_feature<T, D, DV, Kernel::ragged_packed>(a);
        case Kernel::paged_packed: return launch_feature<T, D, DV, Kernel::paged_packed>(a);
      }
      return cudaErrorInvalidValue;
    }
  } else if constexpr (D != DV) {  // split head dims: the ragged kinds only
    switch (a.kernel) {
      case Kernel::ragged: return launch_feature<T, D, DV, Kernel::ragged>(a);
      case Kernel::paged: return launch_feature<T, D, DV, Kernel::paged>(a);
      default: return cudaErrorInvalidValue;
    }
  } else {
    switch (a.kernel) {
      case Kernel::dense: return launch_cfg<KernelConfig<T, D, D, Kernel::dense>>(a);
      case Kernel::dense_vt: return cudaErrorInvalidValue;  // fp8 alone
      case Kernel::feature: return launch_feature<T, D, D, Kernel::feature>(a);
      case Kernel::ragged: return launch_feature<T, D, D, Kernel::ragged>(a);
      case Kernel::paged: return launch_feature<T, D, D, Kernel::paged>(a);
      case Kernel::ragged_packed: return launch_feature<T, D, D, Kernel::ragged_packed>(a);
      case Kernel::paged_packed: return launch_feature<T, D, D, Kernel::paged_packed>(a);
    }
    return cudaErrorInvalidValue;
  }
}

}  // namespace longattn::cuda::sm90
