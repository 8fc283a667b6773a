// kvcache test problems and the check of one call (kvcache_case.h).
#include "support/kvcache_case.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>

#include "common/problem.h"
#include "support/random.h"

namespace longattn::testing {
namespace {

using detail::load_as_double;
using detail::store_from_float;

// Element offset of cache slot t of cache row r, kv head hk (dense or paged).
int64_t slot_offset(const Tensor& c, const Tensor& pt, int64_t page_size, int64_t r, int64_t t, int64_t hk) {
  if (page_size > 0) {
    const int64_t page = static_cast<const int32_t*>(pt.data)[r * pt.stride[0] + (t / page_size) * pt.stride[1]];
    return page * c.stride[0] + (t % page_size) * c.stride[1] + hk * c.stride[2];
  }
  return r * c.stride[0] + t * c.stride[1] + hk * c.stride[2];
}

int mantissa_bits(DType t) {
  switch (t) {
    case DType::bf16: return 7;
    case DType::f16: return 10;
    case DType::e4m3: return 3;
    default: return 23;
  }
}

// Every element of two same-shaped views, row-major: "" or the first mismatch.
std::string compare_cache(const char* name, const Tensor& got, const Tensor& want, double ulps) {
  int64_t idx[kMaxRank] = {};
  for (int i = 0; i < got.rank; ++i)
    if (got.shape[i] == 0) return "";
  const double rel = ulps * std::ldexp(1.0, 1 - mantissa_bits(got.dtype));
  while (true) {
    int64_t og = 0, ow = 0;
    for (int i = 0; i < got.rank; ++i) og += idx[i] * got.stride[i], ow += idx[i] * want.stride[i];
    const double x = load_as_double(got.data, got.dtype, og), y = load_as_double(want.data, want.dtype, ow);
    const bool same = (std::isnan(x) && std::isnan(y)) || x == y || (ulps > 0 && std::fabs(x - y) <= rel * std::fabs(y));
    if (!same) {
      std::ostringstream os;
      os << name << "[";
      for (int i = 0; i < got.rank; ++i) os << (i ? ", " : "") << idx[i];
      os << "] is " << x << ", expected " << y << (std::isnan(y) ? " (a slot the call must not write)" : "");
      return os.str();
    }
    int d = got.rank - 1;
    while (d >= 0 && ++idx[d] == got.shape[d]) idx[d--] = 0;
    if (d < 0) return "";
  }
}

}  // namespace

std::string describe(const KvCaseSpec& s) {
  std::ostringstream os;
  os << "b" << s.batch << " sq" << s.seq_q << " h" << s.heads_q << "/" << s.heads_kv << " d" << s.dim_qk << "/"
     << s.dim_v << " " << dtype_name(s.dtype) << " cap" << s.capacity;
  if (s.page_size > 0) os << " paged" << s.page_size;
  if (s.append) os << " new" << s.seqlen_new << (s.ragged_new ? "(ragged)" : "");
  if (s.ragged_q) os << " ragged_q";
  if (s.batch_idx) os << " batch_idx";
  if (s.leftpad) os << " leftpad";
  if (s.rotary_dim > 0)
    os << " rotary" << s.rotary_dim << (s.interleaved ? "(gptj" : "(neox") << (s.rotary_f32 ? ",f32" : "")
       << (s.rotary_seqlens ? ",seqlens)" : ")");
  if (s.mask.causal) os << " causal";
  if (s.mask.window_left >= 0 || s.mask.window_right >= 0)
    os << " window(" << s.mask.window_left << "," << s.mask.window_right << ")";
  if (s.mask.chunk_size > 0) os << " chunk" << s.mask.chunk_size;
  if (s.softcap > 0) os << " softcap";
  if (s.sinks) os << " sinks";
  os << " seed=" << s.seed;
  return os.str();
}

KvCase make_kv_case(const KvCaseSpec& spec) {
  KvCase c;
  c.spec = spec;
  const KvCaseSpec& s = spec;
  Rng rng(s.seed, 0x2545F4914F6CDD1Dull);  // its own stream, not testing.cpp's
  const int64_t B = s.batch, rows = s.batch_idx ? B + 2 : B;
  const int64_t ps = s.page_size, max_pages = ps > 0 ? (s.capacity + ps - 1) / ps : 0;
  const int64_t cap = ps > 0 ? max_pages * ps : s.capacity;
  Args& a = c.args;
  a.backend = Backend::reference;

  // Sequences: cache rows, new keys, ends (cache_seqlens), left padding, query rows.
  std::vector<int32_t> row(static_cast<size_t>(B));
  {
    std::vector<int32_t> perm(static_cast<size_t>(rows));
    std::iota(perm.begin(), perm.end(), 0);
    if (s.batch_idx)
      for (int64_t i = rows - 1; i > 0; --i) std::swap(perm[size_t(i)], perm[size_t(rng.below(i + 1))]);
    std::copy(perm.begin(), perm.begin() + B, row.begin());
  }
  std::vector<int32_t> nl(static_cast<size_t>(B), 0);
  if (s.append) nl = s.ragged_new ? random_lengths(B, s.seqlen_new, rng) : std::vector<int32_t>(size_t(B), int32_t(s.seqlen_new));
  std::vector<int32_t> end(static_cast<size_t>(B)), lp(size_t(B), 0);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t room = cap - nl[size_t(b)];
    end[size_t(b)] = int32_t(b == 0 ? room : rng.below(room + 1));
    if (s.leftpad) lp[size_t(b)] = int32_t(rng.below(end[size_t(b)] + 1));
  }
  std::vector<int32_t> qlen = s.ragged_q ? random_lengths(B, s.seq_q, rng) : std::vector<int32_t>(size_t(B), int32_t(s.seq_q));

