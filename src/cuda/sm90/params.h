// The plain params struct of the sm90 forward kernel: pointers, 64-bit strides and sizes.
// Built on the host by launch_args.cpp; TMA tensor maps travel beside it as separate
// __grid_constant__ kernel parameters.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/sm90/fast_div.h"

namespace longattn::cuda::sm90 {

enum class OutType : int { bf16 = 0, f16 = 1, f32 = 2 };

struct FwdParams {
  int64_t batch = 0, heads_q = 0, heads_kv = 0, group = 1;
  int64_t seq_q = 0, seq_k = 0;
  int64_t num_m_blocks = 0, num_tiles = 0;
  // Scheduling (scheduler.cuh, schedule_rule.h): (batch, head) pairs per L2 section; lpt:
  // tiles of unequal cost (causal), dealt longest first in snake order; tile_list: ragged
  // batches, device list of int32 (b, h, m_block, 0) tiles in dealing order, b = -1 padding
  // after the live ones (tile_list.cuh builds it before the launch); or the hdim-256 section
  // list (kSectionList): entry k * grid + c is CTA c's k-th tile, b = -1 after its last.
  // tile_counter: dynamic assignment (scheduler.cuh DynamicTiles), a device counter zeroed
  // before the launch; null: the static snake.
  int64_t section_bh = 1;
  int32_t lpt = 0;
  const int32_t* tile_list = nullptr;
  int32_t* tile_counter = nullptr;
  // Split-KV (dense kernels, batch-1 calls; schedule_rule.h kv_splits): the batch index is
  // the split, whose keys are blocks [b * split_blocks, (b + 1) * split_blocks); Q / K / V
  // load at batch 0, and O (f32) / LSE go to batch entry b of the partial buffers (out, lse
  // point there), merged by cuda_combine after the kernel. kv_splits 1: off.
  int32_t kv_splits = 1, split_blocks = 0;
  // Derived on the host from section_bh and the grid (scheduler.cuh tile_id): tiles per full
  // section, full sections, and rounds / remainder of a full and of the last section.
  uint32_t sec_tiles = 0, full_secs = 0, sec_rounds = 0, sec_rem = 0, last_rounds = 0, last_rem = 0;
  // The divisions of tile_id / decode and of the kv head (h / group) as multiply-shifts
  // (fast_div.h), set with the constants above (schedule_rule.h fill_schedule_constants):
  // num_m_blocks, heads_q, group, sec_tiles, section_bh, the last section's pairs, sec_rounds
  // and sec_rounds + 1 (a divisor 0 is taken as 1: those paths never divide by it).
  FastDiv fd_nm, fd_nh, fd_group, fd_sec_tiles, fd_sec_bh, fd_last_bh, fd_rounds, fd_rounds1;
  // Sections of whole rounds (sec_rem 0) dealt from rotating first CTAs (scheduler.cuh
  // tile_id): section j's snake starts at CTA (j x sec_rot) mod grid; 0: every section from
  // CTA 0. fd_grid divides by the grid (both set by schedule_rule.h fill_schedule_constants).
  uint32_t sec_rot = 0;
  FastDiv fd_grid;

  float scale_log2 = 0;         // softmax scale * log2(e): logits in log2 units
  // fp8 descales, float32 (batch, heads_kv) each, element strides (b, hk); null: 1. The
  // logits are (Q K^T) qd kd, the output (P V) vd / l.
  const float* q_descale = nullptr;
  const float* k_descale = nullptr;
  const float* v_descale = nullptr;
  int64_t qd_sb = 0, qd_sh = 0, kd_sb = 0, kd_sh = 0, vd_sb = 0, vd_sh = 0;
  float rescale_threshold = 0;  // lazy rescale: rescale O only when the max grows more (log2 units); <= 0: always
  bool causal = false;
  // The dense / feature kinds' virtual rows (plan.h q_shift): seq_q and causal_offset count them, and
  // memory row = virtual row - q_shift (rows below 0 are neither loaded nor stored).
  int32_t q_shift = 0;
  int64_t causal_offset = 0;  // key position of query 0 (seq_k - seq_q bottom-right, 0 top-left)

