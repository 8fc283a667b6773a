// Validation of Args::kvcache (FlashAttention-3's serving inputs; longattn.h KvCacheArgs):
// the static checks (presence, ranks, shapes, dtypes, devices) into Problem::kvc, and the
// per-sequence checks of host-resident metadata against the cache. Like the rest of
// validation, everything here runs before any memory is written; messages name the argument.
#include <algorithm>
#include <string>
#include <utility>

#include "api/check.h"
#include "common/problem.h"

namespace longattn::detail {
namespace {

using std::to_string;

Status invalid(const std::string& s) { return Status::Invalid(s); }

int64_t read_i32(const Tensor& t, int64_t i) { return static_cast<const int32_t*>(t.data)[i * t.stride[0]]; }

// k_new / v_new: the cache's dtype, dense (batch, n, heads_kv, dim) or ragged (total, heads_kv, dim).
Status check_new(const char* name, const Tensor& t, const Problem& p, bool ragged, int64_t rows, int64_t dim) {
  const std::string n = name;
  if (t.dtype != p.in_dtype)
    return invalid(n + ": dtype " + dtype_name(t.dtype) + " differs from the cache's (k, v) " + dtype_name(p.in_dtype));
  if (ragged)
    return check_shape(name, t, {rows, p.heads_kv, dim}, "(total_new, heads_kv, dim) with cu_seqlens_k_new");
  return check_shape(name, t, {p.batch, rows, p.heads_kv, dim}, "(batch, seqlen_new, heads_kv, dim)");
}

}  // namespace

Status check_kvcache_args(const Args& a, Problem* pp) {
  Problem& p = *pp;
  const KvCacheArgs& kc = a.kvcache;
  KvCacheInfo& c = p.kvc;
  c = KvCacheInfo{};
  if (!kc.any()) return Status::Ok();  // rotary_seqlens alone is ignored, as without rotary
  c.any = true;
  const bool rotary = kc.rotary_cos.present() || kc.rotary_sin.present();
  const std::pair<const char*, const Tensor*> all[] = {
      {"k_new", &kc.k_new},
      {"v_new", &kc.v_new},
      {"cu_seqlens_k_new", &kc.cu_seqlens_k_new},
      {"cache_batch_idx", &kc.cache_batch_idx},
      {"cache_leftpad", &kc.cache_leftpad},
      {"rotary_cos", &kc.rotary_cos},
      {"rotary_sin", &kc.rotary_sin},
      {"rotary_seqlens", rotary ? &kc.rotary_seqlens : nullptr}};
  const char* first = nullptr;
  for (auto [name, t] : all) {
    if (!t || !t->present()) continue;
    if (!first) first = name;
    LONGATTN_TRY(check_geometry(name, *t));
    LONGATTN_TRY(check_device(name, *t, p.device, "q"));
  }
  if (p.kv == KvLayout::ragged)
    return invalid(std::string(first) + ": needs a dense or paged KV cache in k / v, not ragged keys (cu_seqlens_k)");
  for (auto [name, t] : all)
    if (t && t->present() && (t == &kc.cu_seqlens_k_new || t == &kc.cache_batch_idx || t == &kc.cache_leftpad ||
                              t == &kc.rotary_seqlens))
      LONGATTN_TRY(check_dtype(name, *t, {DType::i32}, "i32"));
  c.cache_rows = p.kv == KvLayout::paged ? a.page_table.shape[0] : a.k.shape[0];
  c.capacity = p.kv == KvLayout::paged ? p.max_pages * p.page_size : a.k.shape[1];

  // --- append -----------------------------------------------------------------------------
  if (kc.k_new.present() != kc.v_new.present())
    return invalid(kc.k_new.present() ? "v_new: required with k_new (new keys need their values)"
                                      : "k_new: required with v_new (new values need their keys)");
  c.append = kc.k_new.present();
  c.new_ragged = kc.cu_seqlens_k_new.present();
  if (c.new_ragged && !c.append) return invalid("cu_seqlens_k_new: only valid with k_new / v_new");
  if (c.append) {
    if (!a.seqused_k.present())
      return invalid("seqused_k: required with k_new (cache_seqlens: the cache slot where each sequence's new keys go)");
    const int rank = c.new_ragged ? 3 : 4;
    for (auto [name, t] : {std::pair{"k_new", &kc.k_new}, std::pair{"v_new", &kc.v_new}})
      if (t->rank != rank)
        return invalid(std::string(name) + ": rank " + to_string(t->rank) + ", expected " +
                       (c.new_ragged ? "3 (total_new, heads_kv, dim) with cu_seqlens_k_new"
                                     : "4 (batch, seqlen_new, heads_kv, dim)"));
    c.seqlen_new = c.new_ragged ? kc.k_new.shape[0] : kc.k_new.shape[1];
    LONGATTN_TRY(check_new("k_new", kc.k_new, p, c.new_ragged, c.seqlen_new, p.dim_qk));
    LONGATTN_TRY(check_new("v_new", kc.v_new, p, c.new_ragged, c.seqlen_new, p.dim_v));
    if (c.new_ragged)
      LONGATTN_TRY(check_shape("cu_seqlens_k_new", kc.cu_seqlens_k_new, {p.batch + 1}, "(batch + 1)"));
    else if (c.seqlen_new > c.capacity && p.batch > 0)
      return invalid("k_new: " + to_string(c.seqlen_new) + " new keys per sequence overflow the cache's " +
                     to_string(c.capacity) + " slots");
  }

  // --- cache rows and left padding ---------------------------------------------------------
  c.batch_idx = kc.cache_batch_idx.present();
  c.leftpad = kc.cache_leftpad.present();
  if (c.batch_idx) LONGATTN_TRY(check_shape("cache_batch_idx", kc.cache_batch_idx, {p.batch}, "(batch)"));
  if (c.leftpad) LONGATTN_TRY(check_shape("cache_leftpad", kc.cache_leftpad, {p.batch}, "(batch)"));

  // --- rotary -------------------------------------------------------------------------------
  if (rotary) {
    if (kc.rotary_cos.present() != kc.rotary_sin.present())
      return invalid(kc.rotary_cos.present() ? "rotary_sin: required with rotary_cos" : "rotary_cos: required with rotary_sin");
    if (!c.append)
      return invalid("rotary_cos: needs k_new / v_new (rotary embedding is applied with an append, as FlashAttention-3)");
    if (p.fp8) return Status::NotSupported("rotary_cos: rotary embedding of e4m3 (fp8) inputs is not supported");
    const Tensor& cs = kc.rotary_cos;
    if (cs.dtype != p.in_dtype && cs.dtype != DType::f32)
      return invalid(std::string("rotary_cos: dtype ") + dtype_name(cs.dtype) + " not supported, expected q's (" +
                     dtype_name(p.in_dtype) + ") or f32");
    if (kc.rotary_sin.dtype != cs.dtype)
      return invalid(std::string("rotary_sin: dtype ") + dtype_name(kc.rotary_sin.dtype) + " differs from rotary_cos's " +
                     dtype_name(cs.dtype));
    if (cs.rank != 2 || cs.shape[1] < 1 || 2 * cs.shape[1] > p.dim_qk)
      return invalid("rotary_cos: shape " + shape_str(cs) + ", expected (seqlen_ro, rotary_dim / 2) with 2 <= rotary_dim <= " +
                     to_string(p.dim_qk) + " (the head dim)");
    LONGATTN_TRY(check_shape("rotary_sin", kc.rotary_sin, {cs.shape[0], cs.shape[1]}, "(rotary_cos's shape)"));
    if (kc.rotary_seqlens.present())
      LONGATTN_TRY(check_shape("rotary_seqlens", kc.rotary_seqlens, {p.batch}, "(batch)"));
    c.rotary = true;
    c.rotary_f32 = cs.dtype == DType::f32;
    c.rotary_dim = 2 * cs.shape[1];
    c.seqlen_ro = cs.shape[0];
    const Mask& m = a.mask;
    c.rotary_per_row = m.causal || m.window_left >= 0 || m.window_right >= 0 || m.chunk_size > 0;
  }

  // --- the cache is written: it must not share memory with what the call reads or writes ---
  if (c.append) {
    const Tensor none{}, &rot_seqlens = rotary ? kc.rotary_seqlens : none;  // ignored without rotary
    LONGATTN_TRY(check_distinct_elements("k", a.k));
    LONGATTN_TRY(check_distinct_elements("v", a.v));
    const std::pair<const char*, const Tensor*> read[] = {
        {"q", &a.q}, {"k_new", &kc.k_new}, {"v_new", &kc.v_new}, {"cu_seqlens_k_new", &kc.cu_seqlens_k_new},
        {"cache_batch_idx", &kc.cache_batch_idx}, {"cache_leftpad", &kc.cache_leftpad},
        {"rotary_cos", &kc.rotary_cos}, {"rotary_sin", &kc.rotary_sin},
        {"rotary_seqlens", &rot_seqlens}, {"seqused_k", &a.seqused_k},
        {"page_table", &a.page_table}, {"sinks", &a.sinks}, {"cu_seqlens_q", &a.cu_seqlens_q},
        {"seqused_q", &a.seqused_q}, {"q_descale", &a.q_descale}, {"k_descale", &a.k_descale},
        {"v_descale", &a.v_descale}};
    for (auto [name, t] : read) {
      LONGATTN_TRY(check_no_overlap("k", a.k, name, *t));
      LONGATTN_TRY(check_no_overlap("v", a.v, name, *t));
    }
  }
  return Status::Ok();
}

Status check_kvcache_sequence(const Args& a, const Problem& p, int64_t b, const SeqInfo& s) {
  const KvCacheInfo& c = p.kvc;
  const KvCacheArgs& kc = a.kvcache;
  const std::string at = "[" + to_string(b) + "]";
  if (c.batch_idx && (s.kv_row < 0 || s.kv_row >= c.cache_rows))
    return invalid("cache_batch_idx: entry " + at + " = " + to_string(s.kv_row) + " outside [0, " +
                   to_string(c.cache_rows) + ") (" + (p.kv == KvLayout::paged ? "page_table's rows" : "k's batch") + ")");
  if (p.has_seqused_k && (s.cache_end < 0 || s.cache_end > c.capacity))
    return invalid("seqused_k: entry " + at + " = " + to_string(s.cache_end) + " outside [0, " + to_string(c.capacity) +
                   "] (the cache's slots)");
  if (c.leftpad && (s.k_start < 0 || s.k_start > s.cache_end))
    return invalid("cache_leftpad: entry " + at + " = " + to_string(s.k_start) + " outside [0, " +
                   to_string(s.cache_end) + "] (0 .. that sequence's seqused_k)");
  if (c.append && s.cache_end + s.new_len > c.capacity)
    return invalid("k_new: sequence " + to_string(b) + " appends " + to_string(s.new_len) + " keys at slot " +
                   to_string(s.cache_end) + " (seqused_k), past the cache's " + to_string(c.capacity) + " slots");
  if (p.kv == KvLayout::paged) {  // every page the call reads or writes: slots [leftpad, end + new)
    const Tensor& pt = a.page_table;
    const int64_t end = s.cache_end + s.new_len;
    for (int64_t i = s.k_start / p.page_size; i * p.page_size < end; ++i) {
      const int64_t e = static_cast<const int32_t*>(pt.data)[s.kv_row * pt.stride[0] + i * pt.stride[1]];
      if (e < 0 || e >= p.num_pages)
        return invalid("page_table: entry [" + to_string(s.kv_row) + ", " + to_string(i) + "] = " + to_string(e) +
                       " outside [0, " + to_string(p.num_pages) + ") pages of k");
    }
  }
  if (c.rotary) {
    if (kc.rotary_seqlens.present() && s.rot0 < 0)
      return invalid("rotary_seqlens: entry " + at + " = " + to_string(s.rot0) + " is negative");
    const int64_t q_pos = c.rotary_per_row ? s.q_len : std::min<int64_t>(s.q_len, 1);
    const int64_t need = std::max(s.new_len, q_pos);
    if (need > 0 && s.rot0 + need > c.seqlen_ro)
      return invalid("rotary_cos: sequence " + to_string(b) + " uses rotary positions up to " +
                     to_string(s.rot0 + need - 1) + ", but the tables have " + to_string(c.seqlen_ro) + " rows");
  }
  return Status::Ok();
}

}  // namespace longattn::detail
