// A tiny C ABI over longattn::forward for the Python benchmark (loaded with ctypes): raw
// device pointers of contiguous (batch, seq, heads, dim) tensors, a stream, shapes.
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/overrides.h"
#include "longattn/longattn.h"

namespace {
// Overrides for the calls that follow (longattn_bench_set_overrides); default: the rules.
longattn::detail::Overrides g_overrides;
// Args::sm_margin for the calls that follow (the same spec's sm_margin key; 0: the whole GPU).
int g_sm_margin = 0;

void copy_err(const longattn::Status& s, char* err, int err_len) {
  if (err && err_len > 0) {
    std::strncpy(err, s.message().c_str(), size_t(err_len - 1));
    err[err_len - 1] = 0;
  }
}
// Every entry point ends here: CUDA backend on the caller's stream; 0 or 1 + message.
int run(longattn::Args& a, void* stream, char* err, int err_len) {
  a.backend = longattn::Backend::cuda;
  a.stream = stream;
  if (g_sm_margin > 0) a.sm_margin = g_sm_margin;
  const longattn::Status s = longattn::detail::forward_with(a, g_overrides);
  if (s.ok()) return 0;
  copy_err(s, err, err_len);
  return 1;
}
}  // namespace

extern "C" {

/// Sets the internal overrides (src/common/overrides.h) for every later call, from a spec of
/// comma-separated key=value pairs; "" restores the shipped rules. Keys: sections (N; 0: one
/// section), splits (N; 0: none), tile_list, dynamic, section_list, section_rotate, pack_gqa,
/// softcap_fixed, fp8_upcast, fp8_vt_global, chunk_batch (rule|off|on),
/// paged_fill (rule|tma|lanes|gather),
/// paged_group_k, paged_group_v (0|1), rescale_threshold (float; 0: always rescale),
/// cta_clock (a device address in decimal: the dense kinds' per-CTA times, Overrides::cta_clock); and one
/// Args field, sm_margin (N >= 0: the grid of a GPU whose other work holds N SMs).
/// Returns 0, or 1 with a message naming the bad key or value.
int longattn_bench_set_overrides(const char* spec, char* err, int err_len) {
  using namespace longattn::detail;
  Overrides o;
  int sm_margin = 0;
  std::string s = spec ? spec : "";
  auto fail = [&](const std::string& what) {
    copy_err(longattn::Status::Invalid("overrides: " + what), err, err_len);
    return 1;
  };
  auto force = [](const std::string& v, Force* f) {
    if (v == "rule") *f = Force::rule;
    else if (v == "off" || v == "0") *f = Force::off;
    else if (v == "on" || v == "1") *f = Force::on;
    else return false;
    return true;
  };
  size_t at = 0;
  while (at < s.size()) {
    size_t end = s.find(',', at);
    if (end == std::string::npos) end = s.size();
    const std::string item = s.substr(at, end - at);
    at = end + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string::npos) return fail("'" + item + "' is not key=value");
    const std::string k = item.substr(0, eq), v = item.substr(eq + 1);
    bool ok = true;
    if (k == "sections") {
      o.sections = std::atoll(v.c_str());
    } else if (k == "splits") {
      o.kv_splits = std::atoll(v.c_str());
    } else if (k == "tile_list") {
      ok = force(v, &o.tile_list);
    } else if (k == "dynamic") {
      ok = force(v, &o.dynamic);
    } else if (k == "section_list") {
      ok = force(v, &o.section_list);
    } else if (k == "section_rotate") {
      ok = force(v, &o.section_rotate);
    } else if (k == "pack_gqa") {
      ok = force(v, &o.pack_gqa);
    } else if (k == "fp8_upcast") {
      ok = force(v, &o.fp8_upcast);
    } else if (k == "fp8_vt_global") {
      ok = force(v, &o.fp8_vt_global);
    } else if (k == "chunk_batch") {
      ok = force(v, &o.chunk_batch);
    } else if (k == "softcap_fixed") {
      ok = force(v, &o.softcap_fixed);
    } else if (k == "paged_fill") {
      if (v == "rule") o.paged_fill = PagedFill::rule;
      else if (v == "tma") o.paged_fill = PagedFill::tma;
      else if (v == "lanes") o.paged_fill = PagedFill::lanes;
      else if (v == "gather") o.paged_fill = PagedFill::gather;
      else ok = false;
    } else if (k == "paged_group_k") {
      o.paged_group_k = v != "0";
    } else if (k == "paged_group_v") {
      o.paged_group_v = v != "0";
    } else if (k == "cta_clock") {
      char* e = nullptr;
      const unsigned long long addr = std::strtoull(v.c_str(), &e, 10);
      ok = !v.empty() && v[0] != '-' && *e == 0 && addr != ULLONG_MAX;
      o.cta_clock = addr;
    } else if (k == "rescale_threshold") {
      o.rescale_threshold = std::strtof(v.c_str(), nullptr);
    } else if (k == "sm_margin") {
      char* e = nullptr;
      const long n = std::strtol(v.c_str(), &e, 10);
      ok = !v.empty() && *e == 0 && n >= 0 && n < 1024;
      sm_margin = int(n);
    } else {
      return fail("unknown key '" + k + "'");
    }
    if (!ok) return fail("bad value '" + v + "' for " + k);
  }
  g_overrides = o;
  g_sm_margin = sm_margin;
  return 0;
}

