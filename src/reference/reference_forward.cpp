// The float64 oracle: attention evaluated from its definition, one query row at a time.
#include <cmath>
#include <limits>
#include <vector>

#include "reference/gather.h"
#include "reference/reference.h"

namespace longattn::detail {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// One query row. `scores` is scratch of at least kv.len entries.
void row_f64(const Args& a, const Problem& p, const SeqInfo& s, const KvRows<double>& kv,
             int64_t b, int64_t h, int64_t i, std::vector<double>& q, std::vector<double>& scores,
             double* out, double* lse) {
  const int64_t hk = h / p.group;
  const double qk_scale = double(p.scale) * double(descale(a.q_descale, b, hk)) *
                          double(descale(a.k_descale, b, hk));
  const double vd = descale(a.v_descale, b, hk);
  const int64_t qo = q_offset(a, p, b, s, i, h);
  for (int64_t d = 0; d < p.dim_qk; ++d) q[size_t(d)] = load_as_double(a.q.data, p.in_dtype, qo + d);

  int64_t lo, hi;
  visible_range(p.mask, i + p.mask.offset(s.q_len, s.k_len), s.k_len, &lo, &hi);
  for (int64_t d = 0; d < p.dim_v; ++d) out[d] = 0.0;
  double sink = kNegInf;
  if (p.has_sinks) sink = load_as_double(a.sinks.data, DType::f32, h * a.sinks.stride[0]);
  if (lo >= hi) {  // no visible key: out 0; the denominator holds only the sink (if any)
    if (lse) *lse = sink;
    return;
  }
  double m = kNegInf;
  for (int64_t j = lo; j < hi; ++j) {
    const double* kj = &kv.k[size_t(j * p.dim_qk)];
    // Four partial sums: shorter dependency chains, same float64 accuracy class.
    double acc[4] = {0, 0, 0, 0};
    int64_t d = 0;
    for (; d + 4 <= p.dim_qk; d += 4)
      for (int u = 0; u < 4; ++u) acc[u] += q[size_t(d + u)] * kj[d + u];
    for (; d < p.dim_qk; ++d) acc[0] += q[size_t(d)] * kj[d];
    double x = ((acc[0] + acc[1]) + (acc[2] + acc[3])) * qk_scale;
    if (p.softcap > 0.0f) x = double(p.softcap) * std::tanh(x / double(p.softcap));
    scores[size_t(j - lo)] = x;
    if (x > m) m = x;
  }
  if (sink > m) m = sink;
  // m is finite unless inputs hold inf/NaN; then NaN propagates like the kernels'.
  double sum = p.has_sinks ? std::exp(sink - m) : 0.0;
  for (int64_t j = lo; j < hi; ++j) {
    const double w = std::exp(scores[size_t(j - lo)] - m);
    sum += w;
    const double* vj = &kv.v[size_t(j * p.dim_v)];
    for (int64_t d = 0; d < p.dim_v; ++d) out[d] += w * vj[d];
  }
  const double norm = vd / sum;
  for (int64_t d = 0; d < p.dim_v; ++d) out[d] *= norm;
  if (lse) *lse = m + std::log(sum);
}

}  // namespace

void reference_rows(const Args& a, const Problem& p, int64_t b, int64_t h, int64_t row_begin,
                    int64_t row_end, double* out, double* lse) {
  const SeqInfo s = seq_info(a, p, b);
  KvRows<double> kv;
  gather_kv(a, p, b, h / p.group, s, &kv);
  std::vector<double> q(size_t(p.dim_qk)), scores(size_t(s.k_len));
  for (int64_t i = row_begin; i < row_end; ++i) {
    const int64_t r = i - row_begin;
    row_f64(a, p, s, kv, b, h, i, q, scores, out + r * p.dim_v, lse ? lse + r : nullptr);
  }
}

void reference_rows_at(const Args& a, const Problem& p, int64_t b, int64_t h, const int64_t* rows,
                       int64_t n, double* out, double* lse) {
  const SeqInfo s = seq_info(a, p, b);
  KvRows<double> kv;
  gather_kv(a, p, b, h / p.group, s, &kv);
  std::vector<double> q(size_t(p.dim_qk)), scores(size_t(s.k_len));
  for (int64_t r = 0; r < n; ++r)
    row_f64(a, p, s, kv, b, h, rows[r], q, scores, out + r * p.dim_v, lse ? lse + r : nullptr);
}

Status reference_forward(const Args& a, const Problem& p) {
  // Work item: one (sequence, kv head); its K/V are gathered once for the whole group.
  parallel_for(p.batch * p.heads_kv, a.num_threads, [&](int64_t item) {
    const int64_t b = item / p.heads_kv, hk = item % p.heads_kv;
    const SeqInfo s = seq_info(a, p, b);
    if (s.q_len == 0) return;
    KvRows<double> kv;
    gather_kv(a, p, b, hk, s, &kv);
    std::vector<double> q(size_t(p.dim_qk)), scores(size_t(s.k_len)), o(size_t(p.dim_v));
    for (int64_t h = hk * p.group; h < (hk + 1) * p.group; ++h)
      for (int64_t i = 0; i < s.q_len; ++i) {
        double lse;
        row_f64(a, p, s, kv, b, h, i, q, scores, o.data(), &lse);
        const int64_t oo = out_offset(a, p, b, s, i, h);
        for (int64_t d = 0; d < p.dim_v; ++d) store_from_float(a.out.data, p.out_dtype, oo + d, float(o[size_t(d)]));
        if (p.has_lse)
          store_from_float(a.lse.data, DType::f32, lse_offset(a, p, b, s, i, h), float(lse));
      }
  });
  return Status::Ok();
}

}  // namespace longattn::detail
