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
    << (dim_v > 0 && dim_v != dim ? "x" + std::to_string(dim_v) : "")
    << (causal ? (top_left ? "_causalTL" : "_causal") : "") << "_" << dtype_name(in) << "_out" << dtype_name(out)
    << (pad ? "_pad" + std::to_string(pad) : "") << (out_pad >= 0 ? "_opad" + std::to_string(out_pad) : "")
    << (automatic ? "_auto" : "");
  if (top_left && !causal) o << "_TL";
  if (softcap > 0) o << "_cap" << int(softcap);
  if (sinks) o << "_sinks" << (sink_lo != -1.f ? "hi" : "");
  auto w = [](int64_t x) { return x < 0 ? std::string("n") : std::to_string(x); };
  if (window_left >= 0 || window_right >= 0) o << "_win" << w(window_left) << "x" << w(window_right);
  if (chunk > 0) o << "_chunk" << chunk;
  if (!lens_q.empty()) o << "_raggedq" << lens_q.size();
  if (!lens_k.empty()) o << "_raggedk" << lens_k.size();
  if (!used_k.empty()) o << "_seqused";
  if (!used_q.empty()) o << "_usedq";
  if (unread != 0.f) o << (std::isnan(unread) ? "_unreadNaN" : "_unreadInf");
  if (!lens_q.empty() || !lens_k.empty() || !used_q.empty()) o << "_s" << seed;
  return o.str();
}

int64_t poison_unread_kv(const Args& h, float value) {
  detail::Problem p;
  if (!detail::build_problem(h, &p).ok()) return -1;
  int64_t n = 0;
  for (const Tensor* t : {&h.k, &h.v}) {
    std::vector<uint8_t> read(size_t(span(*t)), 0);
    const int64_t dim = t->shape[t->rank - 1];
    for (int64_t b = 0; b < p.batch; ++b) {
      const detail::SeqInfo si = detail::seq_info(h, p, b);
      if (si.q_len == 0) continue;  // nothing reads this sequence's keys
      for (int64_t j = 0; j < si.k_len; ++j)
        for (int64_t hk = 0; hk < p.heads_kv; ++hk) {
          const int64_t off = t == &h.k ? detail::k_offset(h, p, b, si, j, hk) : detail::v_offset(h, p, b, si, j, hk);
          std::fill_n(read.begin() + off, dim, uint8_t(1));
        }
    }
    for (size_t i = 0; i < read.size(); ++i)
      if (!read[i]) {
        detail::store_from_float(t->data, t->dtype, int64_t(i), value);
        ++n;
      }
  }
  return n;
}

namespace {
int64_t sum_of(const std::vector<int32_t>& v) {
  int64_t n = 0;
  for (int32_t x : v) n += x;
  return n;
}
int32_t max_of(const std::vector<int32_t>& v) {
  int32_t m = 0;
  for (int32_t x : v) m = std::max(m, x);
  return m;
}
std::vector<int32_t> cumulative(const std::vector<int32_t>& v) {
  std::vector<int32_t> c(1, 0);
  for (int32_t x : v) c.push_back(c.back() + x);
  return c;
}
}  // namespace