int longattn_bench_forward_ex(void* q, void* k, void* v, void* out, void* lse, int dtype,
                              int64_t batch, int64_t seq_q, int64_t seq_k, int64_t heads_q,
                              int64_t heads_kv, int64_t dim, int causal, float scale, float softcap,
                              void* sinks, int64_t window_left, int64_t window_right, int64_t chunk,
                              void* stream, char* err, int err_len);

/// Runs forward on the CUDA backend. dtype: 0 bf16, 1 f16 (out has the same dtype); lse may
/// be null; scale <= 0 means 1/sqrt(dim). Returns 0 on success, else writes a message to err.
int longattn_bench_forward(void* q, void* k, void* v, void* out, void* lse, int dtype,
                           int64_t batch, int64_t seq_q, int64_t seq_k, int64_t heads_q,
                           int64_t heads_kv, int64_t dim, int causal, float scale, void* stream,
                           char* err, int err_len) {
  return longattn_bench_forward_ex(q, k, v, out, lse, dtype, batch, seq_q, seq_k, heads_q, heads_kv,
                                   dim, causal, scale, 0.0f, nullptr, -1, -1, 0, stream, err,
                                   err_len);
}

/// longattn_bench_forward with the issue-5 options: softcap (0: off), sinks (device float32
/// per query head, or null), window_left / window_right (-1: off), chunk (0: off).
int longattn_bench_forward_ex(void* q, void* k, void* v, void* out, void* lse, int dtype,
                              int64_t batch, int64_t seq_q, int64_t seq_k, int64_t heads_q,
                              int64_t heads_kv, int64_t dim, int causal, float scale, float softcap,
                              void* sinks, int64_t window_left, int64_t window_right, int64_t chunk,
                              void* stream, char* err, int err_len) {
  using namespace longattn;
  const DType t = dtype == 0 ? DType::bf16 : DType::f16;
  const Device g{DeviceKind::cuda, 0};
  Args a;
  a.q = make_tensor(q, t, {batch, seq_q, heads_q, dim}, g);
  a.k = make_tensor(k, t, {batch, seq_k, heads_kv, dim}, g);
  a.v = make_tensor(v, t, {batch, seq_k, heads_kv, dim}, g);
  a.out = make_tensor(out, t, {batch, seq_q, heads_q, dim}, g);
  if (lse) a.lse = make_tensor(lse, DType::f32, {batch, heads_q, seq_q}, g);
  if (sinks) a.sinks = make_tensor(sinks, DType::f32, {heads_q}, g);
  a.mask.causal = causal != 0;
  a.mask.window_left = window_left;
  a.mask.window_right = window_right;
  a.mask.chunk_size = chunk;
  a.softcap = softcap;
  if (scale > 0) a.softmax_scale = scale;
  return run(a, stream, err, err_len);
}

int longattn_bench_forward_fp8_mask(void* q, void* k, void* v, void* out, void* lse, void* q_descale,
                                    void* k_descale, void* v_descale, int64_t batch, int64_t seq_q,
                                    int64_t seq_k, int64_t heads_q, int64_t heads_kv, int64_t dim,
                                    int causal, int out_dtype, int64_t window_left, int64_t window_right,
                                    int64_t chunk, void* stream, char* err, int err_len);

/// fp8 (e4m3) dense q / k / v (batch, seq, heads, dim) with device float32 descales
/// (batch, heads_kv) each (dequantized x = stored x * descale); out (batch, seq_q, heads_q,
/// dim) of out_dtype 0 bf16, 1 f16, 2 f32; lse may be null; scale 1/sqrt(dim).
int longattn_bench_forward_fp8(void* q, void* k, void* v, void* out, void* lse, void* q_descale,
                               void* k_descale, void* v_descale, int64_t batch, int64_t seq_q,
                               int64_t seq_k, int64_t heads_q, int64_t heads_kv, int64_t dim,
                               int causal, int out_dtype, void* stream, char* err, int err_len) {
  return longattn_bench_forward_fp8_mask(q, k, v, out, lse, q_descale, k_descale, v_descale, batch, seq_q, seq_k,
                                         heads_q, heads_kv, dim, causal, out_dtype, -1, -1, 0, stream, err, err_len);
}

