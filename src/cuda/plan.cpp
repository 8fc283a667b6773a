// plan_forward: the rules that pick the kernel, tile, layouts and schedule of one call.
#include "cuda/plan.h"

#include <algorithm>
#include <string>
#include <vector>

#include "cuda/fp8_vt.h"
#include "cuda/sm90/fp8_scale.h"
#include "cuda/sm90/pack_gqa.h"
#include "cuda/sm90/page_math.h"
#include "cuda/sm90/schedule_rule.h"
#include "cuda/sm90/softcap_mode.h"

namespace longattn::cuda {
namespace {

using detail::Force;
using detail::KvLayout;
using sm90::Kernel;

bool decide(Force f, bool rule) { return f == Force::rule ? rule : f == Force::on; }

// The keys a query row sees on average, over the rows that see any (causal: either alignment,
// seq_q and seq_k of the longest sequences; context parallelism: a rank's two zigzag chunks of
// c rows see W c keys together on average).
int64_t mean_visible_keys(const detail::Problem& p) {
  const int64_t sq = p.max_seq_q, sk = p.max_seq_k;
  if (!p.mask.causal || sq <= 0 || sk <= 0) return sk;
  if (p.cp_chunk > 0) return p.cp_world * p.cp_chunk;
  // Row i sees min(sk, i + 1 + off) keys (none below 1): a ramp over rows [first, ramp_end),
  // then sk each.
  const int64_t off = p.mask.offset(sq, sk);
  const int64_t first = std::max<int64_t>(0, -off);
  const int64_t ramp_end = std::clamp<int64_t>(sk - off, first, sq);
  const double ramp = double(ramp_end - first) * double(first + 1 + off + ramp_end + off) / 2;
  return first < sq ? int64_t((ramp + double(sq - ramp_end) * double(sk)) / double(sq - first)) : 0;
}

// Split-KV of a dense batch-1 call whose tiles fill too few SMs (schedule_rule.h kv_splits).
int64_t plan_splits(const detail::Problem& p, const detail::Overrides& ov, const sm90::TileConfig& t,
                    int64_t tiles, int num_sms) {
  const int64_t key_blocks = (p.max_seq_k + t.block_n - 1) / t.block_n;
  int64_t s = sm90::kv_splits(tiles, num_sms, key_blocks);
  if (ov.kv_splits == 0) s = 1;
  if (ov.kv_splits > 0) s = std::min<int64_t>(ov.kv_splits, std::max<int64_t>(1, key_blocks));
  if (tiles * s >= INT32_MAX - 4096) s = 1;
  return s;
}

}  // namespace

Status plan_forward(const Args& a, const detail::Problem& p, const detail::Overrides& ov, int num_sms,
                    int64_t l2_bytes, ForwardPlan* out) {
  ForwardPlan pl;
  const bool causal = p.mask.causal;
  const bool windowed = p.mask.windowed();
  // Sliding windows (not chunks): past the first window's worth of rows every q-tile sees about
  // as many keys, a flat tile cost.
  const bool sliding = p.mask.window_left >= 0 || p.mask.window_right >= 0;
  const bool paged = p.kv == KvLayout::paged;
  // The compiled head dims that serve the call (forward_sm90.cpp check_supported found them).
  const sm90::HeadDims kd = sm90::kernel_dims(int(p.dim_qk), int(p.dim_v), p.fp8);
  const int d = kd.qk, dv = kd.v;
  pl.dim_qk = d;
  pl.dim_v = dv;
  pl.col_maps = d != p.dim_qk || dv != p.dim_v;
  const bool split_dims = d != dv;
  // Which kernel: the dense kind serves plain attention; sinks, softcap, windows and chunks
  // the feature kind; per-sequence extents (ragged q / k, seqused_q / seqused_k), paged K/V
  // and split head dims the ragged / paged kinds (a dense q keeps its layout there).
  bool ragged = p.q_ragged || p.kv == KvLayout::ragged || p.has_seqused_k || p.has_seqused_q || paged || split_dims;
  // Head dims narrower than the kernel's: the feature kinds (kernel_config.cuh kColMaps).
  bool features = p.has_sinks || p.softcap > 0.f || windowed || ragged || pl.col_maps;
  // The feature kernels' mask arithmetic is 32-bit (mask.cuh).
  const bool feat_fits = 2 * (p.max_seq_q + p.max_seq_k) <= INT32_MAX - 4096;
  if (features && !feat_fits)
    return Status::NotSupported("sinks/softcap/windows/chunks with seq_q + seq_k beyond 2^30 not supported by the CUDA backend yet");
  const sm90::TileConfig unpacked_tile = paged      ? sm90::paged_tile(d, dv)
                                         : ragged   ? sm90::ragged_tile(d, dv)
                                         : features ? sm90::feature_tile(d)
                                                    : sm90::dense_tile(d);
  // Packed GQA (pack_gqa.h): the ragged (paged) kernel with tiles of the g query heads of one
  // kv head, decided against the unpacked call's split-KV (dense batch-1 calls only).
  const int pack_block_m = sm90::ragged_tile(d).block_m;
  // (Not fp8 above 128: dense_vt is its only kernel there.)
  // Zigzag context parallelism (Args::cp_world): the dense and feature kinds only.
  const bool cp = p.cp_chunk > 0;
  const int pack_shift = cp || split_dims || !feat_fits || (p.fp8 && d > 128) ? 0 : sm90::pack_gqa_shift(p.group, pack_block_m);
  bool pack = false;
  if (pack_shift > 0) {
    sm90::PackQuery q;
    q.group = p.group;
    q.seq_q = p.max_seq_q;
    q.batch = p.batch;
    q.heads_q = p.heads_q;
    q.block_m = pack_block_m;
    q.unpacked_block_m = unpacked_tile.block_m;
    q.sms = num_sms;
    if (!features && p.batch == 1) {
      const int64_t tiles = (p.max_seq_q + unpacked_tile.block_m - 1) / unpacked_tile.block_m * p.heads_q;
      q.splits = plan_splits(p, ov, unpacked_tile, tiles, num_sms);
    }
    pack = decide(ov.pack_gqa, sm90::pack_gqa_worth(q));
  }
  if (pack) ragged = features = true;
  // fp8: every feature runs on the ragged kind (one fp8 tile, fewer instantiations).
  if (p.fp8 && features && !ragged) ragged = true;
  pl.kernel = paged      ? (pack ? Kernel::paged_packed : Kernel::paged)
              : ragged   ? (pack ? Kernel::ragged_packed : Kernel::ragged)
              : features ? Kernel::feature
                         : Kernel::dense;
  // fp8 plain attention: dense_vt (V transposed in global memory by a pre-pass, Q K^T one
  // block ahead) above head dim 128 (its only fp8 kind) and at 128 where rows see many keys.
  // (At 128 the transpose's grid must fit CUDA's limits, fp8_vt.h; above 128 the call took the
  // upcast where it does not: forward_sm90.cpp fp8_upcast_needed.)
  if (p.fp8 && pl.kernel == Kernel::dense) {
    const bool fits = cuda::fp8_vt_fits(a.v.shape[0], a.v.shape[1], a.v.shape[2]);
    if (d > 128 || (fits && decide(ov.fp8_vt_global, sm90::fp8_vt_worth(mean_visible_keys(p)))))
      pl.kernel = Kernel::dense_vt;
  }
  pl.tile = p.fp8 ? sm90::fp8_tile(pl.kernel, d, dv) : sm90::kernel_tile(pl.kernel, d, dv);
  const sm90::TileConfig& tc = pl.tile;
  if (cp) {  // a q tile inside one chunk (one position offset), a K/V block inside one chunk
    if (!sm90::cp_compiled(pl.kernel, tc, p.fp8, dv))
      return Status::NotSupported(
          "cp_world: this call's kernel (fp8 other than plain attention at head dim 128, head dim 256 with sinks or "
          "softcap, or split head dims) not supported by the CUDA backend yet");
    if (p.cp_chunk % tc.block_m != 0 || p.cp_chunk % tc.block_n != 0)
      return Status::NotSupported("cp_world: chunk of " + std::to_string(p.cp_chunk) + " rows (q rows / 2), expected a multiple of " +
                                  std::to_string(tc.block_m) + " and " + std::to_string(tc.block_n) + " for the CUDA backend");
  }

  // Paged K/V, any page size: each K/V tile is loaded as boxes of 2^box_shift rows that never
  // cross a page (paged_kv.cuh). Table offsets are 32-bit in the producer.
  if (paged) {
    pl.box_shift = sm90::box_shift_for(p.page_size, tc.block_n);
    if (pl.box_shift < sm90::kMinBoxShift)
      return Status::NotSupported("page_table: page size " + std::to_string(p.page_size) + " (a multiple of " +
                                  std::to_string(1 << sm90::kMinBoxShift) + " is needed) not supported by the CUDA backend yet");
    int bn_shift = 0;
    while ((1 << bn_shift) < tc.block_n) ++bn_shift;
    // How tiles shorter than a page are filled (page_math.h paged_mode_for); the hdim-256
    // paged kernel has no team modes (tile_size.h paged_team_ok): TMA boxes.
    pl.paged_mode = sm90::kPagedTma;
    if (sm90::paged_team_ok(tc) && !p.fp8) {  // fp8: TMA boxes (kernel_config.cuh kPagedTeam)
      pl.paged_mode = sm90::paged_mode_for(pl.box_shift, tc.block_n);
      if (ov.paged_fill != detail::PagedFill::rule && (1 << pl.box_shift) < tc.block_n)
        pl.paged_mode = int(ov.paged_fill);
      // Column-addressed maps: the gather copies a row's 16-byte units up to the kernel's dim
      // (past a narrower one it would read the next head): the lanes' per-chunk TMA boxes.
      if (pl.col_maps && pl.paged_mode == sm90::kPagedGather) pl.paged_mode = sm90::kPagedLanes;
    }
    // Grouped V: boxes of 16 .. block_n / 2 rows load V with every 64-column chunk in one TMA,
    // into the grouped V layout (params.h v_group_shift). Grouped K likewise (params.h
    // k_grouped), where the pages are uniformly strided (page stride = page_size x row
    // stride) and the pool has fewer than 2^32 rows (the producer's 32-bit pool row).
    // Not with column-addressed maps (a grouped box carries every chunk).
    pl.v_grouped = pl.box_shift >= 4 && pl.box_shift < bn_shift && pl.paged_mode != sm90::kPagedGather &&
                   ov.paged_group_v && !pl.col_maps;
    pl.k_grouped = pl.v_grouped && a.k.stride[0] == a.k.shape[1] * a.k.stride[1] &&
                   a.k.shape[0] * a.k.shape[1] < (int64_t(1) << 32) && ov.paged_group_k;
  }

  // The scheduler's tile space: (batch, head, q-block); packed: (batch, kv head, packed q-block).
  pl.pack_shift = pack ? pack_shift : 0;
  pl.sched_heads = pack ? p.heads_kv : p.heads_q;
  const int64_t rows_per_tile = pack ? (tc.block_m >> pack_shift) : tc.block_m;
  pl.num_m_blocks = (p.max_seq_q + rows_per_tile - 1) / rows_per_tile;
  const int64_t tiles = pl.num_m_blocks * pl.sched_heads * p.batch;
  if (tiles >= INT32_MAX - 4096) return Status::NotSupported("2^31 or more query tiles not supported by the CUDA backend yet");

  // Split-KV: the dense kind only (a sink would count once per split).
  if (!features && p.batch == 1 && !cp) pl.kv_splits = plan_splits(p, ov, tc, tiles, num_sms);
  // q-tiles anchored at the last row (plan.h q_shift): the 192-row tiles only (the dense and
  // feature kinds' hdim-64 tile), which waste up to two thirds of a partial tile; such calls
  // store O directly (launch_args.cpp encode_out_map). Not under windows or chunks: their
  // tile costs are flat or a sawtooth, not the causal ramp, so moving the partial tile gains
  // nothing or moves the tiles across chunk edges (docs/history/PERFORMANCE-sessions-16-33.md,
  // "Windows and chunks: the dynamic counter, the anchor").
  const bool anchor_kind = sm90::kernel_dense(pl.kernel) || (pl.kernel == Kernel::feature && !windowed);
  if (anchor_kind && causal && !cp && pl.kv_splits == 1 && tc.block_m % 128 != 0 && p.max_seq_q % tc.block_m != 0)
    pl.q_shift = tc.block_m - p.max_seq_q % tc.block_m;

  // Softcap: the fixed-max update where P keeps its range (bf16 in, cap <= 52), else fused.
  if (p.softcap > 0.f) {
    const bool fixed = decide(ov.softcap_fixed, true) &&
                       sm90::softcap_fixed_ok(p.in_dtype == DType::bf16, double(p.softcap));
    pl.softcap_mode = fixed ? sm90::kCapFixed : sm90::kCapFused;
  }
  pl.rescale_threshold = ov.rescale_threshold;
  pl.cta_clock = ov.cta_clock;
  // fp8: P must stay inside e4m3 (fp8_scale.h): never a larger threshold than the bound.
  if (p.fp8) pl.rescale_threshold = std::min(pl.rescale_threshold, sm90::kFp8RescaleThreshold);

  // Tile order (schedule_rule.h: the budget rule; scheduler.cuh).
  const int64_t budget = sm90::l2_budget(a.l2_budget_bytes, l2_bytes);
  const int64_t grid = std::min<int64_t>(tiles * pl.kv_splits, num_sms);
  const int64_t pairs = pl.sched_heads * p.batch * pl.kv_splits;
  pl.section_bh = sm90::section_pairs(causal, pairs, pl.num_m_blocks, grid, pack ? 1 : p.group,
                                      p.max_seq_k * (p.dim_qk + p.dim_v) * 2 / pl.kv_splits, budget,
                                      tc.lpt_sections);
  if (ov.sections == 0) pl.section_bh = pairs;
  if (ov.sections > 0) pl.section_bh = std::min<int64_t>(ov.sections, pairs);
  // The tile list only where lengths can differ between sequences (packed q / k, seqused_q /
  // seqused_k): uniform paged or 192/128 calls keep the padded grid, which has no empty tile
  // there and keeps one head's q-blocks together. Packed GQA runs the padded grid (the list
  // builder counts unpacked q-blocks). And only past one wave of padded tiles: within one,
  // every CTA runs at most one tile whatever the order, empty tiles end at once, and the list
  // would only add its pre-kernel and stream-ordered allocation to the call (the host time of
  // small calls: decode steps, short varlen batches).
  const bool varying = (p.q_ragged || p.kv == KvLayout::ragged || p.has_seqused_k || p.has_seqused_q) &&
                       tiles > num_sms;
  pl.tile_list = sm90::kernel_ragged(pl.kernel) && !pack && decide(ov.tile_list, varying);
  // Live items <= batch x q-blocks of the longest; packed queries: <= total_q / block_m + batch.
  pl.list_items = p.batch * pl.num_m_blocks;
  if (p.q_ragged) pl.list_items = std::min(pl.list_items, (a.q.shape[0] + tc.block_m - 1) / tc.block_m + p.batch);
  // The counter: long causal tiles (schedule_rule.h dynamic_worth), causal chunks (their tile
  // cost is a sawtooth over the q-blocks, not the causal ramp the snake assumes), sliding
  // windows (causal: a flat cost, on which the snake's partial round of each section leaves
  // CTAs idle: docs/history/PERFORMANCE-sessions-16-33.md,
  // "Windows and chunks: the dynamic counter, the anchor";
  // not causal: where the round-robin deal of the edge q-blocks, which see fewer keys, leaves
  // CTAs unbalanced, schedule_rule.h deal_unbalanced) and ragged tile lists (sequence-major: a
  // cost sawtooth too).
  // And causal calls that share the GPU (Args::sm_margin): the kernels beside them start and
  // end at their own times, so the CTAs do not start or run together as the static snake
  // assumes, and its sections, chosen for whole rounds of the grid, balance worse on such
  // grids (schedule_rule.h dynamic_on_shared_gpu). Plain non-causal calls keep the
  // round-robin deal (their tiles cost the same), and so do non-causal chunks (not measured
  // with the counter; the launch needed LPT for it until session 26).
  const int64_t key_blocks = (p.max_seq_k + tc.block_n - 1) / tc.block_n;
  // A both-sided window (both sides bounded, no causal mask or chunk: what was measured) whose
  // static deal is unbalanced; one-sided non-causal windows keep the deal.
  bool both_sided = false;
  if (!causal && p.mask.window_left >= 0 && p.mask.window_right >= 0 && p.mask.chunk == 0 && !pl.tile_list &&
      !cp && sm90::dynamic_compiled(pl.kernel, tc, d, p.fp8) && sm90::deal_in_reach(pairs * pl.num_m_blocks, grid)) {
    // Key blocks per q-block, as the kernel visits them (mask.cuh block_range: from the first
    // row's lowest key to the last row's highest, none where that is empty); rows_per_tile
    // positions; every pair alike (the dense extents).
    std::vector<int64_t> blocks(size_t(pl.num_m_blocks));
    const int64_t off = p.mask.offset(p.max_seq_q, p.max_seq_k);
    for (int64_t m = 0; m < pl.num_m_blocks; ++m) {
      const int64_t first = m * rows_per_tile + off, last = std::min(p.max_seq_q, (m + 1) * rows_per_tile) - 1 + off;
      const int64_t lo = std::max<int64_t>(0, first - p.mask.window_left);
      const int64_t hi = std::min(p.max_seq_k, last + p.mask.window_right + 1);
      blocks[size_t(m)] = hi > lo ? (hi + tc.block_n - 1) / tc.block_n - lo / tc.block_n : 0;
    }
    both_sided = sm90::deal_unbalanced(blocks, pairs, grid);
  }
  pl.dynamic = decide(ov.dynamic, both_sided || pl.tile_list ||
                                      (causal && (p.mask.chunk > 0 || sliding || sm90::dynamic_worth(key_blocks) ||
                                                  (a.sm_margin > 0 && sm90::dynamic_on_shared_gpu(key_blocks)))));
  // Windows (causal or not) and chunks where the kernel has no counter (tile_size.h
  // dynamic_compiled: the three-warpgroup hdim-64 tile, the fp8 kinds): every pair in one
  // section instead of L2 sections. A tile reads only its window's or chunk's keys, so the
  // sections buy little. Causal (LPT): one snake over every pair, where each section's
  // partial snake round left CTAs idle on these flat or sawtooth tile costs. Non-causal (no
  // LPT): the order becomes q-block-major over the pairs (scheduler.cuh decode) instead of
  // one-pair sections; measured faster too. Taken where the running tiles share pairs (pairs
  // <= grid) or their windows' K / V (counted at 16 bits) stay within twice the L2 together;
  // past that, every running tile streams its own window from DRAM and the sections were
  // faster. fp8 causal calls take it past that bound too: they won there. Only where the
  // window or chunk hides keys (a window as long as the keys is the plain mask's order).
  // docs/history/PERFORMANCE-sessions-16-33.md,
  // "Windows and chunks without the counter", "Windows and chunks on one
  // snake: fp8, non-causal, the L2 bound". Not paged K/V: not measured there.
  if (ov.sections < 0 && !paged && (p.mask.chunk > 0 || sliding) && !sm90::dynamic_compiled(pl.kernel, tc, d, p.fp8)) {
    // A row's keys: the window's two sides (causal: none right of the diagonal), the chunk.
    const int64_t left = p.mask.window_left >= 0 ? p.mask.window_left : p.max_seq_k;
    const int64_t right = causal ? 0 : p.mask.window_right >= 0 ? p.mask.window_right : p.max_seq_k;
    int64_t span = std::min<int64_t>(left + right, p.max_seq_k);
    if (p.mask.chunk > 0) span = std::min<int64_t>(span, p.mask.chunk);
    // kv heads among the running tiles (packed GQA: its pairs are kv heads already).
    const int64_t group = pack ? 1 : p.group;
    const int64_t kv_running = (std::min(pairs, grid) + group - 1) / group;
    const int64_t window_bytes = kv_running * (span + tc.block_m) * (p.dim_qk + p.dim_v) * 2;
    if (span < p.max_seq_k && ((p.fp8 && causal) || pairs <= grid || window_bytes <= 2 * l2_bytes))
      pl.section_bh = pairs;
  }
  // Causal on the dense kinds without the sectioned snake (hdim 256: bf16 / f16 and e4m3; fp8
  // dense_vt at 128; head dims below 256 that run on the 256 kernels take the feature kind and keep
  // its snake): the sectioned order as a device list (KernelConfig kSectionList), which keeps the
  // running tiles' K/V inside the L2 where the global snake streams it from DRAM. The launch builds
  // it only where the L2 rule cuts sections (launch_impl.cuh want_slist). Short calls (at most 16
  // q-blocks) too: with its sections dealt from rotating first CTAs the list ran them faster than
  // the ragged kind's sequence-major list (docs/history/PERFORMANCE-sessions-16-33.md,
  // "The section list's sections from
  // rotating first CTAs"). Context parallelism keeps the snake (its tiles' costs are not the causal
  // ramp the list's LPT order assumes).
  pl.section_list = causal && sm90::kernel_dense(pl.kernel) && !tc.lpt_sections && !cp && decide(ov.section_list, true);
  pl.section_rotate = int8_t(ov.section_rotate);  // the rule needs the grid: the launch applies it
  *out = pl;
  return Status::Ok();
}

}  // namespace longattn::cuda
