// The compile-time configuration of one forward kernel: element type, head dims, and the
// named kernel kind (tile_size.h Kernel), from which the features it compiles and its tile
// follow.
#pragma once

#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "cuda/sm90/smem_layout.cuh"
#include "cuda/sm90/tile_size.h"

namespace longattn::cuda::sm90 {

// kHeadDimV_: v's head dim when it differs from q / k's (192 / 128; ragged kinds only).
// kCap_: the feature kinds' kernel may have a softcap; false: their kernel for calls without
// one (launch_impl.cuh launch_feature, consumer.cuh capped).
template <class T, int kHeadDim_, int kHeadDimV_, Kernel kKind_, bool kCap_ = true>
struct KernelConfig {
  using Element = T;
  static constexpr Kernel kKind = kKind_;
  // Sinks, softcap, windows, chunks as run-time predicates; the dense kind compiles none of it.
  static constexpr bool kFeat = kernel_features(kKind_);
  static constexpr bool kCap = kFeat && kCap_;
  // Per-sequence starts and lengths read per tile (cu_seqlens, seqused_k).
  static constexpr bool kRagged = kernel_ragged(kKind_);
  // Paged K/V: only the producer differs (it resolves each K/V tile's pages; paged_kv.cuh).
  static constexpr bool kPaged = kernel_paged(kKind_);
  // Packed GQA tiles (pack_gqa.h): a tile is (batch, kv head, packed q-block), its rows the g
  // query heads of the kv head at kBlockM / g positions.
  static constexpr bool kPack = kernel_packed(kKind_);
  // e4m3 inputs: k32 wgmma steps, V transposed in shared memory for P V (fp8.cuh).
  static constexpr bool kFp8 = std::is_same_v<T, __nv_fp8_e4m3>;
  static constexpr TileConfig kTile =
      kFp8 ? fp8_tile(kKind_, kHeadDim_, kHeadDimV_) : kernel_tile(kKind_, kHeadDim_, kHeadDimV_);
  static constexpr int kHeadDim = kHeadDim_, kHeadDimV = kHeadDimV_;
  // Rows live in shared memory as 128-byte chunks (one TMA box column, one swizzle row).
  static constexpr int kElemBytes = kFp8 ? 1 : 2;
  static constexpr int kChunkCols = 128 / kElemBytes;  // elements per chunk
  static constexpr int kChunks = kHeadDim / kChunkCols, kChunksV = kHeadDimV / kChunkCols;
  // fp8 dense_vt: V comes pre-transposed from global memory (fp8_vt.h: Vt, keys permuted as
  // fp8.cuh's transposer does), one TMA box per 128-key block straight into the ring P V
  // reads; no transposer warps. The in-kernel transposer needs registers the hdim-256
  // consumers (O 128 + S 64 + P 16) and the hdim-128 lookahead's (two S) leave no room for:
  // at 24 / 240 (256) and at 40 / 232 or 56 / 224 (128) it spilled.
  static constexpr bool kVtGlobal = kFp8 && fp8_vt_global(kKind_);
  // Paged producer-team modes (lanes / gather, page_math.h PagedMode) compiled in.
  // Not fp8 (its producer warpgroup's warps 1..3 transpose V; the paged fp8 kernel issues
  // TMA boxes from one thread).
  static constexpr bool kPagedTeam = kPaged && !kFp8 && paged_team_ok(kTile);
  // Column-addressed tensor maps (params.h col_maps: head dims narrower than the kernel's)
  // compiled in: the feature kinds (plan.cpp sends narrow dims there), so the dense kernel keeps
  // its loads and stores unconditional (with them compiled in it ran ~1-2% slower at 1k).
  // NOTES: not the 24-register hdim-256 paged producer (its chunk coordinates then spilled 4-8
  // bytes); the host refuses paged K/V with dims narrower than 256 there.
  static constexpr bool kColMaps = kFeat && !(kPaged && kTile.producer_regs < 32);
  // The sectioned causal order as a device list (tile_list.cuh tile_list_sections_kernel;
  // LaunchArgs::section_list): the dense kinds without the sectioned snake (hdim 256 and fp8
  // dense_vt, whose 24-register producer has no room for tile_id<true>: at 24 / 240 it spilled
  // 28 bytes in fp8 dense_vt at 128); every role then reads (b, h, m)
  // from the list like the ragged kinds.
  static constexpr bool kSectionList = kernel_dense(kKind_) && !kTile.lpt_sections;
  // Tile coordinates come from a device list (ragged kinds, kSectionList).
  static constexpr bool kList = kRagged || kSectionList;
  // Zigzag context parallelism (params.h cp_chunk; producer.cuh kv_coord) compiled in.
  static constexpr bool kCp = cp_compiled(kKind_, kTile, kFp8, kHeadDimV_);
  static constexpr int kBlockM = kTile.block_m;
  static constexpr int kBlockN = kTile.block_n;
  static constexpr int kStages = kTile.stages;
  static constexpr int kQStages = kTile.q_stages;
  static constexpr int kWGs = kTile.consumer_wgs;
  static constexpr int kThreads = 128 * (kWGs + 1);
  // Dynamic tile assignment compiled in (tile_size.h dynamic_compiled).
  static constexpr bool kDynamic = dynamic_compiled(kKind_, kTile, kHeadDim_, kFp8);
  // O through shared memory and TMA stores where FwdParams::o_tma says so (tile_size.h
  // o_tma_compiled): in the tile's Q buffer, or (kOBuf: o_own_buffer) in a buffer of its own.
  // Column maps (narrow head dims): the O map is column-addressed too, and TMA clips the
  // columns past v's head dim.
  static constexpr bool kOTma = o_tma_compiled(kKind_, kTile, kFp8, kHeadDim_, kHeadDimV_);
  static constexpr bool kOBuf = kOTma && o_own_buffer(kKind_, kFp8, kHeadDim_, kHeadDimV_);
  using Smem = SmemLayout<kHeadDim, kBlockM, kBlockN, kStages, kQStages, kHeadDimV, kElemBytes, kFp8 && !kVtGlobal,
                          kOBuf ? kBlockM * kHeadDimV * 2 : 0>;
  static constexpr int kSmemBytes = Smem::kBytes + 1024;  // + alignment slack
  static_assert(kSmemBytes <= 227 * 1024, "shared memory per CTA");
  static_assert(kBlockM == 64 * kWGs, "one consumer warpgroup per 64 query rows");
  static_assert(kBlockN % 16 == 0 && kHeadDim % kChunkCols == 0 && kHeadDimV % kChunkCols == 0,
                "wgmma k16 steps / 128B chunks");
  static_assert(!kFp8 || (kBlockN % 128 == 0 && !kPagedTeam), "fp8: Vt rows of 128 keys; paged K/V by TMA boxes");
  static_assert(!kVtGlobal || kBlockN == 128, "fp8 Vt from global memory: one box per block");
  static_assert(kKind_ != Kernel::dense_vt || kFp8, "dense_vt: fp8 alone");
  static_assert(!kFp8 || kHeadDimV <= 128 || kVtGlobal, "fp8 above 128: no room for the transposer");
  // launch_impl.cuh's one scratch pointer holds either the section list or the ragged list and
  // the counter; the section list also turns the snake (p.lpt) off after want_dynamic is decided.
  static_assert(!(kSectionList && (kDynamic || kRagged)), "the section list excludes the counter and the ragged list");
  static_assert(kHeadDimV == kHeadDim || kRagged, "split head dims run the ragged kernels only");
  static_assert(!kPack || kHeadDimV == kHeadDim, "packed GQA: equal q / v head dims");
};

}  // namespace longattn::cuda::sm90