/// longattn_bench_forward_fp8 with a sliding window: window_left / window_right keys before /
/// after the diagonal (-1: unbounded).
int longattn_bench_forward_fp8_ex(void* q, void* k, void* v, void* out, void* lse, void* q_descale,
                                  void* k_descale, void* v_descale, int64_t batch, int64_t seq_q,
                                  int64_t seq_k, int64_t heads_q, int64_t heads_kv, int64_t dim,
                                  int causal, int out_dtype, int64_t window_left, int64_t window_right,
                                  void* stream, char* err, int err_len) {
  return longattn_bench_forward_fp8_mask(q, k, v, out, lse, q_descale, k_descale, v_descale, batch, seq_q, seq_k,
                                         heads_q, heads_kv, dim, causal, out_dtype, window_left, window_right, 0,
                                         stream, err, err_len);
}

/// longattn_bench_forward_fp8_ex with a chunk too (chunk keys per chunk, 0: none).
int longattn_bench_forward_fp8_mask(void* q, void* k, void* v, void* out, void* lse, void* q_descale,
                                    void* k_descale, void* v_descale, int64_t batch, int64_t seq_q,
                                    int64_t seq_k, int64_t heads_q, int64_t heads_kv, int64_t dim,
                                    int causal, int out_dtype, int64_t window_left, int64_t window_right,
                                    int64_t chunk, void* stream, char* err, int err_len) {
  using namespace longattn;
  const Device g{DeviceKind::cuda, 0};
  const DType ot = out_dtype == 1 ? DType::f16 : out_dtype == 2 ? DType::f32 : DType::bf16;
  Args a;
  a.q = make_tensor(q, DType::e4m3, {batch, seq_q, heads_q, dim}, g);
  a.k = make_tensor(k, DType::e4m3, {batch, seq_k, heads_kv, dim}, g);
  a.v = make_tensor(v, DType::e4m3, {batch, seq_k, heads_kv, dim}, g);
  a.out = make_tensor(out, ot, {batch, seq_q, heads_q, dim}, g);
  if (lse) a.lse = make_tensor(lse, DType::f32, {batch, heads_q, seq_q}, g);
  a.q_descale = make_tensor(q_descale, DType::f32, {batch, heads_kv}, g);
  a.k_descale = make_tensor(k_descale, DType::f32, {batch, heads_kv}, g);
  a.v_descale = make_tensor(v_descale, DType::f32, {batch, heads_kv}, g);
  a.mask.causal = causal != 0;
  a.mask.window_left = window_left;
  a.mask.window_right = window_right;
  a.mask.chunk_size = chunk;
  return run(a, stream, err, err_len);
}

/// Ragged batch (packed (total, heads, dim) q/k/v/out, device int32 cu_seqlens of length
/// batch+1 shared by q and k), on the CUDA backend.
int longattn_bench_forward_ragged(void* q, void* k, void* v, void* out, void* cu_seqlens, int64_t batch,
                                  int64_t total, int64_t max_len, int64_t heads_q, int64_t heads_kv,
                                  int64_t dim, int causal, void* stream, char* err, int err_len) {
  using namespace longattn;
  const Device g{DeviceKind::cuda, 0};
  Args a;
  a.q = make_tensor(q, DType::bf16, {total, heads_q, dim}, g);
  a.k = make_tensor(k, DType::bf16, {total, heads_kv, dim}, g);
  a.v = make_tensor(v, DType::bf16, {total, heads_kv, dim}, g);
  a.out = make_tensor(out, DType::bf16, {total, heads_q, dim}, g);
  a.cu_seqlens_q = make_tensor(cu_seqlens, DType::i32, {batch + 1}, g);
  a.cu_seqlens_k = a.cu_seqlens_q;
  a.max_seqlen_q = a.max_seqlen_k = max_len;
  a.mask.causal = causal != 0;
  return run(a, stream, err, err_len);
}

