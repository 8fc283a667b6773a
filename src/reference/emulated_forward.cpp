// Attention done naively in the inputs' precision: float32 dot products and softmax, P
// rounded to the input dtype before P.V (as tensor-core kernels feed it), the result rounded
// to the output dtype. Its error against the float64 oracle calibrates test tolerances.
#include <cmath>
#include <limits>
#include <vector>

#include "reference/gather.h"
#include "reference/reference.h"

namespace longattn::detail {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

float round_to(DType t, float x) {
  if (t == DType::f32) return x;
  uint32_t tmp = 0;
  store_from_float(&tmp, t, 0, x);
  return load_as_float(&tmp, t, 0);
}

void row_f32(const Args& a, const Problem& p, const SeqInfo& s, const KvRows<float>& kv,
             int64_t b, int64_t h, int64_t i, std::vector<float>& q, std::vector<float>& scores,
             std::vector<float>& acc, float* out, float* lse) {
  const int64_t hk = h / p.group;
  const float qk_scale = p.scale * descale(a.q_descale, b, hk) * descale(a.k_descale, b, hk);
  const float vd = descale(a.v_descale, b, hk);
  const int64_t qo = q_offset(a, p, b, s, i, h);
  for (int64_t d = 0; d < p.dim_qk; ++d) q[size_t(d)] = load_as_float(a.q.data, p.in_dtype, qo + d);

  int64_t lo, hi;
  visible_range(p.mask, i + p.mask.offset(s.q_len, s.k_len), s.k_len, &lo, &hi);
  for (int64_t d = 0; d < p.dim_v; ++d) out[d] = 0.0f;
  float sink = kNegInf;
  if (p.has_sinks) sink = load_as_float(a.sinks.data, DType::f32, h * a.sinks.stride[0]);
  if (lo >= hi) {
    if (lse) *lse = sink;
    return;
  }
  float m = kNegInf;
  for (int64_t j = lo; j < hi; ++j) {
    const float* kj = &kv.k[size_t(j * p.dim_qk)];
    float dot = 0.0f;
    for (int64_t d = 0; d < p.dim_qk; ++d) dot += q[size_t(d)] * kj[d];
    float x = dot * qk_scale;
    if (p.softcap > 0.0f) x = p.softcap * std::tanh(x / p.softcap);
    scores[size_t(j - lo)] = x;
    if (x > m) m = x;
  }
  if (sink > m) m = sink;
  float sum = p.has_sinks ? std::exp(sink - m) : 0.0f;
  for (int64_t d = 0; d < p.dim_v; ++d) acc[size_t(d)] = 0.0f;
  for (int64_t j = lo; j < hi; ++j) {
    const float w = std::exp(scores[size_t(j - lo)] - m);
    sum += w;  // the denominator uses the unrounded P, as flash kernels do
    const float wr = round_to(p.in_dtype, w);
    const float* vj = &kv.v[size_t(j * p.dim_v)];
    for (int64_t d = 0; d < p.dim_v; ++d) acc[size_t(d)] += wr * vj[d];
  }
  const float norm = vd / sum;
  for (int64_t d = 0; d < p.dim_v; ++d) out[d] = round_to(p.out_dtype, acc[size_t(d)] * norm);
  if (lse) *lse = m + std::log(sum);
}

}  // namespace

void emulated_rows(const Args& a, const Problem& p, int64_t b, int64_t h, int64_t row_begin,
                   int64_t row_end, float* out, float* lse) {
  const SeqInfo s = seq_info(a, p, b);
  KvRows<float> kv;
  gather_kv(a, p, b, h / p.group, s, &kv);
  std::vector<float> q(size_t(p.dim_qk)), scores(size_t(s.k_len)), acc(size_t(p.dim_v));
  for (int64_t i = row_begin; i < row_end; ++i) {
    const int64_t r = i - row_begin;
    row_f32(a, p, s, kv, b, h, i, q, scores, acc, out + r * p.dim_v, lse ? lse + r : nullptr);
  }
}

void emulated_rows_at(const Args& a, const Problem& p, int64_t b, int64_t h, const int64_t* rows,
                      int64_t n, float* out, float* lse) {
  const SeqInfo s = seq_info(a, p, b);
  KvRows<float> kv;
  gather_kv(a, p, b, h / p.group, s, &kv);
  std::vector<float> q(size_t(p.dim_qk)), scores(size_t(s.k_len)), acc(size_t(p.dim_v));
  for (int64_t r = 0; r < n; ++r)
    row_f32(a, p, s, kv, b, h, rows[r], q, scores, acc, out + r * p.dim_v, lse ? lse + r : nullptr);
}

Status emulated_forward(const Args& a, const Problem& p) {
  parallel_for(p.batch * p.heads_kv, a.num_threads, [&](int64_t item) {
    const int64_t b = item / p.heads_kv, hk = item % p.heads_kv;
    const SeqInfo s = seq_info(a, p, b);
    if (s.q_len == 0) return;
    KvRows<float> kv;
    gather_kv(a, p, b, hk, s, &kv);
    std::vector<float> q(size_t(p.dim_qk)), scores(size_t(s.k_len)), acc(size_t(p.dim_v)),
        o(size_t(p.dim_v));
    for (int64_t h = hk * p.group; h < (hk + 1) * p.group; ++h)
      for (int64_t i = 0; i < s.q_len; ++i) {
        float lse;
        row_f32(a, p, s, kv, b, h, i, q, scores, acc, o.data(), &lse);
        const int64_t oo = out_offset(a, p, b, s, i, h);
        for (int64_t d = 0; d < p.dim_v; ++d) store_from_float(a.out.data, p.out_dtype, oo + d, o[size_t(d)]);
        if (p.has_lse) store_from_float(a.lse.data, DType::f32, lse_offset(a, p, b, s, i, h), lse);
      }
  });
  return Status::Ok();
}

}  // namespace longattn::detail