CheckResult run_case(const Shape& s, double atol) {
  CheckResult r;
  std::mt19937_64 rng(s.seed * 7919 + 17);
  const Device gpu{DeviceKind::cuda, 0};
  const bool rq = !s.lens_q.empty(), rk = !s.lens_k.empty(), ru = !s.used_k.empty(), ruq = !s.used_q.empty();
  const int64_t batch = rq ? int64_t(s.lens_q.size()) : rk ? int64_t(s.lens_k.size()) : s.batch;
  const int64_t max_q = rq ? max_of(s.lens_q) : s.seq_q, total_q = rq ? sum_of(s.lens_q) : batch * s.seq_q;
  const int64_t pad = (rq || rk) ? 0 : s.pad;
  Args a;
  a.q = rq ? host_view(nullptr, s.in, {total_q, s.heads_q, s.dim}, gpu)
           : host_view(nullptr, s.in, {batch, s.seq_q, s.heads_q, s.dim}, gpu, pad);
  a.k = rk ? host_view(nullptr, s.in, {sum_of(s.lens_k), s.heads_kv, s.dim}, gpu)
           : host_view(nullptr, s.in, {batch, s.seq_k, s.heads_kv, s.dim}, gpu, pad);
  const int64_t dim_v = s.dim_v > 0 ? s.dim_v : s.dim;
  a.v = rk ? host_view(nullptr, s.in, {sum_of(s.lens_k), s.heads_kv, dim_v}, gpu)
           : host_view(nullptr, s.in, {batch, s.seq_k, s.heads_kv, dim_v}, gpu, pad);
  const int64_t out_pad = s.out_pad >= 0 ? s.out_pad : pad;
  a.out = rq ? host_view(nullptr, s.out, {total_q, s.heads_q, dim_v}, gpu, out_pad)
             : host_view(nullptr, s.out, {batch, s.seq_q, s.heads_q, dim_v}, gpu, out_pad);
  const int64_t nq = span(a.q), nk = span(a.k);
  auto hq = random_bytes(s.in, nq, -s.q_range, s.q_range, rng);
  auto hk = random_bytes(s.in, nk, -1.f, 1.f, rng);
  auto hv = random_bytes(s.in, span(a.v), -1.f, 1.f, rng);
  const int64_t no = span(a.out), nl = total_q * s.heads_q;
  const size_t ob = size_t(no * dtype_size(s.out));
  // Ragged metadata (int32, device copies below; host copies for the reference).
  std::vector<int32_t> cu_q = rq ? cumulative(s.lens_q) : std::vector<int32_t>{},
                       cu_k = rk ? cumulative(s.lens_k) : std::vector<int32_t>{}, used = s.used_k,
                       used_q = s.used_q;
  DevBuf dcq(cu_q.size() * 4), dck(cu_k.size() * 4), dused(used.size() * 4), dusedq(used_q.size() * 4);
  cudaMemcpy(dcq.p, cu_q.data(), cu_q.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dck.p, cu_k.data(), cu_k.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dused.p, used.data(), used.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dusedq.p, used_q.data(), used_q.size() * 4, cudaMemcpyHostToDevice);
  if (rq) a.cu_seqlens_q = host_view(dcq.p, DType::i32, {batch + 1}, gpu);
  if (rk) a.cu_seqlens_k = host_view(dck.p, DType::i32, {batch + 1}, gpu);
  if (ru) a.seqused_k = host_view(dused.p, DType::i32, {batch}, gpu);
  if (ruq) a.seqused_q = host_view(dusedq.p, DType::i32, {batch}, gpu);
  if (rq) a.max_seqlen_q = ruq ? max_of(used_q) : max_q;  // the longest after seqused_q
  if (rk || ru) a.max_seqlen_k = rk ? max_of(s.lens_k) : s.seq_k;

  std::vector<float> hsink(size_t(s.heads_q));
  {
    std::uniform_real_distribution<float> U(s.sink_lo, s.sink_hi);
    for (float& x : hsink) x = U(rng);
  }
  if (s.unread != 0.f) {  // host view of the same problem, metadata on the host
    Args u = a;
    u.q.data = hq.data();
    u.k.data = hk.data();
    u.v.data = hv.data();
    u.cu_seqlens_q.data = rq ? cu_q.data() : nullptr;
    u.cu_seqlens_k.data = rk ? cu_k.data() : nullptr;
    u.seqused_k.data = ru ? used.data() : nullptr;
    u.seqused_q.data = ruq ? used_q.data() : nullptr;
    for (Tensor* t : {&u.q, &u.k, &u.v, &u.out, &u.cu_seqlens_q, &u.cu_seqlens_k, &u.seqused_k, &u.seqused_q})
      t->device = Device{};
    std::vector<uint8_t> scratch(ob);  // out: described, never written (no aliasing)
    u.out.data = scratch.data();
    u.backend = Backend::reference;
    r.unread_set = poison_unread_kv(u, s.unread);
    if (r.unread_set < 0) {
      r.failure = "poison_unread_kv: not a valid host problem";
      return r;
    }
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
  if (s.lse)
    a.lse = rq ? host_view(dlse.p, DType::f32, {s.heads_q, total_q}, gpu)
               : host_view(dlse.p, DType::f32, {batch, s.heads_q, s.seq_q}, gpu);
  a.mask.causal = s.causal;
  a.mask.align = s.top_left ? CausalAlign::top_left : CausalAlign::bottom_right;
  if (s.scale > 0) a.softmax_scale = s.scale;
  a.mask.window_left = s.window_left;
  a.mask.window_right = s.window_right;
  a.mask.chunk_size = s.chunk;
  a.l2_budget_bytes = s.l2_budget;
  a.softcap = s.softcap;
  if (s.sinks) a.sinks = host_view(dsink.p, DType::f32, {s.heads_q}, gpu);
  a.backend = s.automatic ? Backend::automatic : Backend::cuda;
  r.status = detail::forward_with(a, s.ov);
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
  // Every element of a used row must be written (padding is not part of the view); rows past
  // seqused_q must still hold the poison. Dense: row (b, i); ragged: token t of sequence b.
  auto row_used = [&](int64_t b, int64_t i) { return !ruq || i < used_q[size_t(b)]; };
  auto token_used = [&](int64_t t) {
    for (int64_t b = 0; b < batch; ++b)
      if (t < cu_q[size_t(b + 1)]) return row_used(b, t - cu_q[size_t(b)]);
    return false;
  };
  {
    const Tensor& o = a.out;
    const int64_t n0 = o.shape[0], n1 = o.shape[1], n2 = o.shape[2], n3 = o.rank == 4 ? o.shape[3] : 1;
    for (int64_t i0 = 0; i0 < n0; ++i0)
      for (int64_t i1 = 0; i1 < n1; ++i1) {
        const bool used_row = rq ? token_used(i0) : row_used(i0, i1);
        for (int64_t i2 = 0; i2 < n2; ++i2)
          for (int64_t i3 = 0; i3 < n3; ++i3) {
            const bool nan = std::isnan(detail::load_as_float(
                r.out_bytes.data(), s.out,
                i0 * o.stride[0] + i1 * o.stride[1] + i2 * o.stride[2] + (o.rank == 4 ? i3 * o.stride[3] : 0)));
            if (used_row) r.nan_out += nan;
            else r.written_past += !nan;
          }
      }
  }
  if (s.lse)
    for (int64_t i = 0; i < nl; ++i) {  // dense (batch, heads, seq_q); ragged (heads, total_q)
      const bool used_row = rq ? token_used(i % total_q) : row_used(i / (s.heads_q * s.seq_q), i % s.seq_q);
      const bool nan = std::isnan(glse[size_t(i)]);
      if (used_row) r.nan_lse += nan;
      else r.written_past += !nan;
    }

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
  h.cu_seqlens_q.data = rq ? cu_q.data() : nullptr;
  h.cu_seqlens_k.data = rk ? cu_k.data() : nullptr;
  h.seqused_k.data = ru ? used.data() : nullptr;
  h.seqused_q.data = ruq ? used_q.data() : nullptr;
  for (Tensor* t : {&h.q, &h.k, &h.v, &h.out, &h.lse, &h.sinks, &h.cu_seqlens_q, &h.cu_seqlens_k, &h.seqused_k,
                    &h.seqused_q})
    t->device = Device{};
  h.backend = Backend::reference;
  detail::Problem p;
  Status st = detail::build_problem(h, &p);
  if (!st.ok()) {
    r.failure = "reference problem: " + st.message();
    return r;
  }
  std::vector<double> ref(static_cast<size_t>(dim_v));
  std::vector<float> emu(static_cast<size_t>(dim_v));
  double rl = 0;
  float el = 0;
  for (int64_t b = 0; b < batch; ++b) {
    const detail::SeqInfo si = detail::seq_info(h, p, b);
    const int64_t len = si.q_len;
    std::vector<int64_t> rows;
    if (len <= s.rows_per_head) {
      for (int64_t i = 0; i < len; ++i) rows.push_back(i);
    } else {  // first, last, tile edges, random
      for (int64_t i : {int64_t(0), int64_t(1), len - 1, len - 2, len / 2, int64_t(127), int64_t(128)})
        if (i >= 0 && i < len) rows.push_back(i);
      std::uniform_int_distribution<int64_t> R(0, len - 1);
      while (int64_t(rows.size()) < s.rows_per_head) rows.push_back(R(rng));
    }
    for (int64_t hh = 0; hh < s.heads_q; ++hh)
      for (int64_t i : rows) {
        detail::reference_rows(h, p, b, hh, i, i + 1, ref.data(), &rl);
        detail::emulated_rows(h, p, b, hh, i, i + 1, emu.data(), &el);
        const int64_t ooff = detail::out_offset(h, p, b, si, i, hh);
        for (int64_t d = 0; d < dim_v; ++d) {
          double g = detail::load_as_float(r.out_bytes.data(), s.out, ooff + d);
          double err = std::fabs(g - ref[size_t(d)]);
          if (std::isnan(err)) err = INFINITY;
          r.max_err = std::max(r.max_err, err);
          r.naive_err = std::max(r.naive_err, std::fabs(double(emu[size_t(d)]) - ref[size_t(d)]));
        }
        if (s.lse) {
          double g = glse[size_t(detail::lse_offset(h, p, b, si, i, hh))];
          double err = (std::isinf(rl) && g == rl) ? 0.0 : std::fabs(g - rl);
          double nerr = (std::isinf(rl) && double(el) == rl) ? 0.0 : std::fabs(double(el) - rl);
          if (std::isnan(err)) err = INFINITY;
          r.lse_err = std::max(r.lse_err, err);
          r.lse_naive = std::max(r.lse_naive, nerr);
        }
        ++r.rows_checked;
      }
  }
  std::ostringstream f;
  if (r.nan_out) f << r.nan_out << " NaN outputs (unwritten?); ";
  if (r.nan_lse) f << r.nan_lse << " NaN LSEs; ";
  if (r.written_past) f << r.written_past << " out / LSE elements written past seqused_q; ";
  if (!(r.max_err <= 2 * r.naive_err + atol))
    f << "out err " << r.max_err << " > 2*naive " << r.naive_err << " + " << atol << "; ";
  if (s.lse && !(r.lse_err <= 2 * r.lse_naive + atol))
    f << "lse err " << r.lse_err << " > 2*naive " << r.lse_naive << " + " << atol << "; ";
  r.failure = f.str();
  return r;
}

}  // namespace longattn::gputest
