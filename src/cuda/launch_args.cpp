// Tensor maps and FwdParams of one call (launch_args.h).
#include "cuda/launch_args.h"

#include <algorithm>
#include <cstdint>

#include "cuda/ptx/tensor_map.h"
#include "cuda/sm90/page_math.h"

namespace longattn::cuda {
namespace {

using detail::KvLayout;

TileMapSpec map_spec(const Tensor& t, CUtensorMapDataType dt, int box_rows) {
  TileMapSpec s;
  s.base = t.data;
  s.dtype = dt;
  if (t.rank == 3) {  // ragged (total_tokens, heads, dim): one batch, rows addressed by token
    s.batch = 1;
    s.rows = t.shape[0];
    s.heads = t.shape[1];
    s.dim = t.shape[2];
    s.stride_batch = t.shape[0] * t.stride[0];
    s.stride_row = t.stride[0];
    s.stride_head = t.stride[1];
  } else {
    s.batch = t.shape[0];
    s.rows = t.shape[1];
    s.heads = t.shape[2];
    s.dim = t.shape[3];
    s.stride_batch = t.stride[0];
    s.stride_row = t.stride[1];
    s.stride_head = t.stride[2];
  }
  s.box_rows = box_rows;
  return s;
}

}  // namespace

std::string encode_maps(const Args& a, const detail::Problem& p, const ForwardPlan& plan, sm90::LaunchArgs* la) {
  const CUtensorMapDataType dt = p.in_dtype == DType::bf16  ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                 : p.in_dtype == DType::f16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                            : CU_TENSOR_MAP_DATA_TYPE_UINT8;  // e4m3 bytes
  const bool paged = p.kv == KvLayout::paged;
  const int block_n = plan.tile.block_n;
  // Paged boxes shorter than the tile carry one 64-column chunk each (tensor_map.h), except in
  // the grouped layouts, where one box carries every chunk of its rows.
  const int kv_box_rows = paged ? 1 << plan.box_shift : block_n;
  TileMapSpec mk = map_spec(a.k, dt, kv_box_rows), mv = map_spec(a.v, dt, kv_box_rows);
  if (kv_box_rows < block_n) mk.box_chunks = mv.box_chunks = 1;
  if (plan.v_grouped) mv.box_chunks = 0;
  if (plan.k_grouped) mk.row_groups = true;
  TileMapSpec mq = map_spec(a.q, dt, plan.tile.block_m);
  if (plan.pack_shift > 0) mq.pack_group = int(p.group);
  mq.col_chunks = mk.col_chunks = mv.col_chunks = plan.col_maps;
  std::string err;
  if (!(err = encode_tile_map(mq, &la->tm_q)).empty() || !(err = encode_tile_map(mk, &la->tm_k)).empty() ||
      !(err = encode_tile_map(mv, &la->tm_v)).empty())
    return err;
  return "";
}

std::string encode_vt_map(const void* vt, int64_t batch, int64_t heads_kv, int64_t dim, int64_t keys_pad,
                          sm90::LaunchArgs* la) {
  // Vt viewed as (batch, rows = dim, heads_kv, keys_pad): map_spec's (batch, rows, heads, dim).
  Tensor t;
  t.data = const_cast<void*>(vt);
  t.rank = 4;
  const int64_t shape[4] = {batch, dim, heads_kv, keys_pad}, stride[4] = {heads_kv * dim * keys_pad, keys_pad,
                                                                         dim * keys_pad, 1};
  for (int i = 0; i < 4; ++i) {
    t.shape[i] = shape[i];
    t.stride[i] = stride[i];
  }
  TileMapSpec s = map_spec(t, CU_TENSOR_MAP_DATA_TYPE_UINT8, int(dim));
  s.col_chunks = true;
  return encode_tile_map(s, &la->tm_v);
}

bool encode_out_map(const Args& a, const detail::Problem& p, const ForwardPlan& plan, sm90::LaunchArgs* la) {
  // The kernel's condition (tile_size.h o_tma_compiled) on its head dims (plan.h).
  if (!sm90::o_tma_compiled(plan.kernel, plan.tile, p.fp8, plan.dim_qk, plan.dim_v)) return false;
  if (plan.q_shift > 0) return false;  // a TMA store at a negative row faulted (illegal instruction)
  // A 16-bit output: the input's type (fp8: bf16 or f16, which the kernel packs by out_type).
  const DType o = p.out_dtype;
  if (o != DType::bf16 && o != DType::f16) return false;
  if ((!p.fp8 && o != p.in_dtype) || a.out.rank != 4) return false;
  if (reinterpret_cast<uintptr_t>(a.out.data) % 16 != 0) return false;
  for (int i = 0; i < 3; ++i)  // 8 elements = 16 bytes (a batch / head extent of 1: any stride)
    if ((i == 1 || a.out.shape[i] > 1) && a.out.stride[i] % 8 != 0) return false;
  TileMapSpec mo =
      map_spec(a.out, o == DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 64);
  mo.box_chunks = 1;
  mo.col_chunks = plan.col_maps;
  return encode_tile_map(mo, &la->tm_o).empty();
}

void fill_params(const Args& a, const detail::Problem& p, const ForwardPlan& plan, sm90::FwdParams* out) {
  sm90::FwdParams fp;
  const bool causal = p.mask.causal;
  const bool windowed = p.mask.windowed();
  const bool paged = p.kv == KvLayout::paged;
  fp.batch = p.batch;
  fp.heads_q = plan.sched_heads;
  fp.heads_kv = p.heads_kv;
  fp.group = plan.pack_shift > 0 ? 1 : p.group;  // packed: the scheduler sees kv heads
  fp.pack_shift = plan.pack_shift;
  fp.seq_q = p.max_seq_q;
  fp.seq_k = p.max_seq_k;
  fp.num_m_blocks = plan.num_m_blocks;
  fp.num_tiles = fp.num_m_blocks * fp.heads_q * p.batch;
  fp.scale_log2 = float(double(p.scale) * 1.4426950408889634);
  if (p.fp8) {  // (batch, heads_kv) float32 descales; absent: 1
    auto set = [](const Tensor& t, const float** ptr, int64_t* sb, int64_t* sh) {
      if (!t.present()) return;
      *ptr = static_cast<const float*>(t.data);
      *sb = t.stride[0];
      *sh = t.stride[1];
    };
    set(a.q_descale, &fp.q_descale, &fp.qd_sb, &fp.qd_sh);
    set(a.k_descale, &fp.k_descale, &fp.kd_sb, &fp.kd_sh);
    set(a.v_descale, &fp.v_descale, &fp.vd_sb, &fp.vd_sh);
  }
  fp.rescale_threshold = plan.rescale_threshold;
  fp.cta_clock = reinterpret_cast<unsigned long long*>(plan.cta_clock);
  fp.causal = causal;
  fp.causal_offset = (causal || windowed) ? p.mask.offset(p.max_seq_q, p.max_seq_k) : 0;
  if (p.cp_chunk > 0) {  // positions of the rank's chunks (layout.cpp query_position)
    fp.cp_world = int32_t(p.cp_world);
    fp.cp_chunk = int32_t(p.cp_chunk);
    fp.causal_offset = p.cp_rank * p.cp_chunk;
    fp.cp_q_split = p.cp_chunk;
    fp.cp_q_shift = (2 * p.cp_world - 2 - 2 * p.cp_rank) * p.cp_chunk;
  }
  // The virtual rows before row 0 (plan.h q_shift), after every other offset.
  fp.q_shift = int32_t(plan.q_shift);
  fp.seq_q += plan.q_shift;
  fp.causal_offset -= plan.q_shift;
  if (sm90::kernel_features(plan.kernel)) {
    fp.feat_scale_log2 = fp.scale_log2;
    if (p.softcap > 0.f) {
      fp.softcap_in = float(double(p.scale) / double(p.softcap));
      fp.feat_scale_log2 = float(double(p.softcap) * 1.4426950408889634);
    }
    fp.softcap_mode = plan.softcap_mode;
    if (p.has_sinks) {
      fp.sinks = static_cast<const float*>(a.sinks.data);
      fp.sinks_stride = a.sinks.stride[0];
      fp.sink_to_raw = float(1.0 / (p.softcap > 0.f ? double(p.softcap) : double(p.scale)));
    }
    // Any window or chunk wider than every position range sees the same keys as one of
    // seq_q + seq_k (positions lie in [-seq_q, max(seq_q, seq_k))), which keeps the kernel's
    // chunk arithmetic in 32 bits and its window sums far from overflow.
    const int64_t span = p.max_seq_q + p.max_seq_k;
    fp.window_left = p.mask.window_left < 0 ? -1 : std::min(p.mask.window_left, span);
    fp.window_right = p.mask.window_right < 0 ? -1 : std::min(p.mask.window_right, span);
    fp.chunk = p.mask.chunk > 0 ? int32_t(std::min(p.mask.chunk, span)) : 0;
    // The bias makes every position non-negative: positions start at -fp.seq_q (virtual rows
    // counted).
    if (fp.chunk > 0) fp.chunk_bias = int32_t((fp.seq_q + fp.chunk - 1) / fp.chunk * fp.chunk);
  }
  fp.out = a.out.data;
  fp.col_maps = plan.col_maps ? 1 : 0;
  fp.o_cols = int32_t(p.dim_v);
  fp.out_type = p.out_dtype == DType::bf16  ? sm90::OutType::bf16
                : p.out_dtype == DType::f16 ? sm90::OutType::f16
                                            : sm90::OutType::f32;
  if (p.q_ragged) {  // out (total_q, heads, dim), lse (heads, total_q): rows from cu_seqlens_q
    fp.out_stride_b = 0;
    fp.out_stride_s = a.out.stride[0];
    fp.out_stride_h = a.out.stride[1];
  } else {
    fp.out_stride_b = a.out.stride[0];
    fp.out_stride_s = a.out.stride[1];
    fp.out_stride_h = a.out.stride[2];
  }
  {
    const bool aligned = reinterpret_cast<uintptr_t>(a.out.data) % 16 == 0 && fp.out_stride_b % 8 == 0 &&
                         fp.out_stride_s % 8 == 0 && fp.out_stride_h % 8 == 0 && p.dim_v % 8 == 0;
    fp.o_vec = fp.out_type != sm90::OutType::f32 && aligned ? 1 : 0;
  }
  if (a.lse.present()) {
    fp.lse = static_cast<float*>(a.lse.data);
    if (p.q_ragged) {
      fp.lse_stride_b = 0;
      fp.lse_stride_h = a.lse.stride[0];
      fp.lse_stride_s = a.lse.stride[1];
    } else {
      fp.lse_stride_b = a.lse.stride[0];
      fp.lse_stride_h = a.lse.stride[1];
      fp.lse_stride_s = a.lse.stride[2];
    }
  }
  if (sm90::kernel_ragged(plan.kernel)) {  // device metadata; seq_q / seq_k are the maxima
    if (p.q_ragged) fp.cu_seqlens_q = static_cast<const int32_t*>(a.cu_seqlens_q.data);
    if (p.kv == KvLayout::ragged) fp.cu_seqlens_k = static_cast<const int32_t*>(a.cu_seqlens_k.data);
    if (p.has_seqused_k) fp.seqused_k = static_cast<const int32_t*>(a.seqused_k.data);
    if (p.has_seqused_q) fp.seqused_q = static_cast<const int32_t*>(a.seqused_q.data);
    fp.offset_per_seq = (p.mask.any() && !p.mask.top_left) ? 1 : 0;
  }
  if (paged) {
    fp.page_table = static_cast<const int32_t*>(a.page_table.data);
    fp.pt_stride_b = a.page_table.stride[0];
    fp.page_size = int32_t(p.page_size);
    const sm90::PageDiv pd = sm90::make_page_div(uint32_t(p.page_size));
    fp.page_magic = pd.magic;
    fp.page_div_shift = pd.shift;
    fp.box_shift = plan.box_shift;
    int bn_shift = 0;
    while ((1 << bn_shift) < plan.tile.block_n) ++bn_shift;
    fp.v_group_shift = plan.v_grouped ? plan.box_shift : bn_shift;
    fp.k_grouped = plan.k_grouped ? 1 : 0;
    fp.paged_mode = plan.paged_mode;
    // The gather reads (num_pages, page_size, heads_kv, dim) K / V by byte offsets.
    const int64_t es = dtype_size(p.in_dtype);
    fp.k_bytes = static_cast<const uint8_t*>(a.k.data);
    fp.v_bytes = static_cast<const uint8_t*>(a.v.data);
    fp.k_page_bytes = a.k.stride[0] * es;
    fp.k_row_bytes = a.k.stride[1] * es;
    fp.k_head_bytes = a.k.stride[2] * es;
    fp.v_page_bytes = a.v.stride[0] * es;
    fp.v_row_bytes = a.v.stride[1] * es;
    fp.v_head_bytes = a.v.stride[2] * es;
  }
  fp.section_bh = plan.section_bh;
  fp.lpt = causal ? 1 : 0;
  *out = fp;
}

}  // namespace longattn::cuda
