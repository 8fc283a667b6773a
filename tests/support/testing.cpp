// Implementation of the shared test helpers (see testing.h).
#include "support/testing.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>

#include "common/problem.h"
#include "reference/gather.h"
#include "reference/reference.h"
#include "support/random.h"

namespace longattn::testing {
namespace {

using detail::load_as_double;
using detail::store_from_float;

uint64_t mix(uint64_t seed, uint64_t k) { return Rng(seed ^ (k * 0xD6E8FEB86659FD93ull)).next(); }

// Calls fn(offset) for every element of the view, in row-major order of its shape.
template <typename Fn>
void for_each_offset(const Tensor& t, Fn fn) {
  if (t.rank == 0) return;
  for (int i = 0; i < t.rank; ++i)
    if (t.shape[i] == 0) return;
  int64_t idx[kMaxRank] = {};
  while (true) {
    int64_t off = 0;
    for (int i = 0; i < t.rank; ++i) off += idx[i] * t.stride[i];
    fn(off);
    int d = t.rank - 1;
    while (d >= 0 && ++idx[d] == t.shape[d]) idx[d--] = 0;
    if (d < 0) return;
  }
}

HostTensor alloc(DType dtype, const std::vector<int64_t>& shape, int64_t pad) {
  HostTensor x;
  std::vector<int64_t> alloc_shape = shape;
  if (!alloc_shape.empty()) alloc_shape.back() += pad;
  int64_t n = 1;
  for (int64_t s : alloc_shape) n *= s;
  x.bytes.assign(size_t(std::max<int64_t>(n, 1) * dtype_size(dtype)), 0);
  x.t.data = x.bytes.data();
  x.t.dtype = dtype;
  x.t.rank = int(shape.size());
  int64_t st = 1;
  for (int i = x.t.rank - 1; i >= 0; --i) {
    x.t.shape[i] = shape[size_t(i)];
    x.t.stride[i] = st;
    st *= alloc_shape[size_t(i)];
  }
  if (pad > 0) {  // padding holds NaN: reading it by mistake shows up in the result
    HostTensor whole;
    whole.t = x.t;
    whole.t.shape[x.t.rank - 1] = alloc_shape.back();
    poison(whole.t);
  }
  return x;
}

void fill_random(HostTensor& x, uint64_t seed, float lo, float hi) {
  Rng rng(seed);
  bool nonzero = false;
  for_each_offset(x.t, [&](int64_t off) {
    store_from_float(x.t.data, x.t.dtype, off, float(lo + (hi - lo) * rng.uniform()));
    nonzero = nonzero || load_as_double(x.t.data, x.t.dtype, off) != 0.0;
  });
  if (!nonzero && x.t.numel() > 0) {  // a degenerate range: make it visibly nonzero anyway
    float v = hi != 0.0f ? hi : (lo != 0.0f ? lo : 1.0f);
    store_from_float(x.t.data, x.t.dtype, 0, v);
  }
}

std::vector<int32_t> random_lengths(const std::vector<int32_t>& given, int64_t batch, int64_t max,
                                    Rng& rng) {
  return given.empty() ? testing::random_lengths(batch, max, rng) : given;
}

std::string where(const char* what, int64_t b, int64_t h, int64_t i, int64_t d) {
  std::ostringstream os;
  os << what << "[b=" << b << ", h=" << h << ", row=" << i;
  if (d >= 0) os << ", d=" << d;
  os << "]";
  return os.str();
}

// Rows past seqused_q[b] are never written: after run_and_check's poison they hold NaN.
std::string unused_rows_untouched(const Args& a, const detail::Problem& p) {
  if (!p.has_seqused_q) return "";
  for (int64_t b = 0; b < p.batch; ++b) {
    const detail::SeqInfo s = detail::seq_info(a, p, b);
    const int64_t rows = p.q_ragged ? int64_t(get(a.cu_seqlens_q, {b + 1}) - get(a.cu_seqlens_q, {b}))
                                    : a.q.shape[1];
    for (int64_t i = int64_t(get(a.seqused_q, {b})); i < rows; ++i)
      for (int64_t h = 0; h < p.heads_q; ++h) {
        const int64_t oo = detail::out_offset(a, p, b, s, i, h);
        for (int64_t d = 0; d < p.dim_v; ++d)
          if (!std::isnan(load_as_double(a.out.data, p.out_dtype, oo + d)))
            return where("out", b, h, i, d) + " was written, but the row is past seqused_q";
        if (p.has_lse && !std::isnan(load_as_double(a.lse.data, DType::f32, detail::lse_offset(a, p, b, s, i, h))))
          return where("lse", b, h, i, -1) + " was written, but the row is past seqused_q";
      }
  }
  return "";
}

}  // namespace

HostTensor empty_tensor(DType dtype, std::initializer_list<int64_t> shape) {
  return alloc(dtype, std::vector<int64_t>(shape), 0);
}
HostTensor empty_tensor(DType dtype, const std::vector<int64_t>& shape) { return alloc(dtype, shape, 0); }

HostTensor random_tensor(DType dtype, const std::vector<int64_t>& shape, uint64_t seed, float lo,
                         float hi) {
  HostTensor x = alloc(dtype, shape, 0);
  fill_random(x, seed, lo, hi);
  return x;
}

HostTensor random_padded(DType dtype, const std::vector<int64_t>& shape, int64_t pad, uint64_t seed,
                         float lo, float hi) {
  HostTensor x = alloc(dtype, shape, pad);
  fill_random(x, seed, lo, hi);
  return x;
}

HostTensor int_tensor(const std::vector<int32_t>& values, std::vector<int64_t> shape) {
  if (shape.empty()) shape = {int64_t(values.size())};
  HostTensor x = alloc(DType::i32, shape, 0);
  std::copy(values.begin(), values.end(), static_cast<int32_t*>(x.t.data));
  return x;
}

void poison(const Tensor& t) {
  if (!t.present()) return;
  for_each_offset(t, [&](int64_t off) {
    if (t.dtype == DType::i32) static_cast<int32_t*>(t.data)[off] = std::numeric_limits<int32_t>::min();
    else store_from_float(t.data, t.dtype, off, std::numeric_limits<float>::quiet_NaN());
  });
}
void poison(HostTensor& x) { poison(x.t); }

int64_t count_nan(const HostTensor& x) {
  int64_t n = 0;
  if (x.t.dtype == DType::i32) return 0;
  for_each_offset(x.t, [&](int64_t off) { n += std::isnan(load_as_double(x.t.data, x.t.dtype, off)); });
  return n;
}

double get(const HostTensor& x, int64_t flat_index) {
  int64_t off = 0, rest = flat_index;
  for (int i = x.t.rank - 1; i >= 0; --i) {
    off += (rest % x.t.shape[i]) * x.t.stride[i];
    rest /= x.t.shape[i];
  }
  return load_as_double(x.t.data, x.t.dtype, off);
}

double get(const Tensor& t, std::initializer_list<int64_t> index) {
  int64_t off = 0;
  int i = 0;
  for (int64_t v : index) off += v * t.stride[i++];
  return load_as_double(t.data, t.dtype, off);
}

std::string describe(const CaseSpec& s) {
  std::ostringstream os;
  os << "b" << s.batch << " sq" << s.seq_q << " sk" << s.seq_k << " h" << s.heads_q << "/" << s.heads_kv
     << " d" << s.dim_qk << "/" << s.dim_v << " " << dtype_name(s.dtype) << "->" << dtype_name(s.out_dtype);
  const Mask& m = s.mask;
  if (m.causal) os << " causal";
  if (m.causal || m.window_left >= 0 || m.window_right >= 0 || m.chunk_size > 0)
    os << (m.align == CausalAlign::top_left ? "(tl)" : "(br)");
  if (m.window_left >= 0 || m.window_right >= 0) os << " window(" << m.window_left << "," << m.window_right << ")";
  if (m.chunk_size > 0) os << " chunk" << m.chunk_size;
  if (s.softmax_scale) os << " scale=" << *s.softmax_scale;
  if (s.softcap > 0) os << " softcap=" << s.softcap;
  if (s.sinks) os << " sinks";
  if (!s.lse) os << " no-lse";
  if (s.ragged_q) os << " ragged_q";
  if (s.ragged_k) os << " ragged_k";
  if (s.page_size > 0) os << " paged" << s.page_size;
  if (s.seqused_k) os << " seqused_k";
  if (s.seqused_q || !s.used_q.empty()) os << " seqused_q";
  if (s.padded) os << " padded";
  if (s.amp != 1.0f) os << " amp=" << s.amp;
  os << " seed=" << s.seed;
  return os.str();
}

Case make_case(const CaseSpec& spec) {
  Case c;
  c.spec = spec;
  const CaseSpec& s = spec;
  Rng rng(mix(s.seed, 99));
  // 16 bytes of padding per row: keeps rows 16-byte aligned for every dtype (TMA).
  const int64_t pad = s.padded ? 16 / dtype_size(s.dtype) : 0;
  const float amp = s.amp;
  Args& a = c.args;
  a.backend = Backend::reference;

  // Queries and outputs.
  std::vector<int64_t> q_shape, out_shape;
  std::vector<int32_t> q_rows(size_t(s.batch), int32_t(s.seq_q));  // rows each sequence has
  if (s.ragged_q) {
    std::vector<int32_t> len = random_lengths(s.seqlens_q, s.batch, s.seq_q, rng);
    q_rows = len;
    std::vector<int32_t> cu = prefix(len);
    c.cu_seqlens_q = int_tensor(cu);
    q_shape = {cu.back(), s.heads_q, s.dim_qk};
    out_shape = {cu.back(), s.heads_q, s.dim_v};
    if (s.lse) c.lse = empty_tensor(DType::f32, {s.heads_q, int64_t(cu.back())});
  } else {
    q_shape = {s.batch, s.seq_q, s.heads_q, s.dim_qk};
    out_shape = {s.batch, s.seq_q, s.heads_q, s.dim_v};
    if (s.lse) c.lse = empty_tensor(DType::f32, {s.batch, s.heads_q, s.seq_q});
  }
  c.q = random_padded(s.dtype, q_shape, pad, mix(s.seed, 1), -amp, amp);
  c.out = alloc(s.out_dtype, out_shape, pad);
  poison(c.out);

  // Keys and values: dense, ragged or paged; capacity = keys each sequence can hold.
  std::vector<int64_t> k_shape, v_shape, capacity(size_t(s.batch), s.seq_k);
  if (s.page_size > 0) {
    const int64_t max_pages = (s.seq_k + s.page_size - 1) / s.page_size;
    const int64_t used_pages = s.batch * max_pages, num_pages = used_pages + 3;  // spare pages
    std::vector<int32_t> perm(static_cast<size_t>(num_pages));
    std::iota(perm.begin(), perm.end(), 0);
    for (int64_t i = num_pages - 1; i > 0; --i) std::swap(perm[size_t(i)], perm[size_t(rng.below(i + 1))]);
    perm.resize(size_t(used_pages));
    c.page_table = int_tensor(perm, {s.batch, max_pages});
    k_shape = {num_pages, s.page_size, s.heads_kv, s.dim_qk};
    v_shape = {num_pages, s.page_size, s.heads_kv, s.dim_v};
    std::fill(capacity.begin(), capacity.end(), max_pages * s.page_size);
  } else if (s.ragged_k) {
    std::vector<int32_t> len = random_lengths(s.seqlens_k, s.batch, s.seq_k, rng);
    std::vector<int32_t> cu = prefix(len);
    c.cu_seqlens_k = int_tensor(cu);
    k_shape = {cu.back(), s.heads_kv, s.dim_qk};
    v_shape = {cu.back(), s.heads_kv, s.dim_v};
    for (int64_t b = 0; b < s.batch; ++b) capacity[size_t(b)] = len[size_t(b)];
  } else {
    k_shape = {s.batch, s.seq_k, s.heads_kv, s.dim_qk};
    v_shape = {s.batch, s.seq_k, s.heads_kv, s.dim_v};
  }
  c.k = random_padded(s.dtype, k_shape, pad, mix(s.seed, 2), -amp, amp);
  c.v = random_padded(s.dtype, v_shape, pad, mix(s.seed, 3), -amp, amp);
  if (s.seqused_k) {
    std::vector<int32_t> used(size_t(s.batch));
    for (int64_t b = 0; b < s.batch; ++b)
      used[size_t(b)] = int32_t(b == 0 ? capacity[size_t(b)] : rng.below(capacity[size_t(b)] + 1));
    c.seqused_k = int_tensor(used);
  }
  if (s.seqused_q || !s.used_q.empty()) {
    std::vector<int32_t> used = s.used_q;
    if (used.empty())
      for (int64_t b = 0; b < s.batch; ++b) {
        const int32_t rows = q_rows[size_t(b)];
        used.push_back(b == 0 ? rows : int32_t(rng.below(rows + 1)));
      }
    c.seqused_q = int_tensor(used);
  }
  if (s.sinks) c.sinks = random_tensor(DType::f32, {s.heads_q}, mix(s.seed, 4), -1.0f, 2.0f);
  if (s.dtype == DType::e4m3) {
    c.q_descale = random_tensor(DType::f32, {s.batch, s.heads_kv}, mix(s.seed, 5), 0.5f, 2.0f);
    c.k_descale = random_tensor(DType::f32, {s.batch, s.heads_kv}, mix(s.seed, 6), 0.5f, 2.0f);
    c.v_descale = random_tensor(DType::f32, {s.batch, s.heads_kv}, mix(s.seed, 7), 0.5f, 2.0f);
  }

  a.q = c.q.t;
  a.k = c.k.t;
  a.v = c.v.t;
  a.out = c.out.t;
  a.lse = c.lse.t;
  a.cu_seqlens_q = c.cu_seqlens_q.t;
  a.cu_seqlens_k = c.cu_seqlens_k.t;
  a.seqused_q = c.seqused_q.t;
  a.seqused_k = c.seqused_k.t;
  a.page_table = c.page_table.t;
  a.sinks = c.sinks.t;
  a.q_descale = c.q_descale.t;
  a.k_descale = c.k_descale.t;
  a.v_descale = c.v_descale.t;
  a.softmax_scale = s.softmax_scale;
  a.softcap = s.softcap;
  a.mask = s.mask;
  return c;
}

// The fp8 accumulation term of check_against_reference: {A, V} (testing.h).
static std::pair<double, double> fp8_magnitudes(const Args& a, const detail::Problem& p) {
  double dqk = 0, dv = 0, qrow = 0, kmax = 0, vmax = 0;
  for (int64_t b = 0; b < p.batch; ++b) {
    const detail::SeqInfo s = detail::seq_info(a, p, b);
    for (int64_t hk = 0; hk < p.heads_kv; ++hk) {
      dqk = std::max(dqk, double(detail::descale(a.q_descale, b, hk)) * detail::descale(a.k_descale, b, hk));
      dv = std::max(dv, double(detail::descale(a.v_descale, b, hk)));
      for (int64_t j = 0; j < s.k_len; ++j) {
        const int64_t ko = detail::k_offset(a, p, b, s, j, hk), vo = detail::v_offset(a, p, b, s, j, hk);
        for (int64_t d = 0; d < p.dim_qk; ++d) kmax = std::max(kmax, std::fabs(load_as_double(a.k.data, p.in_dtype, ko + d)));
        for (int64_t d = 0; d < p.dim_v; ++d) vmax = std::max(vmax, std::fabs(load_as_double(a.v.data, p.in_dtype, vo + d)));
      }
    }
    for (int64_t h = 0; h < p.heads_q; ++h)
      for (int64_t i = 0; i < s.q_len; ++i) {
        const int64_t qo = detail::q_offset(a, p, b, s, i, h);
        double n1 = 0;
        for (int64_t d = 0; d < p.dim_qk; ++d) n1 += std::fabs(load_as_double(a.q.data, p.in_dtype, qo + d));
        qrow = std::max(qrow, n1);
      }
  }
  return {double(p.scale) * dqk * qrow * kmax, dv * vmax};
}

OracleResult check_against_reference(const Args& a, double atol, double acc_eps) {
  OracleResult r;
  detail::Problem p;
  Status st = detail::build_problem(a, &p);
  if (!st.ok()) {
    r.failure = "validate: " + st.message();
    return r;
  }
  struct Part {
    double err = 0, naive = 0, lse_err = 0, lse_naive = 0;
    int64_t err_b = -1, err_h = -1, err_i = -1, err_d = -1;
    std::string failure;
  };
  std::vector<Part> parts(size_t(p.batch * p.heads_q));
  // One (sequence, head) per work item; results reduced afterwards, so the verdict does
  // not depend on the thread count.
  detail::parallel_for(p.batch * p.heads_q, 0, [&](int64_t item) {
    Part& part = parts[size_t(item)];
    const int64_t b = item / p.heads_q, h = item % p.heads_q;
    const detail::SeqInfo s = detail::seq_info(a, p, b);
    if (s.q_len == 0) return;
    std::vector<double> ref(size_t(s.q_len * p.dim_v)), ref_lse(size_t(s.q_len));
    std::vector<float> naive(size_t(s.q_len * p.dim_v)), naive_lse(size_t(s.q_len));
    detail::reference_rows(a, p, b, h, 0, s.q_len, ref.data(), ref_lse.data());
    detail::emulated_rows(a, p, b, h, 0, s.q_len, naive.data(), naive_lse.data());
    auto fail = [&](std::string msg) {
      if (part.failure.empty()) part.failure = std::move(msg);
    };
    for (int64_t i = 0; i < s.q_len; ++i) {
      const int64_t oo = detail::out_offset(a, p, b, s, i, h);
      for (int64_t d = 0; d < p.dim_v; ++d) {
        const double o = load_as_double(a.out.data, p.out_dtype, oo + d);
        const double x = ref[size_t(i * p.dim_v + d)];
        const double n = naive[size_t(i * p.dim_v + d)];
        if (std::isnan(x)) {  // NaN inputs must propagate, as in the reference
          if (!std::isnan(o)) fail(where("out", b, h, i, d) + " is " + std::to_string(o) + ", reference is NaN");
          continue;
        }
        if (std::isnan(o)) {
          fail(where("out", b, h, i, d) + " is NaN (not written?), reference " + std::to_string(x));
          continue;
        }
        if (std::isinf(x) || std::isinf(o)) {
          if (o != x) fail(where("out", b, h, i, d) + " is " + std::to_string(o) + ", reference " + std::to_string(x));
          continue;
        }
        const double e = std::fabs(o - x);
        if (e > part.err) {
          part.err = e;
          part.err_b = b, part.err_h = h, part.err_i = i, part.err_d = d;
        }
        if (std::isfinite(n)) part.naive = std::max(part.naive, std::fabs(n - x));
      }
      if (!p.has_lse) continue;
      const double l = load_as_double(a.lse.data, DType::f32, detail::lse_offset(a, p, b, s, i, h));
      const double x = ref_lse[size_t(i)], n = naive_lse[size_t(i)];
      if (std::isnan(x)) {
        if (!std::isnan(l)) fail(where("lse", b, h, i, -1) + " is " + std::to_string(l) + ", reference is NaN");
      } else if (std::isnan(l)) {
        fail(where("lse", b, h, i, -1) + " is NaN (not written?), reference " + std::to_string(x));
      } else if (std::isinf(x) || std::isinf(l)) {
        if (l != x) fail(where("lse", b, h, i, -1) + " is " + std::to_string(l) + ", reference " + std::to_string(x));
      } else {
        part.lse_err = std::max(part.lse_err, std::fabs(l - x));
        part.lse_naive = std::max(part.lse_naive, std::fabs(n - x));
      }
    }
  });
  const Part* worst = nullptr;
  for (const Part& part : parts) {
    if (r.failure.empty() && !part.failure.empty()) r.failure = part.failure;
    if (!worst || part.err > r.max_err) {
      worst = &part;
      r.max_err = part.err;
    }
    r.naive_err = std::max(r.naive_err, part.naive);
    r.lse_err = std::max(r.lse_err, part.lse_err);
    r.lse_naive_err = std::max(r.lse_naive_err, part.lse_naive);
  }
  double acc_out = 0, acc_lse = 0;  // the fp8 tensor-core accumulation terms (testing.h)
  if (acc_eps > 0) {
    const auto [A, V] = fp8_magnitudes(a, p);
    acc_lse = acc_eps * A;
    acc_out = acc_eps * (2 * A + 1) * V;
  }
  r.bound = 2.0 * r.naive_err + atol + acc_out;
  r.lse_bound = 2.0 * r.lse_naive_err + atol + acc_lse;
  if (r.failure.empty() && worst && r.max_err > r.bound) {
    std::ostringstream os;
    os << "out error " << r.max_err << " exceeds bound " << r.bound << " (2 x naive " << r.naive_err
       << " + " << atol << " + fp8 accumulation " << acc_out << ") at " << where("out", worst->err_b, worst->err_h, worst->err_i, worst->err_d);
    r.failure = os.str();
  }
  if (r.failure.empty() && r.lse_err > r.lse_bound) {
    std::ostringstream os;
    os << "lse error " << r.lse_err << " exceeds bound " << r.lse_bound << " (2 x naive " << r.lse_naive_err
       << " + " << atol << " + fp8 accumulation " << acc_lse << ")";
    r.failure = os.str();
  }
  return r;
}

OracleResult run_and_check(const Args& a, double atol) {
  OracleResult r;
  Status st = validate(a);
  if (!st.ok()) {
    r.failure = "validate: " + st.message();
    return r;
  }
  poison(a.out);
  poison(a.lse);
  st = forward(a);
  if (!st.ok()) {
    r.failure = std::string("forward (") + backend_name(a.backend) + "): " + st.message();
    return r;
  }
  r = check_against_reference(a, atol);
  detail::Problem p;
  if (r.failure.empty() && detail::build_problem(a, &p).ok()) r.failure = unused_rows_untouched(a, p);
  return r;
}

}  // namespace longattn::testing