  // The cache: NaN except the slots each sequence reads before the append.
  std::vector<int64_t> k_shape, v_shape;
  if (ps > 0) {
    const int64_t num_pages = rows * max_pages + 3;
    std::vector<int32_t> perm(static_cast<size_t>(num_pages));
    std::iota(perm.begin(), perm.end(), 0);
    for (int64_t i = num_pages - 1; i > 0; --i) std::swap(perm[size_t(i)], perm[size_t(rng.below(i + 1))]);
    perm.resize(size_t(rows * max_pages));
    c.page_table = int_tensor(perm, {rows, max_pages});
    k_shape = {num_pages, ps, s.heads_kv, s.dim_qk};
    v_shape = {num_pages, ps, s.heads_kv, s.dim_v};
  } else {
    k_shape = {rows, cap, s.heads_kv, s.dim_qk};
    v_shape = {rows, cap, s.heads_kv, s.dim_v};
  }
  c.k = empty_tensor(s.dtype, k_shape);
  c.v = empty_tensor(s.dtype, v_shape);
  poison(c.k);
  poison(c.v);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = lp[size_t(b)]; t < end[size_t(b)]; ++t)
      for (int64_t hk = 0; hk < s.heads_kv; ++hk) {
        const int64_t ko = slot_offset(c.k.t, c.page_table.t, ps, row[size_t(b)], t, hk);
        const int64_t vo = slot_offset(c.v.t, c.page_table.t, ps, row[size_t(b)], t, hk);
        for (int64_t d = 0; d < s.dim_qk; ++d) store_from_float(c.k.t.data, s.dtype, ko + d, rng.uniform(-1, 1));
        for (int64_t d = 0; d < s.dim_v; ++d) store_from_float(c.v.t.data, s.dtype, vo + d, rng.uniform(-1, 1));
      }
  c.seqused_k = int_tensor(end);

  // Queries, outputs, new keys.
  std::vector<int64_t> q_shape, o_shape;
  if (s.ragged_q) {
    const std::vector<int32_t> cu = prefix(qlen);
    c.cu_seqlens_q = int_tensor(cu);
    q_shape = {cu.back(), s.heads_q, s.dim_qk};
    o_shape = {cu.back(), s.heads_q, s.dim_v};
    a.max_seqlen_q = s.seq_q;
    if (s.lse) c.lse = empty_tensor(DType::f32, {s.heads_q, int64_t(cu.back())});
  } else {
    q_shape = {B, s.seq_q, s.heads_q, s.dim_qk};
    o_shape = {B, s.seq_q, s.heads_q, s.dim_v};
    if (s.lse) c.lse = empty_tensor(DType::f32, {B, s.heads_q, s.seq_q});
  }
  c.q = random_tensor(s.dtype, q_shape, s.seed * 31 + 1);
  c.out = empty_tensor(s.dtype == DType::e4m3 ? DType::bf16 : s.dtype, o_shape);
  poison(c.out);
  if (s.append) {
    if (s.ragged_new) {
      const std::vector<int32_t> cu = prefix(nl);
      c.cu_seqlens_k_new = int_tensor(cu);
      c.k_new = random_tensor(s.dtype, {cu.back(), s.heads_kv, s.dim_qk}, s.seed * 31 + 2);
      c.v_new = random_tensor(s.dtype, {cu.back(), s.heads_kv, s.dim_v}, s.seed * 31 + 3);
    } else {
      c.k_new = random_tensor(s.dtype, {B, s.seqlen_new, s.heads_kv, s.dim_qk}, s.seed * 31 + 2);
      c.v_new = random_tensor(s.dtype, {B, s.seqlen_new, s.heads_kv, s.dim_v}, s.seed * 31 + 3);
    }
  }
  if (s.batch_idx) c.cache_batch_idx = int_tensor(row);
  if (s.leftpad) c.cache_leftpad = int_tensor(lp);
  if (s.rotary_dim > 0) {  // RoPE tables with base 10000, long enough for every position used
    const int64_t ro = cap + std::max(s.seq_q, s.seqlen_new) + 2, half = s.rotary_dim / 2;
    const DType tt = s.rotary_f32 ? DType::f32 : s.dtype;
    c.rotary_cos = empty_tensor(tt, {ro, half});
    c.rotary_sin = empty_tensor(tt, {ro, half});
    for (int64_t t = 0; t < ro; ++t)
      for (int64_t i = 0; i < half; ++i) {
        const double th = double(t) * std::pow(10000.0, -2.0 * double(i) / double(s.rotary_dim));
        store_from_float(c.rotary_cos.t.data, tt, t * half + i, float(std::cos(th)));
        store_from_float(c.rotary_sin.t.data, tt, t * half + i, float(std::sin(th)));
      }
    if (s.rotary_seqlens) {
      std::vector<int32_t> r0(static_cast<size_t>(B));
      for (int64_t b = 0; b < B; ++b) r0[size_t(b)] = int32_t(rng.below(cap + 1));
      c.rotary_seqlens = int_tensor(r0);
    }
  }
  if (s.sinks) c.sinks = random_tensor(DType::f32, {s.heads_q}, s.seed * 31 + 4, -1.0f, 2.0f);
  if (s.dtype == DType::e4m3) {
    c.q_descale = random_tensor(DType::f32, {B, s.heads_kv}, s.seed * 31 + 5, 0.5f, 2.0f);
    c.k_descale = random_tensor(DType::f32, {B, s.heads_kv}, s.seed * 31 + 6, 0.5f, 2.0f);
    c.v_descale = random_tensor(DType::f32, {B, s.heads_kv}, s.seed * 31 + 7, 0.5f, 2.0f);
  }

  a.q = c.q.t;
  a.k = c.k.t;
  a.v = c.v.t;
  a.out = c.out.t;
  a.lse = c.lse.t;
  a.cu_seqlens_q = c.cu_seqlens_q.t;
  a.seqused_k = c.seqused_k.t;
  a.page_table = c.page_table.t;
  a.sinks = c.sinks.t;
  a.q_descale = c.q_descale.t;
  a.k_descale = c.k_descale.t;
  a.v_descale = c.v_descale.t;
  a.mask = s.mask;
  a.softcap = s.softcap;
  KvCacheArgs& kc = a.kvcache;
  kc.k_new = c.k_new.t;
  kc.v_new = c.v_new.t;
  kc.cu_seqlens_k_new = c.cu_seqlens_k_new.t;
  kc.cache_batch_idx = c.cache_batch_idx.t;
  kc.cache_leftpad = c.cache_leftpad.t;
  kc.rotary_cos = c.rotary_cos.t;
  kc.rotary_sin = c.rotary_sin.t;
  kc.rotary_seqlens = c.rotary_seqlens.t;
  kc.rotary_interleaved = s.interleaved;
  return c;
}

KvSnapshot snapshot(const KvCase& c) { return KvSnapshot{c.k, c.v}; }

std::string check_kv_call(const Args& after, const KvSnapshot& before, double atol, double cache_ulps, double acc_eps) {
  // The definition on copies of the cache as it was: expected caches and attention arguments.
  KvSnapshot want = before;
  Args e = after;
  e.k = want.k.t;
  e.v = want.v.t;
  detail::Problem p;
  Status st = detail::build_problem(e, &p);
  if (!st.ok()) return "validate: " + st.message();
  detail::HostKvcache h;
  if (p.kvc.append || p.kvc.rotary) {
    st = detail::host_kvcache_apply(e, p, &h);
    if (!st.ok()) return "host_kvcache_apply: " + st.message();
  } else {
    h.attn = e;
  }
  std::string f = compare_cache("k", after.k, want.k.t, cache_ulps);
  if (f.empty()) f = compare_cache("v", after.v, want.v.t, 0);  // values are copied, never rounded
  if (!f.empty()) return f;
  h.attn.out = after.out;
  h.attn.lse = after.lse;
  const OracleResult r = check_against_reference(h.attn, atol, acc_eps);
  return r.failure;
}

}  // namespace longattn::testing