  void* out = nullptr;
  OutType out_type = OutType::bf16;
  int64_t out_stride_b = 0, out_stride_s = 0, out_stride_h = 0;  // elements
  float* lse = nullptr;  // optional
  int64_t lse_stride_b = 0, lse_stride_h = 0, lse_stride_s = 0;

  // Issue-5 features, read only by the feature kernel (KernelConfig kFeat; appended last so
  // the dense kernels' parameter offsets do not move).
  // Softcap: s <- tanh(s * softcap_in) with softcap_in = scale / cap, and the logits' scale
  // becomes feat_scale_log2 = cap * log2(e), so s * feat_scale_log2 = cap * tanh(scale * q.k /
  // cap) * log2(e). Without softcap feat_scale_log2 = scale_log2. softcap_in == 0: off.
  float softcap_in = 0, feat_scale_log2 = 0;
  int32_t softcap_mode = 0;      // softcap_mode.h SoftcapMode: how tanh / exp2 share the MUFU and FMA pipes
  const float* sinks = nullptr;  // per query head, natural-log logits; null: none
  int64_t sinks_stride = 0;
  float sink_to_raw = 0;         // a sink logit in the kernel's logit units: 1 / scale (1 / cap with softcap)
  // Windows and chunks (mask_rule.h), in key positions; -1 / 0: off. chunk is clamped on
  // the host to <= seq_q + seq_k (same visibility) so positions divide in 32 bits.
  int64_t window_left = -1, window_right = -1;
  int32_t chunk = 0;
  // A multiple of chunk >= seq_q (positions are >= -seq_q): pos + chunk_bias >= 0, so the
  // chunk of a position is an unsigned division (mask.cuh row_limits).
  int32_t chunk_bias = 0;
  // Ragged batches (the ragged kinds): device int32 metadata, null when dense. seq_q / seq_k
  // are then the maxima (Args max_seqlen_q/k; a dense q keeps its extent); q/k/v/out rows of
  // sequence b start at cu_seqlens[b] (TMA batch coordinate 0). seqused_q / seqused_k: the
  // query rows / keys sequence b uses (mask.cuh seq_coord); rows past seqused_q[b] are
  // neither computed nor stored. offset_per_seq: bottom-right masks, so each sequence's
  // offset is its own k_len - q_len (causal_offset holds the dense one).
  const int32_t* cu_seqlens_q = nullptr;
  const int32_t* cu_seqlens_k = nullptr;
  const int32_t* seqused_k = nullptr;
  const int32_t* seqused_q = nullptr;
  int32_t offset_per_seq = 0;
  // Paged K/V (ragged kernel with KernelConfig kPaged): int32 (batch, max_pages) page table
  // on the device; k / v tensor maps are rank 4 (num_pages, page_size, heads_kv, dim), so
  // the page is the TMA batch coordinate. A K/V tile is loaded as boxes of 2^box_shift rows
  // (page_math.h box_shift_for: each inside one page); a token's page is
  // page_div(token, page_magic, page_div_shift).
  const int32_t* page_table = nullptr;
  int64_t pt_stride_b = 0;  // entries; rows are contiguous (host check)
  int32_t page_size = 0;
  uint32_t page_magic = 1, page_div_shift = 0;
  int32_t box_shift = 0;
  // log2 of the rows of a V "group" in shared memory: V stage = [group][64-column chunk][rows
  // of the group][64]. log2(kBlockN): the usual [chunk][kBlockN][64] tile. box_shift (>= 4,
  // < log2 kBlockN; plan.cpp): a V box holds every chunk of its rows, one TMA per box instead
  // of one per chunk (paged kernel only; gemm.cuh gemm_pv).
  int32_t v_group_shift = 0;
  // Grouped K (paged kernel; boxes of 16 .. kBlockN / 2 rows taking TMA; plan.cpp):
  // K stage = [8-row group][64-column chunk][8 rows][128 bytes], so one TMA box carries every
  // chunk of a page's rows (tensor_map.h row_groups) and S = Q K^T reads the stage with the
  // 8-row-group stride (hdim / 64) x 1024 bytes (gemm.cuh gemm_qk). 0: the usual tile.
  int32_t k_grouped = 0;
  // Packed GQA (pack_gqa.h; feature kernels with KernelConfig kPack): log2 of the group g.
  // The tile space is then (batch, kv head, packed q-block): heads_q holds heads_kv and group
  // 1 for the scheduler, a tile's row r is query position m_block (kBlockM / g) + r / g of
  // query head h g + r % g. 0: off.
  int32_t pack_shift = 0;
  // How the producer fills paged tiles shorter than a page (page_math.h PagedMode): 0 one
  // thread's TMAs, 1 the producer warp's lanes' TMAs, 2 a cp.async gather by the producer
  // warpgroup, which reads K / V through these byte pointers and strides (last dim
  // contiguous; 16-byte aligned like the TMA operands).
  int32_t paged_mode = 0;
  const uint8_t* k_bytes = nullptr;
  const uint8_t* v_bytes = nullptr;
  int64_t k_page_bytes = 0, k_row_bytes = 0, k_head_bytes = 0;
  int64_t v_page_bytes = 0, v_row_bytes = 0, v_head_bytes = 0;
  // Head dims narrower than the kernel's (tile_size.h kernel_dims): col_maps = 1 when the
  // tensor maps are column-addressed (tensor_map.h col_chunks; the producer loads each
  // 128-byte chunk at its column, TMA zero-fills the columns past the tensor's dim). The
  // epilogue stores the first o_cols columns of O (v's head dim; every call sets it).
  int32_t col_maps = 0;
  int32_t o_cols = 0;
  // Dense kernels (not fp8): 1 when O goes out through shared memory and TMA stores (the
  // kernel's tm_o; launch_args.h encode_out_map: 16-bit out of the input's type, 16-byte
  // aligned, no split-KV), which frees the consumers from the global stores' drain; 0: direct
  // stores (epilogue.cuh).
  int32_t o_tma = 0;
  // 1: every row of a 16-bit O starts 16-byte aligned (out and its strides) and v's head dim is
  // a multiple of 8, so the direct stores write 16 bytes a lane (epilogue.cuh store_o_half_v16).
  int32_t o_vec = 0;
  // Zigzag context parallelism (Args::cp_world; dense and feature kinds, plan.cpp): K / V maps
  // are (cp_world, 2 cp_chunk, heads_kv, dim), every rank's shard; key row j of the sequence
  // loads from rank-major coordinates (producer.cuh kv_coord). Query rows from cp_q_split on
  // (the rank's second chunk) add cp_q_shift to causal_offset (mask.cuh). cp_chunk 0: off.
  int32_t cp_world = 0, cp_chunk = 0;
  int64_t cp_q_split = INT64_MAX, cp_q_shift = 0;
  // Diagnostic, dense kinds only (common/overrides.h cta_clock): kCtaClockSlots per CTA, from
  // c x kCtaClockSlots: [0] its start (%globaltimer), [1] its SM, [2 + w] consumer warpgroup w's
  // end; then its first kCtaClockTiles tiles k, 4 each from 8 + 4k: [w] warpgroup w's end of
  // tile k (w < 2), [2] (b << 32) | (h << 16) | m_block, [3] the low 32 bits of the time
  // warpgroup w's first S of the tile was ready, in 32-bit half w (the 16-bit kinds' two
  // warpgroups; 0: not recorded). Null: off.
  unsigned long long* cta_clock = nullptr;
};

inline constexpr int kCtaClockTiles = 32, kCtaClockSlots = 8 + 4 * kCtaClockTiles;

// The probe's 4 slots of tile k of CTA cta (the layout above).
inline constexpr size_t cta_clock_tile(uint32_t cta, int64_t k) {
  return kCtaClockSlots * size_t(cta) + 8 + 4 * size_t(k);
}

}  // namespace longattn::cuda::sm90
