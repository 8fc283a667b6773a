// Host side of the CUDA backend: what the sm90 kernel supports, tensor maps, dispatch.
// Arguments arrive validated (src/api); this file only rejects what the kernel cannot
// serve yet, with NotSupported naming the argument, before anything is written.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "common/problem.h"
#include "cuda/device_guard.h"
#include "cuda/ptx/tensor_map.h"
#include "cuda/sm90/launch.h"
#include "cuda/sm90/pack_gqa.h"
#include "cuda/sm90/page_math.h"
#include "cuda/sm90/schedule_rule.h"
#include "cuda/sm90/softcap_mode.h"
#include "cuda/util_kernels.h"

namespace longattn::detail {
namespace {

using cuda::sm90::InType;
using cuda::sm90::LaunchArgs;

Status not_yet(const std::string& what) {
  return Status::NotSupported(what + " not supported by the CUDA backend yet");
}

// Lazy rescale threshold in log2 units (DESIGN: 8). LONGATTN_RESCALE_THRESHOLD overrides
// it for measurements; 0 selects always-rescale.
float rescale_threshold() {
  const char* e = std::getenv("LONGATTN_RESCALE_THRESHOLD");
  return e ? std::strtof(e, nullptr) : 8.0f;
}

// Measurement switches (A/B in one process): LONGATTN_PINGPONG=0 disables the warpgroup
// ping-pong; LONGATTN_TILE=1..5 forces a tile variant (tile_size.h; 0 or unset: the table).
bool env_is(const char* name, const char* value) {
  const char* e = std::getenv(name);
  return e && std::string(e) == value;
}

Status check_tma_operand(const char* name, const Tensor& t) {
  if (reinterpret_cast<uintptr_t>(t.data) % 16 != 0)
    return Status::NotSupported(std::string(name) + ": base pointer must be 16-byte aligned for the CUDA backend");
  for (int i = 0; i < t.rank - 1; ++i)  // every dim but the contiguous last one
    if ((t.stride[i] * 2) % 16 != 0 && t.shape[i] > 1)
      return Status::NotSupported(std::string(name) + ": strides must be multiples of 16 bytes for the CUDA backend");
  return Status::Ok();
}

Status check_device(const char* name, const Tensor& t, const Problem& p) {
  if (!t.present()) return Status::Ok();
  if (t.device.kind != DeviceKind::cuda || t.device.ordinal != p.device.ordinal)
    return Status::Invalid(std::string(name) + ": must be on the same CUDA device as q");
  return Status::Ok();
}

cuda::TileMapSpec map_spec(const Tensor& t, CUtensorMapDataType dt, int box_rows) {
  cuda::TileMapSpec s;
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

Status cuda_error(const char* what, cudaError_t e) {
  return Status::Error(std::string("CUDA backend: ") + what + ": " + cudaGetErrorString(e));
}

template <InType kIn>
cudaError_t dispatch_dim(int64_t d, const LaunchArgs& la) {
  switch (d) {
    case 64: return cuda::sm90::launch_fwd<kIn, 64>(la);
    case 128: return cuda::sm90::launch_fwd<kIn, 128>(la);
    default: return cuda::sm90::launch_fwd<kIn, 256>(la);
  }
}

}  // namespace

Status cuda_forward(const Args& a, const Problem& p) {
  // Accepted by the API, not by the kernel yet (issue 16): refuse rather than ignore them.
  if (p.has_seqused_q) return not_yet("seqused_q");
  if (p.mask.chunk > 0 && (p.mask.window_left >= 0 || p.mask.window_right >= 0))
    return not_yet("attention_chunk with a sliding window");
  // What the kernel cannot serve yet (issue 5 adds these).
  if (p.fp8) return not_yet("fp8 (e4m3) inputs");
  if (p.in_dtype != DType::bf16 && p.in_dtype != DType::f16) return not_yet(std::string("q dtype ") + dtype_name(p.in_dtype));
  // Head dims: 64, 128, 256, or q / k 192 with v 128 (DeepSeek-style; the ragged kernel).
  const bool split = p.dim_qk != p.dim_v;
  if (split && !(p.dim_qk == 192 && p.dim_v == 128))
    return not_yet("dim_qk " + std::to_string(p.dim_qk) + " != dim_v " + std::to_string(p.dim_v) + " (192 / 128 is)");
  if (!split && p.dim_qk != 64 && p.dim_qk != 128 && p.dim_qk != 256) return not_yet("head dim " + std::to_string(p.dim_qk) + " (64, 128, 256 are)");
  if (p.out_dtype != DType::bf16 && p.out_dtype != DType::f16 && p.out_dtype != DType::f32)
    return not_yet(std::string("out dtype ") + dtype_name(p.out_dtype));
  if (p.device.kind != DeviceKind::cuda) return Status::Invalid("q: must be a CUDA tensor for the CUDA backend");

  const char* names[] = {"q", "k", "v", "out", "lse", "sinks", "page_table"};
  const Tensor* ts[] = {&a.q, &a.k, &a.v, &a.out, &a.lse, &a.sinks, &a.page_table};
  for (int i = 0; i < 7; ++i)
    if (Status s = check_device(names[i], *ts[i], p); !s.ok()) return s;
  for (int i = 0; i < 3; ++i)
    if (Status s = check_tma_operand(names[i], *ts[i]); !s.ok()) return s;
  // Ragged token rows are TMA coordinates (int32).
  for (int i = 0; i < 3; ++i)
    if (ts[i]->rank == 3 && ts[i]->shape[0] > INT32_MAX - 4096)
      return not_yet(std::string(names[i]) + ": 2^31 or more ragged tokens");
  // Epilogue stores pairs of elements: 4-byte (16-bit out) or 8-byte (f32 out) aligned.
  const int64_t out_es = p.out_dtype == DType::f32 ? 4 : 2;
  if (reinterpret_cast<uintptr_t>(a.out.data) % (2 * out_es) != 0)
    return Status::NotSupported("out: base pointer must be aligned to 2 elements for the CUDA backend");
  for (int i = 0; i < a.out.rank - 1; ++i)
    if (a.out.stride[i] % 2 != 0 && a.out.shape[i] > 1)
      return Status::NotSupported("out: strides must be even for the CUDA backend");

  cuda::DeviceGuard guard(p.device.ordinal);
  if (!guard.ok()) return Status::Error("CUDA backend: cannot select device " + std::to_string(p.device.ordinal));
  cudaStream_t stream = static_cast<cudaStream_t>(a.stream);

  if (p.batch == 0 || p.max_seq_q == 0 || p.heads_q == 0) return Status::Ok();
  if (p.max_seq_k == 0) {
    cudaError_t e = cuda::launch_fill_empty(a.out, a.lse, a.sinks, stream);
    return e == cudaSuccess ? Status::Ok() : cuda_error("fill", e);
  }
  // TMA coordinates are int32.
  // TMA coordinates and tile ids are int32 (element offsets stay 64-bit).
  if (p.max_seq_q + p.max_seq_k > INT32_MAX - 1024 || p.heads_q > INT32_MAX || p.batch > INT32_MAX)
    return not_yet("sequence lengths beyond 2^31");

  const bool causal = p.mask.causal;
  const bool windowed = p.mask.window_left >= 0 || p.mask.window_right >= 0 || p.mask.chunk > 0;
  // Sinks, softcap, windows and chunks run the feature kernel (tile_size.h feature_tile);
  // the dense kernels stay as they were.
  const bool paged = p.kv == KvLayout::paged;
  // LONGATTN_SOFTCAP_2WG=1 (A/B switch): softcap at hdim 64 on the ragged kernel's two-warpgroup
  // 128 x 128 tile at 232 registers, where the fixed-max and FMA-pipe exp2 modes compile (the
  // dense three-warpgroup tile at 160 spills with them; softcap_mode.h).
  const bool cap_2wg = p.dim_qk == 64 && p.softcap > 0.f && env_is("LONGATTN_SOFTCAP_2WG", "1");
  bool ragged = p.q_ragged || p.kv == KvLayout::ragged || p.has_seqused_k || paged || split || cap_2wg;
  bool features = p.has_sinks || p.softcap > 0.f || windowed || ragged;
  // The feature kernel's mask arithmetic is 32-bit (mask.cuh).
  const bool feat_fits = 2 * (p.max_seq_q + p.max_seq_k) <= INT32_MAX - 4096;
  if (features && !feat_fits) return not_yet("sinks/softcap/windows/chunks with seq_q + seq_k beyond 2^30");
  const char* tv = std::getenv("LONGATTN_TILE");
  const int tile_variant = features ? 0
                           : (tv && tv[0] >= '1' && tv[0] <= '5' && !tv[1])
                               ? tv[0] - '0'
                               : cuda::sm90::default_variant(int(p.dim_qk), causal, p.max_seq_k);
  // Packed GQA (pack_gqa.h: the rule; LONGATTN_PACK_GQA=0 / 1 forces it off / on where it
  // can run): the ragged (paged) kernel with tiles of the g query heads of one kv head.
  // Decided against the unpacked call's split-KV (dense batch-1 calls only).
  const int pack_block_m = cuda::sm90::ragged_tile(int(p.dim_qk)).block_m;
  const int pack_shift = split || !feat_fits ? 0 : cuda::sm90::pack_gqa_shift(p.group, pack_block_m);
  bool pack = false;
  if (pack_shift > 0) {
    const cuda::sm90::TileConfig t0 = paged      ? cuda::sm90::paged_tile(int(p.dim_qk))
                                      : ragged   ? cuda::sm90::ragged_tile(int(p.dim_qk))
                                      : features ? cuda::sm90::feature_tile(int(p.dim_qk))
                                                 : cuda::sm90::tile_config(int(p.dim_qk), causal, tile_variant);
    cuda::sm90::PackQuery q;
    q.group = p.group;
    q.seq_q = p.max_seq_q;
    q.batch = p.batch;
    q.heads_q = p.heads_q;
    q.block_m = pack_block_m;
    q.unpacked_block_m = t0.block_m;
    q.sms = guard.num_sms();
    if (!features && p.batch == 1 && !env_is("LONGATTN_SPLITS", "0")) {
      const int64_t tiles = (p.max_seq_q + t0.block_m - 1) / t0.block_m * p.heads_q;
      q.splits = cuda::sm90::kv_splits(tiles, q.sms, (p.max_seq_k + t0.block_n - 1) / t0.block_n);
    }
    pack = cuda::sm90::pack_gqa_worth(q);
    if (env_is("LONGATTN_PACK_GQA", "0")) pack = false;
    if (env_is("LONGATTN_PACK_GQA", "1")) pack = true;
  }
  if (pack) ragged = features = true;
  const cuda::sm90::TileConfig tc = paged      ? cuda::sm90::paged_tile(int(p.dim_qk), int(p.dim_v))
                                    : ragged   ? cuda::sm90::ragged_tile(int(p.dim_qk), int(p.dim_v))
                                    : features ? cuda::sm90::feature_tile(int(p.dim_qk))
                                               : cuda::sm90::tile_config(int(p.dim_qk), causal, tile_variant);
  // Paged K/V, any page size: each K/V tile is loaded as boxes of 2^box_shift rows that never
  // cross a page (mainloop.cuh load_paged). Table offsets are 32-bit in the producer.
  const int box_shift = paged ? cuda::sm90::box_shift_for(p.page_size, tc.block_n) : 0;
  if (paged && box_shift < cuda::sm90::kMinBoxShift)
    return not_yet("page_table: page size " + std::to_string(p.page_size) + " (a multiple of " +
                   std::to_string(1 << cuda::sm90::kMinBoxShift) + " is needed)");
  if (paged && (p.batch - 1) * a.page_table.stride[0] + p.max_pages > INT32_MAX)
    return not_yet("page_table: 2^31 or more entries");
  if (paged && a.page_table.stride[1] != 1 && p.max_pages > 1)
    return not_yet("page_table: a non-contiguous row (stride[1] != 1)");
  if (paged && (p.num_pages > INT32_MAX || p.page_size > INT32_MAX / 2))
    return not_yet("page_table: 2^31 or more pages or keys per page");
  if (paged && a.check_page_table && !p.meta_on_host) {
    int64_t bad[3];
    if (cudaError_t e = cuda::check_page_table(a.page_table, a.seqused_k, p.page_size, p.num_pages, stream, bad);
        e != cudaSuccess)
      return cuda_error("page table check", e);
    if (bad[0] >= 0)
      return Status::Invalid("page_table: entry [" + std::to_string(bad[0]) + ", " + std::to_string(bad[1]) +
                             "] = " + std::to_string(bad[2]) + " outside [0, " + std::to_string(p.num_pages) +
                             ") pages of k");
  }
  const CUtensorMapDataType dt =
      p.in_dtype == DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;

  LaunchArgs la{};
  std::string err;
  // Paged boxes shorter than the tile carry one 64-column chunk each (tensor_map.h).
  const int kv_box_rows = paged ? 1 << box_shift : tc.block_n;
  // Grouped V (default; LONGATTN_PAGED_VGROUP=0 turns it off, A/B): boxes of 16 .. block_n / 2
  // rows load V with every 64-column chunk in one TMA, into the grouped V layout (params.h
  // v_group_shift): page 16 at hdim 128 issues 24 TMAs per key block instead of 32. H100 pbench
  // (2026-11-25, 4 x 8k, hdim 128, vs dense, full / causal): page 16 lanes 0.61 / 0.66,
  // lanes + grouped V 0.71 / 0.76 (mixed modes, since removed: K lanes + V gather 0.59 /
  // 0.63, the reverse 0.56 / 0.61, with grouped V 0.65 / 0.67).
  int bn_shift = 0;
  while ((1 << bn_shift) < tc.block_n) ++bn_shift;
  // How tiles shorter than a page are filled (page_math.h PagedMode), measured below;
  // LONGATTN_PAGED_MODE=tma / lanes / gather forces one (A/B; tests); the rule and its
  // measurements: page_math.h. The hdim-256 paged kernel has no team modes (tile_size.h
  // paged_team_ok): TMA boxes.
  const int paged_mode = paged && cuda::sm90::paged_team_ok(tc)
                             ? cuda::sm90::paged_mode_for(box_shift, tc.block_n, std::getenv("LONGATTN_PAGED_MODE"))
                             : cuda::sm90::kPagedTma;
  const bool v_grouped = paged && box_shift >= 4 && box_shift < bn_shift && paged_mode != cuda::sm90::kPagedGather &&
                         !env_is("LONGATTN_PAGED_VGROUP", "0");
  cuda::TileMapSpec mk = map_spec(a.k, dt, kv_box_rows), mv = map_spec(a.v, dt, kv_box_rows);
  if (kv_box_rows < tc.block_n) mk.box_chunks = mv.box_chunks = 1;
  if (v_grouped) mv.box_chunks = 0;
  // Grouped K (default where V is grouped; LONGATTN_PAGED_KGROUP=0 turns it off, A/B): one TMA
  // per box for K too (page 16 at hdim 128: 16 TMAs per key block instead of 24; H100 pbench
  // 2026-11-25: 0.80-0.82 / 0.82-0.83 of dense vs 0.70-0.71 / 0.73-0.74). Needs uniformly
  // strided pages (page stride = page_size x row stride) and a pool of fewer than 2^32 rows
  // (the producer's 32-bit pool row).
  const bool k_grouped = v_grouped && mk.stride_batch == mk.rows * mk.stride_row &&
                         mk.batch * mk.rows < (int64_t(1) << 32) && !env_is("LONGATTN_PAGED_KGROUP", "0");
  if (k_grouped) mk.row_groups = true;
  cuda::TileMapSpec mq = map_spec(a.q, dt, tc.block_m);
  if (pack) mq.pack_group = int(p.group);
  if (!(err = cuda::encode_tile_map(mq, &la.tm_q)).empty() ||
      !(err = cuda::encode_tile_map(mk, &la.tm_k)).empty() || !(err = cuda::encode_tile_map(mv, &la.tm_v)).empty())
    return Status::Error("CUDA backend: " + err);

  cuda::sm90::FwdParams& fp = la.p;
  fp.batch = p.batch;
  fp.heads_q = p.heads_q;
  fp.heads_kv = p.heads_kv;
  fp.group = p.group;
  fp.seq_q = p.max_seq_q;
  fp.seq_k = p.max_seq_k;
  fp.num_m_blocks = (p.max_seq_q + tc.block_m - 1) / tc.block_m;
  if (pack) {  // tiles of (batch, kv head, packed q-block): the scheduler sees heads_kv heads
    const int64_t positions = tc.block_m >> pack_shift;
    fp.heads_q = p.heads_kv;
    fp.group = 1;
    fp.pack_shift = pack_shift;
    fp.num_m_blocks = (p.max_seq_q + positions - 1) / positions;
  }
  fp.num_tiles = fp.num_m_blocks * fp.heads_q * p.batch;
  if (fp.num_tiles >= INT32_MAX - 4096) return not_yet("2^31 or more query tiles");
  fp.scale_log2 = float(double(p.scale) * 1.4426950408889634);
  fp.rescale_threshold = rescale_threshold();
  fp.causal = causal;
  fp.causal_offset = (causal || windowed) ? p.mask.offset(p.max_seq_q, p.max_seq_k) : 0;
  if (features) {
    fp.feat_scale_log2 = fp.scale_log2;
    if (p.softcap > 0.f) {
      fp.softcap_in = float(double(p.scale) / double(p.softcap));
      fp.feat_scale_log2 = float(double(p.softcap) * 1.4426950408889634);
    }
    // How the softcapped softmax runs (softcap_mode.h; default fixed); LONGATTN_SOFTCAP_MODE
    // is an A/B measurement switch (LONGATTN_SOFTCAP_POLY=1, the earlier one, = fixed8).
    // Fixed-max modes only where P keeps its range (bf16 in, cap <= 52), else fused.
    cuda::sm90::SoftcapMode mode = env_is("LONGATTN_SOFTCAP_POLY", "1")
                                       ? cuda::sm90::kCapFixedPoly8
                                       : cuda::sm90::parse_softcap_mode(std::getenv("LONGATTN_SOFTCAP_MODE"));
    if (!cuda::sm90::softcap_fixed_ok(p.in_dtype == DType::bf16, double(p.softcap)))
      mode = cuda::sm90::softcap_unfixed(mode);
    fp.softcap_mode = mode;
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
  }
  fp.out = a.out.data;
  fp.out_type = p.out_dtype == DType::bf16  ? cuda::sm90::OutType::bf16
                : p.out_dtype == DType::f16 ? cuda::sm90::OutType::f16
                                            : cuda::sm90::OutType::f32;
  if (p.q_ragged) {  // out (total_q, heads, dim), lse (heads, total_q): rows from cu_seqlens_q
    fp.out_stride_b = 0;
    fp.out_stride_s = a.out.stride[0];
    fp.out_stride_h = a.out.stride[1];
  } else {
    fp.out_stride_b = a.out.stride[0];
    fp.out_stride_s = a.out.stride[1];
    fp.out_stride_h = a.out.stride[2];
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
  if (ragged) {  // device metadata; seq_q / seq_k are the maxima (Args max_seqlen_q/k)
    if (p.q_ragged) fp.cu_seqlens_q = static_cast<const int32_t*>(a.cu_seqlens_q.data);
    if (p.kv == KvLayout::ragged) fp.cu_seqlens_k = static_cast<const int32_t*>(a.cu_seqlens_k.data);
    if (p.has_seqused_k) fp.seqused_k = static_cast<const int32_t*>(a.seqused_k.data);
    fp.offset_per_seq = (p.mask.any() && !p.mask.top_left) ? 1 : 0;
  }
  if (paged) {
    fp.page_table = static_cast<const int32_t*>(a.page_table.data);
    fp.pt_stride_b = a.page_table.stride[0];
    fp.page_size = int32_t(p.page_size);
    const cuda::sm90::PageDiv pd = cuda::sm90::make_page_div(uint32_t(p.page_size));
    fp.page_magic = pd.magic;
    fp.page_div_shift = pd.shift;
    fp.box_shift = box_shift;
    fp.v_group_shift = v_grouped ? box_shift : bn_shift;
    fp.k_grouped = k_grouped ? 1 : 0;
    fp.paged_mode = paged_mode;
    // The gather reads (num_pages, page_size, heads_kv, dim) K / V by byte offsets.
    const int64_t es = 2;  // bf16 / f16
    fp.k_bytes = static_cast<const uint8_t*>(a.k.data);
    fp.v_bytes = static_cast<const uint8_t*>(a.v.data);
    fp.k_page_bytes = a.k.stride[0] * es;
    fp.k_row_bytes = a.k.stride[1] * es;
    fp.k_head_bytes = a.k.stride[2] * es;
    fp.v_page_bytes = a.v.stride[0] * es;
    fp.v_row_bytes = a.v.stride[1] * es;
    fp.v_head_bytes = a.v.stride[2] * es;
  }
  la.num_sms = guard.num_sms();
  la.stream = stream;
  la.tile_variant = tile_variant;
  la.features = features;
  la.ragged = ragged;
  la.paged = paged;
  la.pack = pack;

  fp.pingpong = !env_is("LONGATTN_PINGPONG", "0");
  // Split-KV (schedule_rule.h kv_splits): dense batch-1 calls with too few tiles for the SMs;
  // partial O (f32) and LSE in stream-ordered scratch, merged by the combine kernel below.
  // LONGATTN_SPLITS=0 disables it, =N forces N splits (measurements and tests).
  int64_t splits = 1;
  if (!features && !split && p.batch == 1) {
    const int64_t key_blocks = (p.max_seq_k + tc.block_n - 1) / tc.block_n;
    splits = cuda::sm90::kv_splits(fp.num_tiles, la.num_sms, key_blocks);
    if (const char* e = std::getenv("LONGATTN_SPLITS")) {
      const long long n = std::atoll(e);
      if (n == 0 && e[0] == '0') splits = 1;
      if (n > 0) splits = std::min<int64_t>(n, std::max<int64_t>(1, key_blocks));
    }
    if (fp.num_tiles * splits >= INT32_MAX - 4096) splits = 1;
    if (splits > 1) {
      fp.kv_splits = int32_t(splits);
      fp.split_blocks = int32_t((key_blocks + splits - 1) / splits);
    }
  }
  float* part = nullptr;
  const int64_t part_rows = p.max_seq_q * p.heads_q;  // one split's (query, head) rows
  if (splits > 1) {
    const size_t bytes = size_t(splits * part_rows * (p.dim_v + 1)) * sizeof(float);
    if (cudaError_t e = cudaMallocAsync(reinterpret_cast<void**>(&part), bytes, stream); e != cudaSuccess)
      return cuda_error("split-KV scratch", e);
    fp.batch = splits;  // the split is the batch index (params.h)
    fp.num_tiles *= splits;
    fp.out = part;
    fp.out_type = cuda::sm90::OutType::f32;
    fp.out_stride_b = part_rows * p.dim_v;
    fp.out_stride_s = p.heads_q * p.dim_v;
    fp.out_stride_h = p.dim_v;
    fp.lse = part + splits * part_rows * p.dim_v;
    fp.lse_stride_b = part_rows;
    fp.lse_stride_h = p.max_seq_q;
    fp.lse_stride_s = 1;
  }
  // Tile order (schedule_rule.h: the budget rule; scheduler.cuh). Measurement switches:
  // LONGATTN_SECTIONS=0 puts all pairs in one section (causal: one LPT snake; non-causal:
  // heads fastest), =N forces N pairs per section; LONGATTN_TILE_LIST=0 runs ragged batches
  // on the padded (batch x q-blocks of the longest sequence) grid instead of the cost-sorted
  // tile list; LONGATTN_DYNAMIC=0 / 1 forces the static snake / the atomic counter
  // (scheduler.cuh; default: schedule_rule.h dynamic_worth).
  {
    int l2 = 0;
    if (cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, p.device.ordinal) != cudaSuccess || l2 <= 0)
      l2 = 50 << 20;
    const int64_t budget = cuda::sm90::l2_budget(a.l2_budget_bytes, std::getenv("LONGATTN_L2_BYTES"), l2);
    const int64_t grid = std::min<int64_t>(fp.num_tiles, la.num_sms);
    const int64_t pairs = fp.heads_q * fp.batch;  // packed: (batch, kv head) pairs
    fp.lpt = causal ? 1 : 0;
    fp.section_bh = cuda::sm90::section_pairs(causal, pairs, fp.num_m_blocks, grid, fp.group,
                                              p.max_seq_k * (p.dim_qk + p.dim_v) * 2 / splits, budget);
    if (const char* e = std::getenv("LONGATTN_SECTIONS")) {
      const long long n = std::atoll(e);
      if (n == 0 && e[0] == '0') fp.section_bh = pairs;
      if (n > 0) fp.section_bh = std::min<int64_t>(n, pairs);
    }
    // The tile list only where lengths can differ between sequences (packed q / k, seqused_k).
    // Paged or 192/128 calls with dense q and no seqused_k have uniform sequences: the padded
    // grid has no empty tile and keeps one head's q-blocks together (H200, paged 4 x 8k page
    // 128: 0.93x / 0.91x of dense with the list, 0.96x / 0.97x without; full / causal).
    // LONGATTN_TILE_LIST=1 forces the list (tests), =0 the padded grid.
    const bool varying = p.q_ragged || p.kv == KvLayout::ragged || p.has_seqused_k;
    // Packed GQA runs the padded grid (the list builder counts unpacked q-blocks).
    la.tile_list = ragged && !pack && (varying || env_is("LONGATTN_TILE_LIST", "1")) &&
                   !env_is("LONGATTN_TILE_LIST", "0");
    // LONGATTN_TILE_ORDER=cost: the cost-sorted item order (tile_list.cuh) instead of the
    // sequence-major one (A/B measurement).
    la.cost_order = env_is("LONGATTN_TILE_ORDER", "cost");
    // Live items <= batch x q-blocks of the longest; packed queries: <= total_q / block_m + batch.
    la.list_items = fp.batch * fp.num_m_blocks;
    if (p.q_ragged) la.list_items = std::min(la.list_items, (a.q.shape[0] + tc.block_m - 1) / tc.block_m + p.batch);
    // LONGATTN_DYNAMIC=0 / 1 forces the static snake / the counter (A/B); else the rule.
    // Chunked masks: tile cost is a sawtooth over the q-blocks (not the causal ramp the snake
    // assumes), so they take the counter. H200, 64k causal, chunk 8192: 0.96x of causal with
    // the counter (03:00 run, counter then on for every LPT call) vs 0.575x with the static
    // snake (03:56 run).
    // Ragged tile lists: the sequence-major list is a cost sawtooth too (each sequence's
    // q-blocks heaviest first, then the next sequence): H100, 64 x 100..8k causal, 0.89x of
    // dense with the static snake, 1.00x with the counter (full 0.95x / 0.96x).
    la.dynamic = env_is("LONGATTN_DYNAMIC", "1") ||
                 (!env_is("LONGATTN_DYNAMIC", "0") &&
                  (p.mask.chunk > 0 || la.tile_list ||
                   cuda::sm90::dynamic_worth((p.max_seq_k + tc.block_n - 1) / tc.block_n)));
  }

  cudaError_t e = split ? (p.in_dtype == DType::bf16 ? cuda::sm90::launch_fwd_split<InType::bf16, 192, 128>(la)
                                                    : cuda::sm90::launch_fwd_split<InType::f16, 192, 128>(la))
                 : p.in_dtype == DType::bf16 ? dispatch_dim<InType::bf16>(p.dim_qk, la)
                                             : dispatch_dim<InType::f16>(p.dim_qk, la);
  if (part) {  // split-KV: merge the partials into out / lse (batch 1: drop the batch dim)
    if (e == cudaSuccess) {
      auto dev = [&](void* data, int rank, const int64_t* shape, const int64_t* stride) {
        Tensor x;
        x.data = data;
        x.dtype = DType::f32;
        x.device = a.out.device;
        x.rank = rank;
        for (int i = 0; i < rank; ++i) {
          x.shape[i] = shape[i];
          x.stride[i] = stride[i];
        }
        return x;
      };
      const int64_t dv = p.dim_v, hq = p.heads_q, sq = p.max_seq_q;
      const int64_t op_shape[4] = {splits, sq, hq, dv}, op_stride[4] = {part_rows * dv, hq * dv, dv, 1};
      const int64_t lp_shape[3] = {splits, hq, sq}, lp_stride[3] = {part_rows, sq, 1};
      CombineArgs ca;
      ca.out_partial = dev(part, 4, op_shape, op_stride);
      ca.lse_partial = dev(part + splits * part_rows * dv, 3, lp_shape, lp_stride);
      ca.out = dev(a.out.data, 3, a.out.shape + 1, a.out.stride + 1);
      ca.out.dtype = a.out.dtype;
      if (a.lse.present()) ca.lse = dev(a.lse.data, 2, a.lse.shape + 1, a.lse.stride + 1);
      e = cuda::launch_combine(ca, stream);
    }
    const cudaError_t f = cudaFreeAsync(part, stream);
    if (e == cudaSuccess) e = f;
  }
  return e == cudaSuccess ? Status::Ok() : cuda_error("forward kernel launch", e);
}

Status cuda_combine(const CombineArgs& a) {
  const Tensor* ts[] = {&a.out_partial, &a.lse_partial, &a.out, &a.lse};
  for (const Tensor* t : ts)
    if (t->present() && t->device.kind != DeviceKind::cuda)
      return Status::Invalid("combine: all tensors must be CUDA tensors for the CUDA backend");
  cuda::DeviceGuard guard(a.out.device.ordinal);
  if (!guard.ok()) return Status::Error("CUDA backend: cannot select device");
  if (a.out.numel() == 0) return Status::Ok();
  cudaError_t e = cuda::launch_combine(a, static_cast<cudaStream_t>(a.stream));
  return e == cudaSuccess ? Status::Ok() : cuda_error("combine", e);
}

}  // namespace longattn::detail
