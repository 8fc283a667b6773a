// Validation of forward arguments and construction of the normalized detail::Problem.
// Every check runs before any memory is written; the first failure is returned with a
// message naming the argument, what was expected and what was given.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "api/check.h"
#include "common/problem.h"

namespace longattn::detail {
namespace {

using std::to_string;

Status invalid(const std::string& s) { return Status::Invalid(s); }

int64_t read_i32(const Tensor& t, int64_t i) {
  return static_cast<const int32_t*>(t.data)[i * t.stride[0]];
}

// Host-resident cu_seqlens: length batch+1, starts at 0, non-decreasing, ends within
// `total` rows of the tensor it indexes. Also returns the largest sequence length.
Status check_cu_seqlens(const char* name, const Tensor& cu, int64_t total, const char* total_name,
                        int64_t* max_len) {
  std::string n = name;
  const int64_t len = cu.shape[0];
  if (read_i32(cu, 0) != 0)
    return invalid(n + ": first entry must be 0, got " + to_string(read_i32(cu, 0)));
  *max_len = 0;
  for (int64_t i = 1; i < len; ++i) {
    int64_t prev = read_i32(cu, i - 1), cur = read_i32(cu, i);
    if (cur < prev)
      return invalid(n + ": not non-decreasing, entry [" + to_string(i) + "] = " + to_string(cur) +
                     " < entry [" + to_string(i - 1) + "] = " + to_string(prev));
    if (cur - prev > *max_len) *max_len = cur - prev;
  }
  int64_t last = read_i32(cu, len - 1);
  if (last > total)
    return invalid(n + ": last entry " + to_string(last) + " is past the " + to_string(total) +
                   " rows of " + total_name);
  return Status::Ok();
}

Status check_max_seqlen(const char* name, int64_t given, int64_t actual) {
  if (given > 0 && given < actual)
    return invalid(std::string(name) + ": " + to_string(given) +
                   " is below the longest sequence (" + to_string(actual) + ")");
  return Status::Ok();
}

// Args::cp_world / cp_rank (zigzag context parallelism), on dense q / k / v: the shapes of
// longattn.h's contract; sets the Problem's cp fields and the whole sequence's key count.
Status check_cp(const Args& a, Problem* p) {
  if (p->q_ragged) return invalid("cp_world: needs dense q, k and v (no cu_seqlens_q / cu_seqlens_k / page_table)");
  const int64_t w = a.cp_world;
  if (a.cp_rank < 0 || a.cp_rank >= w)
    return invalid("cp_rank: " + to_string(a.cp_rank) + " outside [0, " + to_string(w) + ") (cp_world ranks)");
  if (p->batch != 1)
    return invalid("q: batch " + to_string(p->batch) + " with cp_world, expected 1 (one rank's shard of one sequence)");
  const int64_t rows = a.q.shape[1];
  if (rows < 2 || rows % 2 != 0)
    return invalid("q: " + to_string(rows) + " rows with cp_world, expected 2c > 0 (the rank's two chunks of c)");
  const int64_t c = rows / 2;
  if (a.k.shape[0] != w || a.k.shape[1] != rows)
    return invalid("k: shape " + shape_str(a.k) + " with cp_world " + to_string(w) + ", expected (" + to_string(w) +
                   ", " + to_string(rows) + ", heads_kv, dim) (every rank's shard, rank-major)");
  if (a.mask.window_left >= 0 || a.mask.window_right >= 0 || a.mask.chunk_size > 0)
    return invalid("mask: windows and chunks are not supported with cp_world (causal or full only)");
  if (a.seqused_k.present() || a.seqused_q.present())
    return invalid("cp_world: cannot be combined with seqused_q / seqused_k");
  if (w > (int64_t(1) << 20) || c > (int64_t(1) << 40) / (2 * w))
    return invalid("cp_world: " + to_string(w) + " ranks of " + to_string(rows) + " rows, a sequence too long");
  p->cp_world = w;
  p->cp_rank = a.cp_rank;
  p->cp_chunk = c;
  p->max_seq_k = 2 * w * c;
  return Status::Ok();
}

}  // namespace

Status build_problem(const Args& a, Problem* out_problem) {
  Problem p;
  // --- presence, geometry, device ------------------------------------------------------
  LONGATTN_TRY(check_present("q", a.q));
  LONGATTN_TRY(check_present("k", a.k));
  LONGATTN_TRY(check_present("v", a.v));
  LONGATTN_TRY(check_present("out", a.out));
  const std::pair<const char*, const Tensor*> all[] = {
      {"q", &a.q},
      {"k", &a.k},
      {"v", &a.v},
      {"out", &a.out},
      {"lse", &a.lse},
      {"cu_seqlens_q", &a.cu_seqlens_q},
      {"cu_seqlens_k", &a.cu_seqlens_k},
      {"seqused_q", &a.seqused_q},
      {"seqused_k", &a.seqused_k},
      {"page_table", &a.page_table},
      {"sinks", &a.sinks},
      {"q_descale", &a.q_descale},
      {"k_descale", &a.k_descale},
      {"v_descale", &a.v_descale}};
  // --- layouts and ranks (first: a wrong rank explains every later mismatch) ---------
  p.q_ragged = a.cu_seqlens_q.present();
  if (a.page_table.present() && a.cu_seqlens_k.present())
    return invalid(
        "cu_seqlens_k: cannot be combined with page_table (paged K/V lengths come from "
        "seqused_k)");
  p.kv = a.page_table.present()    ? KvLayout::paged
         : a.cu_seqlens_k.present() ? KvLayout::ragged
                                    : KvLayout::dense;
  const int q_rank = p.q_ragged ? 3 : 4;
  if (a.q.rank != q_rank)
    return invalid("q: rank " + to_string(a.q.rank) + ", expected " +
                   (p.q_ragged ? "3 (total_q, heads, dim) with cu_seqlens_q"
                               : "4 (batch, seq, heads, dim) without cu_seqlens_q"));
  const int kv_rank = p.kv == KvLayout::ragged ? 3 : 4;
  const char* kv_form = p.kv == KvLayout::ragged  ? "3 (total_k, heads_kv, dim) with cu_seqlens_k"
                        : p.kv == KvLayout::paged ? "4 (num_pages, page_size, heads_kv, dim) with page_table"
                                                  : "4 (batch, seq, heads_kv, dim)";
  for (auto [name, t] : {std::pair{"k", &a.k}, std::pair{"v", &a.v}})
    if (t->rank != kv_rank)
      return invalid(std::string(name) + ": rank " + to_string(t->rank) + ", expected " + kv_form);
  if (a.out.rank != q_rank)
    return invalid("out: rank " + to_string(a.out.rank) + ", expected " + to_string(q_rank) +
                   " (q's layout)");

  // --- geometry and device ------------------------------------------------------------
  p.device = a.q.device;
  if (p.device.kind == DeviceKind::cuda && p.device.ordinal < 0)
    return invalid("q: negative CUDA device ordinal " + to_string(p.device.ordinal));
  for (auto [name, t] : all) {
    if (!t->present()) continue;
    LONGATTN_TRY(check_geometry(name, *t));
    LONGATTN_TRY(check_device(name, *t, p.device, "q"));
  }
  p.meta_on_host = p.device.kind == DeviceKind::cpu;

  // --- dtypes ----------------------------------------------------------------------------
  LONGATTN_TRY(check_dtype("q", a.q, {DType::bf16, DType::f16, DType::f32, DType::e4m3},
                           "bf16, f16, f32 or e4m3"));
  p.in_dtype = a.q.dtype;
  p.fp8 = p.in_dtype == DType::e4m3;
  for (auto [name, t] : {std::pair{"k", &a.k}, std::pair{"v", &a.v}})
    if (t->dtype != p.in_dtype)
      return invalid(std::string(name) + ": dtype " + dtype_name(t->dtype) + " differs from q's " +
                     dtype_name(p.in_dtype) + " (q, k and v must share one dtype)");
  LONGATTN_TRY(check_dtype("out", a.out, {DType::bf16, DType::f16, DType::f32}, "bf16, f16 or f32"));
  p.out_dtype = a.out.dtype;
  if (a.lse.present()) LONGATTN_TRY(check_dtype("lse", a.lse, {DType::f32}, "f32"));
  for (auto [name, t] : {std::pair{"cu_seqlens_q", &a.cu_seqlens_q},
                         std::pair{"cu_seqlens_k", &a.cu_seqlens_k},
                         std::pair{"seqused_q", &a.seqused_q},
                         std::pair{"seqused_k", &a.seqused_k},
                         std::pair{"page_table", &a.page_table}})
    if (t->present()) LONGATTN_TRY(check_dtype(name, *t, {DType::i32}, "i32"));
  for (auto [name, t] : {std::pair{"sinks", &a.sinks}, std::pair{"q_descale", &a.q_descale},
                         std::pair{"k_descale", &a.k_descale},
                         std::pair{"v_descale", &a.v_descale}})
    if (t->present()) LONGATTN_TRY(check_dtype(name, *t, {DType::f32}, "f32"));

  // --- heads and head dims ---------------------------------------------------------------
  p.heads_q = a.q.shape[q_rank - 2];
  p.dim_qk = a.q.shape[q_rank - 1];
  p.heads_kv = a.k.shape[kv_rank - 2];
  p.dim_v = a.v.shape[kv_rank - 1];
  if (p.heads_q < 1) return invalid("q: " + to_string(p.heads_q) + " heads, expected at least 1");
  if (p.heads_kv < 1) return invalid("k: " + to_string(p.heads_kv) + " kv heads, expected at least 1");
  if (p.dim_qk < 1 || p.dim_qk > 256)
    return invalid("q: head dim " + to_string(p.dim_qk) + " unsupported, expected 1..256");
  if (a.k.shape[kv_rank - 1] != p.dim_qk)
    return invalid("k: head dim " + to_string(a.k.shape[kv_rank - 1]) + " differs from q's head dim " +
                   to_string(p.dim_qk));
  // dim_v up to 512 (FA3's q/k 64 with v 512, MLA-style); backends may serve fewer.
  if (p.dim_v < 1 || p.dim_v > 512)
    return invalid("v: head dim " + to_string(p.dim_v) + " unsupported, expected 1..512");
  if (a.v.shape[kv_rank - 2] != p.heads_kv)
    return invalid("v: " + to_string(a.v.shape[kv_rank - 2]) + " heads differ from k's " +
                   to_string(p.heads_kv) + " kv heads");
  if (p.heads_q % p.heads_kv != 0)
    return invalid("k: " + to_string(p.heads_kv) + " kv heads do not divide " + to_string(p.heads_q) +
                   " query heads");
  p.group = p.heads_q / p.heads_kv;

  // --- batch and sequence extents --------------------------------------------------------
  if (p.q_ragged) {
    if (a.cu_seqlens_q.rank != 1 || a.cu_seqlens_q.shape[0] < 1)
      return invalid("cu_seqlens_q: shape " + shape_str(a.cu_seqlens_q) +
                     ", expected (batch + 1) with batch >= 0");
    p.batch = a.cu_seqlens_q.shape[0] - 1;
  } else {
    p.batch = a.q.shape[0];
    p.max_seq_q = a.q.shape[1];
  }
  const int64_t total_q = p.q_ragged ? a.q.shape[0] : 0;
  if (a.cp_world < 0) return invalid("cp_world: " + to_string(a.cp_world) + ", expected >= 0 (0: off)");
  if (a.cp_world == 0 && a.cp_rank != 0)
    return invalid("cp_rank: " + to_string(a.cp_rank) + " without cp_world, expected 0");
  switch (p.kv) {
    case KvLayout::dense:  // with kvcache.cache_batch_idx, k's batch holds the cache rows it indexes
      if (a.cp_world > 0) {
        LONGATTN_TRY(check_cp(a, &p));
        break;
      }
      if (a.k.shape[0] != p.batch && !a.kvcache.cache_batch_idx.present())
        return invalid("k: batch " + to_string(a.k.shape[0]) + " differs from q's batch " +
                       to_string(p.batch));
      p.max_seq_k = a.k.shape[1];
      break;
    case KvLayout::ragged:
      LONGATTN_TRY(check_shape("cu_seqlens_k", a.cu_seqlens_k, {p.batch + 1}, "(batch + 1)"));
      break;
    case KvLayout::paged:
      p.num_pages = a.k.shape[0];
      p.page_size = a.k.shape[1];
      if (p.page_size < 1)
        return invalid("k: page size " + to_string(p.page_size) + ", expected at least 1");
      if (a.kvcache.cache_batch_idx.present() && a.page_table.rank == 2) {
        // rows are indexed by cache_batch_idx (checked with it)
      } else if (a.page_table.rank != 2 || a.page_table.shape[0] != p.batch) {
        return invalid("page_table: shape " + shape_str(a.page_table) + ", expected (" +
                       to_string(p.batch) + ", max_pages) (batch, max_pages)");
      }
      p.max_pages = a.page_table.shape[1];
      p.max_seq_k = p.max_pages * p.page_size;
      break;
  }
  for (int d = 0; d < kv_rank - 2; ++d)
    if (a.v.shape[d] != a.k.shape[d])
      return invalid("v: shape " + shape_str(a.v) + " does not match k's " + shape_str(a.k) +
                     " outside the head dim");
  for (int d = 0; d < q_rank - 1; ++d)
    if (a.out.shape[d] != a.q.shape[d])
      return invalid("out: shape " + shape_str(a.out) + " does not match q's " + shape_str(a.q) +
                     " outside the head dim");
  if (a.out.shape[q_rank - 1] != p.dim_v)
    return invalid("out: head dim " + to_string(a.out.shape[q_rank - 1]) + ", expected v's head dim " +
                   to_string(p.dim_v));
  if (a.seqused_k.present()) {
    LONGATTN_TRY(check_shape("seqused_k", a.seqused_k, {p.batch}, "(batch)"));
    p.has_seqused_k = true;
  }
  LONGATTN_TRY(check_kvcache_args(a, &p));
  if (a.seqused_q.present()) {
    LONGATTN_TRY(check_shape("seqused_q", a.seqused_q, {p.batch}, "(batch)"));
    p.has_seqused_q = true;
  }

  // --- optional per-head / per-(batch, kv head) tensors ----------------------------------
  if (a.lse.present()) {
    if (p.q_ragged)
      LONGATTN_TRY(check_shape("lse", a.lse, {p.heads_q, total_q}, "(heads_q, total_q)"));
    else
      LONGATTN_TRY(check_shape("lse", a.lse, {p.batch, p.heads_q, p.max_seq_q}, "(batch, heads_q, seq_q)"));
    p.has_lse = true;
  }
  if (a.sinks.present()) {
    LONGATTN_TRY(check_shape("sinks", a.sinks, {p.heads_q}, "(heads_q)"));
    p.has_sinks = true;
  }
  for (auto [name, t] : {std::pair{"q_descale", &a.q_descale}, std::pair{"k_descale", &a.k_descale},
                         std::pair{"v_descale", &a.v_descale}}) {
    if (p.fp8 && !t->present())
      return invalid(std::string(name) + ": required (float32 (batch, heads_kv)) for e4m3 inputs");
    if (!p.fp8 && t->present())
      return invalid(std::string(name) + ": only valid with e4m3 inputs, but q is " +
                     dtype_name(p.in_dtype));
    if (t->present())
      LONGATTN_TRY(check_shape(name, *t, {p.batch, p.heads_kv}, "(batch, heads_kv)"));
  }

  // --- scalars ---------------------------------------------------------------------------
  p.scale = a.softmax_scale ? *a.softmax_scale : float(1.0 / std::sqrt(double(p.dim_qk)));
  if (!std::isfinite(p.scale) || p.scale <= 0.0f)
    return invalid("softmax_scale: " + to_string(p.scale) + ", expected finite and > 0");
  if (!(a.softcap >= 0.0f) || !std::isfinite(a.softcap))
    return invalid("softcap: " + to_string(a.softcap) + ", expected finite and >= 0 (0: off)");
  p.softcap = a.softcap;
  const Mask& m = a.mask;
  if (m.window_left < -1)
    return invalid("mask.window_left: " + to_string(m.window_left) + ", expected >= -1 (-1: unbounded)");
  if (m.window_right < -1)
    return invalid("mask.window_right: " + to_string(m.window_right) + ", expected >= -1 (-1: unbounded)");
  if (m.causal && m.window_right > 0)
    return invalid("mask.window_right: " + to_string(m.window_right) +
                   " conflicts with causal (a causal query sees no later key); use 0 or -1");
  if (m.chunk_size < 0)
    return invalid("mask.chunk_size: " + to_string(m.chunk_size) + ", expected >= 0 (0: off)");
  if (m.align != CausalAlign::bottom_right && m.align != CausalAlign::top_left)
    return invalid("mask.align: unknown value " + to_string(int(m.align)));
  p.mask.causal = m.causal;
  p.mask.top_left = m.align == CausalAlign::top_left;
  // Any extent past 2^40 acts like 2^40 on every sequence int32 offsets can describe; the
  // clamp keeps p - window_left, p + window_right + 1 and chunk arithmetic from overflowing
  // (callers pass INT64_MAX-like values for "huge").
  constexpr int64_t kHuge = int64_t(1) << 40;
  p.mask.window_left = std::min(m.window_left, kHuge);
  p.mask.window_right = std::min(m.window_right, kHuge);
  p.mask.chunk = std::min(m.chunk_size, kHuge);
  if (a.num_threads < 0)
    return invalid("num_threads: " + to_string(a.num_threads) + ", expected >= 0 (0: automatic)");
  if (int(a.cpu_isa) > int(CpuIsa::amx))
    return invalid("cpu_isa: unknown value " + to_string(int(a.cpu_isa)));
  if (a.cp_world > 0 && (p.q_ragged || p.kv != KvLayout::dense))
    return invalid("cp_world: needs dense q, k and v (no cu_seqlens_q / cu_seqlens_k / page_table)");
  if (a.cp_world > 0 && p.kvc.any) return invalid("cp_world: cannot be combined with kvcache inputs");
  if (a.sm_margin < 0) return invalid("sm_margin: " + to_string(a.sm_margin) + ", expected >= 0 (SMs left free)");
  if (a.l2_budget_bytes < 0)
    return invalid("l2_budget_bytes: " + to_string(a.l2_budget_bytes) + ", expected >= 0 (0: from the device)");
  if (a.max_seqlen_q < 0)
    return invalid("max_seqlen_q: " + to_string(a.max_seqlen_q) + ", expected >= 0");
  if (a.max_seqlen_k < 0)
    return invalid("max_seqlen_k: " + to_string(a.max_seqlen_k) + ", expected >= 0");

  // --- metadata contents (host) or the declared maxima (device) --------------------------
  if (p.meta_on_host) {
    if (p.q_ragged)
      LONGATTN_TRY(check_cu_seqlens("cu_seqlens_q", a.cu_seqlens_q, total_q, "q", &p.max_seq_q));
    if (p.has_seqused_q) {
      // Rows used per sequence, within the rows it has. Ragged: the maximum is over the used
      // rows; dense keeps the tensor extent (its row stride arithmetic).
      int64_t max_used = 0;
      for (int64_t b = 0; b < p.batch; ++b) {
        const int64_t cap = p.q_ragged ? read_i32(a.cu_seqlens_q, b + 1) - read_i32(a.cu_seqlens_q, b)
                                       : p.max_seq_q;
        const int64_t used = read_i32(a.seqused_q, b);
        if (used < 0 || used > cap)
          return invalid("seqused_q: entry [" + to_string(b) + "] = " + to_string(used) +
                         " outside [0, " + to_string(cap) + "] (that sequence's query rows)");
        max_used = std::max(max_used, used);
      }
      if (p.q_ragged) p.max_seq_q = max_used;
    }
    if (p.q_ragged) LONGATTN_TRY(check_max_seqlen("max_seqlen_q", a.max_seqlen_q, p.max_seq_q));
    int64_t max_k = 0;
    if (p.kv == KvLayout::ragged)
      LONGATTN_TRY(check_cu_seqlens("cu_seqlens_k", a.cu_seqlens_k, a.k.shape[0], "k", &max_k));
    if (p.kvc.new_ragged) {
      int64_t max_new = 0;
      LONGATTN_TRY(check_cu_seqlens("cu_seqlens_k_new", a.kvcache.cu_seqlens_k_new, p.kvc.seqlen_new, "k_new", &max_new));
    }
    // Capacity of each sequence, then the keys actually used.
    int64_t max_used = 0;
    for (int64_t b = 0; b < p.batch; ++b) {
      if (p.kvc.any) {  // a dense or paged cache: rows, left padding, the append, pages, rotary
        const SeqInfo s = seq_info(a, p, b);
        LONGATTN_TRY(check_kvcache_sequence(a, p, b, s));
        max_used = std::max(max_used, s.k_len);
        continue;
      }
      int64_t cap = p.kv == KvLayout::ragged ? read_i32(a.cu_seqlens_k, b + 1) - read_i32(a.cu_seqlens_k, b)
                                             : p.max_seq_k;
      int64_t used = cap;
      if (p.has_seqused_k) {
        used = read_i32(a.seqused_k, b);
        if (used < 0 || used > cap)
          return invalid("seqused_k: entry [" + to_string(b) + "] = " + to_string(used) +
                         " outside [0, " + to_string(cap) + "] (that sequence's key capacity)");
      }
      if (p.kv == KvLayout::paged) {
        // Only the pages that hold used keys are read; entries past them may be padding.
        const Tensor& pt = a.page_table;
        for (int64_t i = 0; i * p.page_size < used; ++i) {
          int64_t e = static_cast<const int32_t*>(pt.data)[b * pt.stride[0] + i * pt.stride[1]];
          if (e < 0 || e >= p.num_pages)
            return invalid("page_table: entry [" + to_string(b) + ", " + to_string(i) + "] = " +
                           to_string(e) + " outside [0, " + to_string(p.num_pages) + ") pages of k");
        }
      }
      if (used > max_used) max_used = used;
    }
    if (p.kv == KvLayout::ragged) {
      LONGATTN_TRY(check_max_seqlen("max_seqlen_k", a.max_seqlen_k, max_k));
      p.max_seq_k = max_k;
    }
    if (p.kv == KvLayout::paged && (p.has_seqused_k || p.kvc.any)) p.max_seq_k = max_used;
  } else {
    // Device metadata cannot be read here: the caller's maxima bound the work. Ragged tensors
    // with no rows need none (every sequence is empty, whatever cu_seqlens holds).
    if (p.q_ragged) {
      if (a.max_seqlen_q < 1 && total_q > 0)
        return invalid("max_seqlen_q: required (> 0) when cu_seqlens_q is on " + device_str(p.device) +
                       ", got " + to_string(a.max_seqlen_q));
      p.max_seq_q = total_q > 0 ? a.max_seqlen_q : 0;
    }
    if (p.kv == KvLayout::ragged) {
      if (a.max_seqlen_k < 1 && a.k.shape[0] > 0)
        return invalid("max_seqlen_k: required (> 0) when cu_seqlens_k is on " + device_str(p.device) +
                       ", got " + to_string(a.max_seqlen_k) + " (0 only with k of no rows)");
      p.max_seq_k = a.k.shape[0] > 0 ? a.max_seqlen_k : 0;
    } else if (p.kv == KvLayout::paged && a.max_seqlen_k > 0 && a.max_seqlen_k < p.max_seq_k) {
      p.max_seq_k = a.max_seqlen_k;  // a tighter bound the caller promises (seqused_k)
    }
  }

  // --- aliasing: outputs must not share bytes with any input, each other or themselves --
  LONGATTN_TRY(check_distinct_elements("out", a.out));
  if (a.lse.present()) LONGATTN_TRY(check_distinct_elements("lse", a.lse));
  for (auto [name, t] : all) {
    if (t == &a.out || t == &a.lse) continue;
    LONGATTN_TRY(check_no_overlap("out", a.out, name, *t));
    LONGATTN_TRY(check_no_overlap("lse", a.lse, name, *t));
  }
  LONGATTN_TRY(check_no_overlap("lse", a.lse, "out", a.out));
  const KvCacheArgs& kc = a.kvcache;
  for (auto [name, t] : {std::pair{"k_new", &kc.k_new}, std::pair{"v_new", &kc.v_new},
                         std::pair{"cu_seqlens_k_new", &kc.cu_seqlens_k_new},
                         std::pair{"cache_batch_idx", &kc.cache_batch_idx},
                         std::pair{"cache_leftpad", &kc.cache_leftpad}, std::pair{"rotary_cos", &kc.rotary_cos},
                         std::pair{"rotary_sin", &kc.rotary_sin}}) {
    LONGATTN_TRY(check_no_overlap("out", a.out, name, *t));
    LONGATTN_TRY(check_no_overlap("lse", a.lse, name, *t));
  }

  *out_problem = p;
  return Status::Ok();
}

}  // namespace longattn::detail

namespace longattn {
Status validate(const Args& a) {
  detail::Problem p;
  return detail::build_problem(a, &p);
}
}  // namespace longattn
