// Attention done naively in the inputs' precision: float32 dot products and softmax, P
// rounded to the input dtype before P.V (as tensor-core kernels feed it), the result rounded
// to the output dtype. Its error against the float64 oracle calibrates test tolerances.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "reference/reference.h"
#include "reference/row_driver.h"

namespace longattn::detail {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr int64_t kBlock = 16;  // rows per pass over K/V, as in reference_forward.cpp

float round_to(DType t, float x) {
  if (t == DType::f32) return x;
  uint32_t tmp = 0;
  store_from_float(&tmp, t, 0, x);
  return load_as_float(&tmp, t, 0);
}

struct Scratch {
  std::vector<float> q, scores, acc;  // kBlock x dim_qk, kBlock x k_len, kBlock x dim_v
};

// Rows rows[0..n) (n <= kBlock) of sequence b, query head h; `out` is n x dim_v, already
// rounded to the output dtype. Per row the arithmetic order is that of the plain loop.
void block_f32(const Args& a, const Problem& p, const SeqInfo& s, const KvRows<float>& kv,
               int64_t b, int64_t h, const int64_t* rows, int64_t n, Scratch& w, float* out,
               float* lse) {
  const int64_t hk = h / p.group, dq = p.dim_qk, dv = p.dim_v, len = s.k_len;
  const float qk_scale = p.scale * descale(a.q_descale, b, hk) * descale(a.k_descale, b, hk);
  const float vd = descale(a.v_descale, b, hk);
  const float sink =
      p.has_sinks ? load_as_float(a.sinks.data, DType::f32, h * a.sinks.stride[0]) : kNegInf;
  w.q.resize(size_t(kBlock * dq));
  w.scores.resize(size_t(kBlock * std::max<int64_t>(len, 1)));
  w.acc.assign(size_t(kBlock * dv), 0.0f);

  int64_t lo[kBlock], hi[kBlock], jlo = len, jhi = 0;
  float m[kBlock], sum[kBlock];
  for (int64_t r = 0; r < n; ++r) {
    const int64_t qo = q_offset(a, p, b, s, rows[r], h);
    for (int64_t d = 0; d < dq; ++d) w.q[size_t(r * dq + d)] = load_as_float(a.q.data, p.in_dtype, qo + d);
    visible_range(p.mask, query_position(p, s, rows[r]), len, &lo[r], &hi[r]);
    if (lo[r] < hi[r]) jlo = std::min(jlo, lo[r]), jhi = std::max(jhi, hi[r]);
    m[r] = kNegInf;
  }
  for (int64_t j = jlo; j < jhi; ++j) {
    const float* kj = &kv.k[size_t(j * dq)];
    for (int64_t r = 0; r < n; ++r) {
      if (j < lo[r] || j >= hi[r]) continue;
      const float* q = &w.q[size_t(r * dq)];
      float dot = 0.0f;  // one sequential float32 sum: the naive order
      for (int64_t d = 0; d < dq; ++d) dot += q[d] * kj[d];
      float x = dot * qk_scale;
      if (p.softcap > 0.0f) x = p.softcap * std::tanh(x / p.softcap);
      w.scores[size_t(r * len + j)] = x;
      if (x > m[r]) m[r] = x;
    }
  }
  for (int64_t r = 0; r < n; ++r) {
    if (sink > m[r]) m[r] = sink;
    sum[r] = p.has_sinks && lo[r] < hi[r] ? std::exp(sink - m[r]) : 0.0f;
  }
  for (int64_t j = jlo; j < jhi; ++j) {
    const float* vj = &kv.v[size_t(j * dv)];
    for (int64_t r = 0; r < n; ++r) {
      if (j < lo[r] || j >= hi[r]) continue;
      const float e = std::exp(w.scores[size_t(r * len + j)] - m[r]);
      sum[r] += e;  // the denominator uses the unrounded P, as flash kernels do
      const float er = round_to(p.in_dtype, e);
      float* acc = &w.acc[size_t(r * dv)];
      for (int64_t d = 0; d < dv; ++d) acc[d] += er * vj[d];
    }
  }
  for (int64_t r = 0; r < n; ++r) {
    if (lo[r] >= hi[r]) {
      for (int64_t d = 0; d < dv; ++d) out[r * dv + d] = 0.0f;
      if (lse) lse[r] = sink;
      continue;
    }
    const float norm = vd / sum[r];
    for (int64_t d = 0; d < dv; ++d)
      out[r * dv + d] = round_to(p.out_dtype, w.acc[size_t(r * dv + d)] * norm);
    if (lse) lse[r] = m[r] + std::log(sum[r]);
  }
}

void rows_f32(const Args& a, const Problem& p, const SeqInfo& s, const KvRows<float>& kv,
              int64_t b, int64_t h, const int64_t* rows, int64_t n, float* out, float* lse) {
  Scratch w;
  for (int64_t r = 0; r < n; r += kBlock)
    block_f32(a, p, s, kv, b, h, rows + r, std::min(kBlock, n - r), w, out + r * p.dim_v,
              lse ? lse + r : nullptr);
}

}  // namespace

void emulated_rows(const Args& a, const Problem& p, int64_t b, int64_t h, int64_t row_begin,
                   int64_t row_end, float* out, float* lse) {
  const std::vector<int64_t> rows = row_range(row_begin, row_end);
  emulated_rows_at(a, p, b, h, rows.data(), int64_t(rows.size()), out, lse);
}

void emulated_rows_at(const Args& a, const Problem& p, int64_t b, int64_t h, const int64_t* rows,
                      int64_t n, float* out, float* lse) {
  rows_at(a, p, b, h, rows, n, out, lse, rows_f32);
}

Status emulated_forward(const Args& a, const Problem& p) {
  forward_all_rows<float>(a, p, rows_f32);
  return Status::Ok();
}

}  // namespace longattn::detail
