#include "gpu_case.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>

#include "common/problem.h"
#include "reference/reference.h"

namespace longattn::gputest {
namespace {

struct DevBuf {
  void* p = nullptr;
  explicit DevBuf(size_t n) {
    if (cudaMalloc(&p, n ? n : 16) != cudaSuccess) p = nullptr;
  }
  ~DevBuf() { cudaFree(p); }
};

// Contiguous view, except that dimension 1 (tokens) may be padded by `pad` elements.
Tensor host_view(void* data, DType t, std::vector<int64_t> shape, Device dev = {}, int64_t pad = 0) {
  Tensor x;
  x.data = data;
  x.dtype = t;
  x.device = dev;
  x.rank = int(shape.size());
  int64_t st = 1;
  for (int i = x.rank - 1; i >= 0; --i) {
    x.shape[i] = shape[i];
    x.stride[i] = st;
    st *= shape[i];
    if (i == 2 && pad) st += pad;  // stride of dim 1 = heads * dim + pad
  }
  return x;
}

int64_t span(const Tensor& x) {  // elements covered by the view
  int64_t n = 1;
  for (int i = 0; i < x.rank; ++i) n += (x.shape[i] - 1) * x.stride[i];
  return n;
}

std::vector<uint8_t> random_bytes(DType t, int64_t n, float lo, float hi, std::mt19937_64& rng) {
  std::vector<uint8_t> b(size_t(n * dtype_size(t)));
  std::uniform_real_distribution<float> U(lo, hi);
  for (int64_t i = 0; i < n; ++i) detail::store_from_float(b.data(), t, i, U(rng));
  return b;
}

}  // namespace

std::string Shape::name() const {
  std::ostringstream o;
  o << "b" << batch << "_sq" << seq_q << "_sk" << seq_k << "_h" << heads_q << "x" << heads_kv << "_d" << dim
    << (causal ? (top_left ? "_causalTL" : "_causal") : "") << "_" << dtype_name(in) << "_out" << dtype_name(out)
    << (pad ? "_pad" + std::to_string(pad) : "") << (automatic ? "_auto" : "");
  if (top_left && !causal) o << "_TL";
  if (softcap > 0) o << "_cap" << int(softcap);
  if (sinks) o << "_sinks" << (sink_lo != -1.f ? "hi" : "");
  auto w = [](int64_t x) { return x < 0 ? std::string("n") : std::to_string(x); };
  if (window_left >= 0 || window_right >= 0) o << "_win" << w(window_left) << "x" << w(window_right);
  if (chunk > 0) o << "_chunk" << chunk;
  return o.str();
}

CheckResult run_case(const Shape& s, double atol) {
  CheckResult r;
  std::mt19937_64 rng(s.seed * 7919 + 17);
  const Device gpu{DeviceKind::cuda, 0};
  Args a;
  a.q = host_view(nullptr, s.in, {s.batch, s.seq_q, s.heads_q, s.dim}, gpu, s.pad);
  a.k = host_view(nullptr, s.in, {s.batch, s.seq_k, s.heads_kv, s.dim}, gpu, s.pad);
  a.v = host_view(nullptr, s.in, {s.batch, s.seq_k, s.heads_kv, s.dim}, gpu, s.pad);
  a.out = host_view(nullptr, s.out, {s.batch, s.seq_q, s.heads_q, s.dim}, gpu, s.pad);
  const int64_t nq = span(a.q), nk = span(a.k);
  auto hq = random_bytes(s.in, nq, -s.q_range, s.q_range, rng);
  auto hk = random_bytes(s.in, nk, -1.f, 1.f, rng);
  auto hv = random_bytes(s.in, nk, -1.f, 1.f, rng);
  const int64_t no = span(a.out), nl = s.batch * s.heads_q * s.seq_q;
  const size_t ob = size_t(no * dtype_size(s.out));

  std::vector<float> hsink(size_t(s.heads_q));
  {
    std::uniform_real_distribution<float> U(s.sink_lo, s.sink_hi);
    for (float& x : hsink) x = U(rng);
  }
  DevBuf dq(hq.size()), dk(hk.size()), dv(hv.size()), dout(ob), dlse(size_t(nl * 4)), dsink(hsink.size() * 4);
  if (!dq.p || !dk.p || !dv.p || !dout.p || !dlse.p || !dsink.p) {
    r.failure = "cudaMalloc failed";
    return r;
  }
  cudaMemcpy(dq.p, hq.data(), hq.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(dk.p, hk.data(), hk.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(dv.p, hv.data(), hv.size(), cudaMemcpyHostToDevice);
  cudaMemcpy(dsink.p, hsink.data(), hsink.size() * 4, cudaMemcpyHostToDevice);
  cudaMemset(dout.p, 0xFF, ob);  // NaN in bf16, f16 and f32
  cudaMemset(dlse.p, 0xFF, size_t(nl * 4));

  a.q.data = dq.p;
  a.k.data = dk.p;
  a.v.data = dv.p;
  a.out.data = dout.p;
  if (s.lse) a.lse = host_view(dlse.p, DType::f32, {s.batch, s.heads_q, s.seq_q}, gpu);
  a.mask.causal = s.causal;
  a.mask.align = s.top_left ? CausalAlign::top_left : CausalAlign::bottom_right;
  if (s.scale > 0) a.softmax_scale = s.scale;
  a.mask.window_left = s.window_left;
  a.mask.window_right = s.window_right;
  a.mask.chunk_size = s.chunk;
  a.softcap = s.softcap;
  if (s.sinks) a.sinks = host_view(dsink.p, DType::f32, {s.heads_q}, gpu);
  a.backend = s.automatic ? Backend::automatic : Backend::cuda;
  r.status = forward(a);
  if (!r.status.ok()) {
    r.failure = "forward: " + r.status.message();
    return r;
  }
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    r.failure = std::string("kernel: ") + cudaGetErrorString(e);
    return r;
  }
  r.out_bytes.resize(ob);
  std::vector<float> glse(static_cast<size_t>(nl));
  cudaMemcpy(r.out_bytes.data(), dout.p, ob, cudaMemcpyDeviceToHost);
  cudaMemcpy(glse.data(), dlse.p, size_t(nl * 4), cudaMemcpyDeviceToHost);
  // Every element of the view must be written (padding is not part of it).
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t i = 0; i < s.seq_q; ++i)
      for (int64_t hh = 0; hh < s.heads_q; ++hh)
        for (int64_t d = 0; d < s.dim; ++d)
          r.nan_out += std::isnan(detail::load_as_float(
              r.out_bytes.data(), s.out, b * a.out.stride[0] + i * a.out.stride[1] + hh * a.out.stride[2] + d));
  if (s.lse)
    for (float x : glse) r.nan_lse += std::isnan(x);

  // Reference on host copies of the same inputs.
  Args h = a;
  h.q.data = hq.data();
  h.k.data = hk.data();
  h.v.data = hv.data();
  std::vector<uint8_t> hout(ob);
  std::vector<float> hlse(static_cast<size_t>(nl));
  h.out.data = hout.data();
  h.lse.data = s.lse ? hlse.data() : nullptr;
  if (s.sinks) h.sinks.data = hsink.data();
  for (Tensor* t : {&h.q, &h.k, &h.v, &h.out, &h.lse, &h.sinks}) t->device = Device{};
  h.backend = Backend::reference;
  detail::Problem p;
  Status st = detail::build_problem(h, &p);
  if (!st.ok()) {
    r.failure = "reference problem: " + st.message();
    return r;
  }
  std::vector<int64_t> rows;
  if (s.seq_q <= s.rows_per_head) {
    for (int64_t i = 0; i < s.seq_q; ++i) rows.push_back(i);
  } else {  // first, last, tile edges, random
    for (int64_t i : {int64_t(0), int64_t(1), s.seq_q - 1, s.seq_q - 2, s.seq_q / 2, int64_t(127), int64_t(128)})
      if (i >= 0 && i < s.seq_q) rows.push_back(i);
    std::uniform_int_distribution<int64_t> R(0, s.seq_q - 1);
    while (int64_t(rows.size()) < s.rows_per_head) rows.push_back(R(rng));
  }
  std::vector<double> ref(size_t(s.dim));
  std::vector<float> emu(size_t(s.dim));
  double rl = 0;
  float el = 0;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t hh = 0; hh < s.heads_q; ++hh)
      for (int64_t i : rows) {
        detail::reference_rows(h, p, b, hh, i, i + 1, ref.data(), &rl);
        detail::emulated_rows(h, p, b, hh, i, i + 1, emu.data(), &el);
        for (int64_t d = 0; d < s.dim; ++d) {
          int64_t off = b * a.out.stride[0] + i * a.out.stride[1] + hh * a.out.stride[2] + d;
          double g = detail::load_as_float(r.out_bytes.data(), s.out, off);
          double err = std::fabs(g - ref[size_t(d)]);
          if (std::isnan(err)) err = INFINITY;
          r.max_err = std::max(r.max_err, err);
          r.naive_err = std::max(r.naive_err, std::fabs(double(emu[size_t(d)]) - ref[size_t(d)]));
        }
        if (s.lse) {
          double g = glse[size_t((b * s.heads_q + hh) * s.seq_q + i)];
          double err = (std::isinf(rl) && g == rl) ? 0.0 : std::fabs(g - rl);
          double nerr = (std::isinf(rl) && double(el) == rl) ? 0.0 : std::fabs(double(el) - rl);
          if (std::isnan(err)) err = INFINITY;
          r.lse_err = std::max(r.lse_err, err);
          r.lse_naive = std::max(r.lse_naive, nerr);
        }
        ++r.rows_checked;
      }
  std::ostringstream f;
  if (r.nan_out) f << r.nan_out << " NaN outputs (unwritten?); ";
  if (r.nan_lse) f << r.nan_lse << " NaN LSEs; ";
  if (!(r.max_err <= 2 * r.naive_err + atol))
    f << "out err " << r.max_err << " > 2*naive " << r.naive_err << " + " << atol << "; ";
  if (s.lse && !(r.lse_err <= 2 * r.lse_naive + atol))
    f << "lse err " << r.lse_err << " > 2*naive " << r.lse_naive << " + " << atol << "; ";
  r.failure = f.str();
  return r;
}

}  // namespace longattn::gputest