/// Paged K/V (bf16): dense q / out (batch, seq_q, heads_q, dim), k / v pages (num_pages,
/// page_size, heads_kv, dim), device int32 page table (batch, max_pages), optional device
/// int32 seqused_k (batch; null: every sequence holds max_pages * page_size keys).
int longattn_bench_forward_paged(void* q, void* k, void* v, void* out, void* page_table, void* seqused_k,
                                 int64_t batch, int64_t seq_q, int64_t num_pages, int64_t page_size,
                                 int64_t max_pages, int64_t heads_q, int64_t heads_kv, int64_t dim, int causal,
                                 void* stream, char* err, int err_len) {
  using namespace longattn;
  const Device g{DeviceKind::cuda, 0};
  Args a;
  a.q = make_tensor(q, DType::bf16, {batch, seq_q, heads_q, dim}, g);
  a.k = make_tensor(k, DType::bf16, {num_pages, page_size, heads_kv, dim}, g);
  a.v = make_tensor(v, DType::bf16, {num_pages, page_size, heads_kv, dim}, g);
  a.out = make_tensor(out, DType::bf16, {batch, seq_q, heads_q, dim}, g);
  a.page_table = make_tensor(page_table, DType::i32, {batch, max_pages}, g);
  if (seqused_k) a.seqused_k = make_tensor(seqused_k, DType::i32, {batch}, g);
  a.mask.causal = causal != 0;
  return run(a, stream, err, err_len);
}

/// FlashAttention-3's kvcache serving call (bf16, issue 17): dense q / out (batch, seq_q,
/// heads_q, dim); the cache dense (batch, slots, heads_kv, dim) when page_table is null, else
/// pages (pool, slots = page size, heads_kv, dim) with a device int32 page table (batch,
/// max_pages); device int32 cache_seqlens (batch). k_new / v_new (batch, seqlen_new, heads_kv,
/// dim) are appended (null: attention only over cache_seqlens keys); cos / sin (seqlen_ro,
/// rotary_dim / 2) bf16 rotate q and the new keys (null: no rotary); GPT-NeoX unless
/// interleaved. The caches are written in place.
int longattn_bench_forward_kvcache(void* q, void* k_cache, void* v_cache, void* out, void* page_table,
                                   void* cache_seqlens, void* k_new, void* v_new, void* cos, void* sin, int64_t batch,
                                   int64_t seq_q, int64_t pool, int64_t slots, int64_t max_pages, int64_t seqlen_new,
                                   int64_t heads_q, int64_t heads_kv, int64_t dim, int64_t seqlen_ro,
                                   int64_t rotary_dim, int causal, int interleaved, void* stream, char* err,
                                   int err_len) {
  using namespace longattn;
  const Device g{DeviceKind::cuda, 0};
  Args a;
  a.q = make_tensor(q, DType::bf16, {batch, seq_q, heads_q, dim}, g);
  a.k = make_tensor(k_cache, DType::bf16, {pool, slots, heads_kv, dim}, g);
  a.v = make_tensor(v_cache, DType::bf16, {pool, slots, heads_kv, dim}, g);
  a.out = make_tensor(out, DType::bf16, {batch, seq_q, heads_q, dim}, g);
  if (page_table) a.page_table = make_tensor(page_table, DType::i32, {batch, max_pages}, g);
  a.seqused_k = make_tensor(cache_seqlens, DType::i32, {batch}, g);
  if (k_new) {
    a.kvcache.k_new = make_tensor(k_new, DType::bf16, {batch, seqlen_new, heads_kv, dim}, g);
    a.kvcache.v_new = make_tensor(v_new, DType::bf16, {batch, seqlen_new, heads_kv, dim}, g);
  }
  if (cos) {
    a.kvcache.rotary_cos = make_tensor(cos, DType::bf16, {seqlen_ro, rotary_dim / 2}, g);
    a.kvcache.rotary_sin = make_tensor(sin, DType::bf16, {seqlen_ro, rotary_dim / 2}, g);
  }
  a.kvcache.rotary_interleaved = interleaved != 0;
  a.mask.causal = causal != 0;
  return run(a, stream, err, err_len);
}

/// Dense bf16 q / k (batch, seq, heads, dim_qk), v (batch, seq, heads_kv, dim_v), out
/// (batch, seq, heads_q, dim_v): head dims that differ (192 / 128), on the CUDA backend.
int longattn_bench_forward_split(void* q, void* k, void* v, void* out, int64_t batch, int64_t seq, int64_t heads_q,
                                 int64_t heads_kv, int64_t dim_qk, int64_t dim_v, int causal, void* stream, char* err,
                                 int err_len) {
  using namespace longattn;
  const Device g{DeviceKind::cuda, 0};
  Args a;
  a.q = make_tensor(q, DType::bf16, {batch, seq, heads_q, dim_qk}, g);
  a.k = make_tensor(k, DType::bf16, {batch, seq, heads_kv, dim_qk}, g);
  a.v = make_tensor(v, DType::bf16, {batch, seq, heads_kv, dim_v}, g);
  a.out = make_tensor(out, DType::bf16, {batch, seq, heads_q, dim_v}, g);
  a.mask.causal = causal != 0;
  return run(a, stream, err, err_len);
}
}
