// The float64 oracle: attention evaluated from its definition.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "reference/reference.h"
#include "reference/row_driver.h"

namespace longattn::detail {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Rows are evaluated in blocks of up to kBlock so that each gathered K/V row is read from
// memory once per block rather than once per query row (a long sequence's K/V do not fit
// in cache; one row at a time the oracle was memory-bound). Per row the arithmetic, and
// its order, are exactly the one-row definition: results do not depend on the blocking.
constexpr int64_t kBlock = 16;

struct Scratch {
  std::vector<double> q, scores;  // kBlock x dim_qk, kBlock x k_len
};

// Rows rows[0..n) (n <= kBlock) of sequence b, query head h; `out` is n x dim_v.
void block_f64(const Args& a, const Problem& p, const SeqInfo& s, const KvRows<double>& kv,
               int64_t b, int64_t h, const int64_t* rows, int64_t n, Scratch& w, double* out,
               double* lse) {
  const int64_t hk = h / p.group, dq = p.dim_qk, dv = p.dim_v, len = s.k_len;
  const double qk_scale = double(p.scale) * double(descale(a.q_descale, b, hk)) *
                          double(descale(a.k_descale, b, hk));
  const double vd = descale(a.v_descale, b, hk);
  const double sink =
      p.has_sinks ? load_as_double(a.sinks.data, DType::f32, h * a.sinks.stride[0]) : kNegInf;
  w.q.resize(size_t(kBlock * dq));
  w.scores.resize(size_t(kBlock * std::max<int64_t>(len, 1)));

  int64_t lo[kBlock], hi[kBlock], jlo = len, jhi = 0;
  double m[kBlock], sum[kBlock];
  for (int64_t r = 0; r < n; ++r) {
    const int64_t qo = q_offset(a, p, b, s, rows[r], h);
    for (int64_t d = 0; d < dq; ++d) w.q[size_t(r * dq + d)] = load_as_double(a.q.data, p.in_dtype, qo + d);
    visible_range(p.mask, query_position(p, s, rows[r]), len, &lo[r], &hi[r]);
    if (lo[r] < hi[r]) jlo = std::min(jlo, lo[r]), jhi = std::max(jhi, hi[r]);
    m[r] = kNegInf;
    for (int64_t d = 0; d < dv; ++d) out[r * dv + d] = 0.0;
  }
  // Scores s_j = scale * q.k_j (then softcap) of every visible key, and the row maxima.
  for (int64_t j = jlo; j < jhi; ++j) {
    const double* kj = &kv.k[size_t(j * dq)];
    for (int64_t r = 0; r < n; ++r) {
      if (j < lo[r] || j >= hi[r]) continue;
      const double* q = &w.q[size_t(r * dq)];
      double acc[4] = {0, 0, 0, 0};  // four partial sums: shorter dependency chains
      int64_t d = 0;
      for (; d + 4 <= dq; d += 4)
        for (int u = 0; u < 4; ++u) acc[u] += q[d + u] * kj[d + u];
      for (; d < dq; ++d) acc[0] += q[d] * kj[d];
      double x = ((acc[0] + acc[1]) + (acc[2] + acc[3])) * qk_scale;
      if (p.softcap > 0.0f) x = double(p.softcap) * std::tanh(x / double(p.softcap));
      w.scores[size_t(r * len + j)] = x;
      if (x > m[r]) m[r] = x;
    }
  }
  // The sink joins the maximum and the denominator, never the values. (m stays finite
  // unless inputs hold inf/NaN; then NaN propagates, as in the kernels.)
  for (int64_t r = 0; r < n; ++r) {
    if (sink > m[r]) m[r] = sink;
    sum[r] = p.has_sinks && lo[r] < hi[r] ? std::exp(sink - m[r]) : 0.0;
  }
  for (int64_t j = jlo; j < jhi; ++j) {
    const double* vj = &kv.v[size_t(j * dv)];
    for (int64_t r = 0; r < n; ++r) {
      if (j < lo[r] || j >= hi[r]) continue;
      const double e = std::exp(w.scores[size_t(r * len + j)] - m[r]);
      sum[r] += e;
      double* o = out + r * dv;
      for (int64_t d = 0; d < dv; ++d) o[d] += e * vj[d];
    }
  }
  for (int64_t r = 0; r < n; ++r) {
    if (lo[r] >= hi[r]) {  // no visible key: out 0; the denominator holds only the sink (if any)
      if (lse) lse[r] = sink;
      continue;
    }
    const double norm = vd / sum[r];
    for (int64_t d = 0; d < dv; ++d) out[r * dv + d] *= norm;
    if (lse) lse[r] = m[r] + std::log(sum[r]);
  }
}

// Any row list, in blocks.
void rows_f64(const Args& a, const Problem& p, const SeqInfo& s, const KvRows<double>& kv,
              int64_t b, int64_t h, const int64_t* rows, int64_t n, double* out, double* lse) {
  Scratch w;
  for (int64_t r = 0; r < n; r += kBlock)
    block_f64(a, p, s, kv, b, h, rows + r, std::min(kBlock, n - r), w, out + r * p.dim_v,
              lse ? lse + r : nullptr);
}

}  // namespace

void reference_rows(const Args& a, const Problem& p, int64_t b, int64_t h, int64_t row_begin,
                    int64_t row_end, double* out, double* lse) {
  const std::vector<int64_t> rows = row_range(row_begin, row_end);
  reference_rows_at(a, p, b, h, rows.data(), int64_t(rows.size()), out, lse);
}

void reference_rows_at(const Args& a, const Problem& p, int64_t b, int64_t h, const int64_t* rows,
                       int64_t n, double* out, double* lse) {
  rows_at(a, p, b, h, rows, n, out, lse, rows_f64);
}

Status reference_forward(const Args& a, const Problem& p) {
  forward_all_rows<double>(a, p, rows_f64);
  return Status::Ok();
}

}  // namespace longattn::detail
