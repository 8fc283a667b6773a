// The float64 reference against results known in closed form.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "common/problem.h"
#include "support/testing.h"

namespace longattn::testing {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Reads element (b, i, h, d) of a dense 4-d tensor.
double at(const HostTensor& x, int64_t b, int64_t i, int64_t h, int64_t d) {
  return get(x.t, {b, i, h, d});
}
double lse_at(const HostTensor& x, int64_t b, int64_t h, int64_t i) { return get(x.t, {b, h, i}); }

void run(Case& c) {
  poison(c.out);
  poison(c.lse);
  Status s = forward(c.args);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(count_nan(c.out), 0);
}

double dot(const HostTensor& q, const HostTensor& k, int64_t b, int64_t i, int64_t h, int64_t j,
           int64_t hk, int64_t dim) {
  double s = 0;
  for (int64_t d = 0; d < dim; ++d) s += at(q, b, i, h, d) * at(k, b, j, hk, d);
  return s;
}

// With every key equal (not q = 0, which would hide scale and q bugs), all logits of a row
// are equal, so the output is the plain mean of the visible values and the LSE is
// logit + log(count).
TEST(ClosedForm, EqualLogitsGiveMeanOfV) {
  CaseSpec s;
  s.batch = 2, s.seq_q = 9, s.seq_k = 13, s.heads_q = 4, s.heads_kv = 2, s.dim_qk = 24, s.dim_v = 40;
  s.out_dtype = DType::f32;
  s.mask.causal = true;
  s.seed = 11;
  Case c = make_case(s);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t j = 1; j < 13; ++j)
      for (int64_t hk = 0; hk < 2; ++hk)
        for (int64_t d = 0; d < 24; ++d) {  // copy key 0 over every other key
          auto* k = static_cast<uint16_t*>(c.k.t.data);
          k[b * c.k.t.stride[0] + j * c.k.t.stride[1] + hk * c.k.t.stride[2] + d] =
              k[b * c.k.t.stride[0] + hk * c.k.t.stride[2] + d];
        }
  run(c);
  const double scale = 1.0 / std::sqrt(24.0);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 4; ++h)
      for (int64_t i = 0; i < 9; ++i) {
        const int64_t n = i + 13 - 9 + 1;  // bottom-right causal: keys 0..i+4
        for (int64_t d = 0; d < 40; ++d) {
          double mean = 0;
          for (int64_t j = 0; j < n; ++j) mean += at(c.v, b, j, h / 2, d);
          mean /= double(n);
          ASSERT_NEAR(at(c.out, b, i, h, d), mean, 1e-6) << b << " " << h << " " << i << " " << d;
        }
        const double logit = scale * dot(c.q, c.k, b, i, h, 0, h / 2, 24);
        ASSERT_NEAR(lse_at(c.lse, b, h, i), logit + std::log(double(n)), 1e-5);
      }
}

// A window of width zero on both sides leaves exactly key i: out = v_i, lse = s_ii.
TEST(ClosedForm, OneVisibleKeyReturnsItsV) {
  CaseSpec s;
  s.batch = 1, s.seq_q = 11, s.seq_k = 11, s.heads_q = 3, s.heads_kv = 3, s.dim_qk = 16, s.dim_v = 8;
  s.out_dtype = DType::f32;
  s.mask.window_left = 0, s.mask.window_right = 0;
  s.softmax_scale = 0.37f;
  s.seed = 12;
  Case c = make_case(s);
  run(c);
  for (int64_t h = 0; h < 3; ++h)
    for (int64_t i = 0; i < 11; ++i) {
      for (int64_t d = 0; d < 8; ++d) ASSERT_EQ(at(c.out, 0, i, h, d), at(c.v, 0, i, h, d));
      ASSERT_NEAR(lse_at(c.lse, 0, h, i), double(0.37f) * dot(c.q, c.k, 0, i, h, i, h, 16), 1e-6);
    }
}

// Top-left causal: query 0 sees key 0 only, whatever seq_k is.
TEST(ClosedForm, TopLeftFirstQuerySeesFirstKey) {
  CaseSpec s;
  s.batch = 2, s.seq_q = 5, s.seq_k = 9, s.heads_q = 2, s.heads_kv = 1, s.dim_qk = 8, s.dim_v = 8;
  s.out_dtype = DType::f32;
  s.mask.causal = true;
  s.mask.align = CausalAlign::top_left;
  Case c = make_case(s);
  run(c);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t d = 0; d < 8; ++d) ASSERT_EQ(at(c.out, b, 0, h, d), at(c.v, b, 0, 0, d));
}

// Direct evaluation of softmax(cap * tanh(scale * q.k / cap)) with a sink, on a tiny case.
TEST(ClosedForm, SoftcapAndSinkMatchDirectFormula) {
  CaseSpec s;
  s.batch = 1, s.seq_q = 4, s.seq_k = 6, s.heads_q = 2, s.heads_kv = 1, s.dim_qk = 8, s.dim_v = 5;
  s.out_dtype = DType::f32;
  s.dtype = DType::f32;
  s.softcap = 1.5f;
  s.softmax_scale = 0.9f;
  s.sinks = true;
  s.amp = 2.0f;  // large logits: the cap really bends them
  s.seed = 13;
  Case c = make_case(s);
  run(c);
  for (int64_t h = 0; h < 2; ++h) {
    const double sink = get(c.sinks.t, {h});
    for (int64_t i = 0; i < 4; ++i) {
      std::vector<double> p(6);
      double sum = std::exp(sink);
      for (int64_t j = 0; j < 6; ++j) {
        double x = double(0.9f) * dot(c.q, c.k, 0, i, h, j, 0, 8);
        x = 1.5 * std::tanh(x / 1.5);
        p[size_t(j)] = std::exp(x);
        sum += p[size_t(j)];
      }
      for (int64_t d = 0; d < 5; ++d) {
        double o = 0;
        for (int64_t j = 0; j < 6; ++j) o += p[size_t(j)] * at(c.v, 0, j, 0, d);
        ASSERT_NEAR(at(c.out, 0, i, h, d), o / sum, 1e-6);
      }
      ASSERT_NEAR(lse_at(c.lse, 0, h, i), std::log(sum), 1e-6);
    }
  }
}

// Softcap changes the result, so the test above is not vacuous.
TEST(ClosedForm, SoftcapIsNotANoOp) {
  CaseSpec s;
  s.dtype = DType::f32, s.out_dtype = DType::f32, s.amp = 2.0f, s.seed = 14;
  Case a = make_case(s);
  s.softcap = 0.5f;
  Case b = make_case(s);
  run(a);
  run(b);
  double diff = 0;
  for (int64_t i = 0; i < a.out.t.numel(); ++i) diff = std::max(diff, std::fabs(get(a.out, i) - get(b.out, i)));
  EXPECT_GT(diff, 1e-3);
}

// A sink of -inf adds exp(-inf) = 0 to the denominator: bitwise the same result.
TEST(ClosedForm, MinusInfSinkChangesNothing) {
  CaseSpec s;
  s.mask.causal = true, s.out_dtype = DType::f32, s.seed = 15;
  Case plain = make_case(s);
  s.sinks = true;
  Case sunk = make_case(s);
  for (int64_t h = 0; h < s.heads_q; ++h) static_cast<float*>(sunk.sinks.t.data)[h] = -INFINITY;
  run(plain);
  run(sunk);
  EXPECT_TRUE(plain.out.bytes == sunk.out.bytes);
  EXPECT_TRUE(plain.lse.bytes == sunk.lse.bytes);
}

// A finite sink lowers every weight by the same factor: out_sink = out * (1 - exp(sink - lse_sink)).
TEST(ClosedForm, SinkScalesOutputByItsShare) {
  CaseSpec s;
  s.dtype = DType::f32, s.out_dtype = DType::f32, s.seed = 16;
  Case plain = make_case(s);
  s.sinks = true;
  Case sunk = make_case(s);
  run(plain);
  run(sunk);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads_q; ++h)
      for (int64_t i = 0; i < s.seq_q; ++i) {
        const double share = std::exp(get(sunk.sinks.t, {h}) - lse_at(sunk.lse, b, h, i));
        for (int64_t d = 0; d < s.dim_v; ++d)
          ASSERT_NEAR(at(sunk.out, b, i, h, d), at(plain.out, b, i, h, d) * (1 - share), 1e-6);
      }
}

// A window wider than the sequence on both sides masks nothing.
TEST(ClosedForm, WindowCoveringEverythingEqualsNoMask) {
  CaseSpec s;
  s.seq_q = 19, s.seq_k = 31, s.seed = 17;
  Case plain = make_case(s);
  s.mask.window_left = 31, s.mask.window_right = 50;
  Case wide = make_case(s);
  run(plain);
  run(wide);
  EXPECT_TRUE(plain.out.bytes == wide.out.bytes);
  EXPECT_TRUE(plain.lse.bytes == wide.lse.bytes);
}

// Huge windows and chunks (INT64_MAX) behave like unbounded ones, without overflow.
TEST(ClosedForm, HugeWindowAndChunkEqualNoLimit) {
  CaseSpec s;
  s.seq_q = 19, s.seq_k = 7, s.seed = 23;  // seq_q > seq_k: negative positions occur
  s.mask.causal = true;
  Case causal = make_case(s);
  s.mask.window_left = INT64_MAX;
  Case window = make_case(s);
  s.mask.window_left = -1, s.mask.chunk_size = INT64_MAX;
  Case chunk = make_case(s);
  run(causal);
  run(window);
  run(chunk);
  EXPECT_TRUE(causal.out.bytes == window.out.bytes);
  EXPECT_TRUE(causal.out.bytes == chunk.out.bytes);
  CaseSpec r;
  r.seq_q = 19, r.seq_k = 7, r.seed = 23, r.mask.window_right = INT64_MAX;
  Case right = make_case(r);
  r.mask.window_right = -1;
  Case none = make_case(r);
  run(right);
  run(none);
  EXPECT_TRUE(right.out.bytes == none.out.bytes);
}

// Causal is the same as a window (unbounded left, 0 right).
TEST(ClosedForm, CausalEqualsZeroRightWindow) {
  CaseSpec s;
  s.seq_q = 19, s.seq_k = 31, s.seed = 18;
  s.mask.causal = true;
  Case causal = make_case(s);
  s.mask.causal = false, s.mask.window_right = 0;
  Case window = make_case(s);
  run(causal);
  run(window);
  EXPECT_TRUE(causal.out.bytes == window.out.bytes);
}

// Bottom-right causal with more queries than keys: the first seq_q - seq_k rows see no key.
// They give exactly 0 and LSE -inf (with seqused_k = 0 too); with a sink the LSE is the
// log of the sink-only denominator, i.e. the sink itself.
TEST(ClosedForm, FullyMaskedRowsGiveZeroAndMinusInf) {
  for (bool sinks : {false, true}) {
    CaseSpec s;
    s.batch = 2, s.seq_q = 12, s.seq_k = 5, s.mask.causal = true, s.sinks = sinks, s.seed = 19;
    s.seqused_k = true;  // sequence 1 uses a random count <= 5, possibly 0
    Case c = make_case(s);
    static_cast<int32_t*>(c.seqused_k.t.data)[1] = 0;
    run(c);
    for (int64_t h = 0; h < s.heads_q; ++h)
      for (int64_t i = 0; i < 12; ++i) {
        const bool empty0 = i < 12 - 5;
        const double empty_lse = sinks ? get(c.sinks.t, {h}) : -kInf;
        if (empty0) {
          for (int64_t d = 0; d < s.dim_v; ++d) ASSERT_EQ(at(c.out, 0, i, h, d), 0.0);
          ASSERT_EQ(lse_at(c.lse, 0, h, i), empty_lse);
        } else {
          ASSERT_GT(lse_at(c.lse, 0, h, i), -kInf);
        }
        for (int64_t d = 0; d < s.dim_v; ++d) ASSERT_EQ(at(c.out, 1, i, h, d), 0.0);
        ASSERT_EQ(lse_at(c.lse, 1, h, i), empty_lse);
      }
  }
}

// Chunked attention with causal: a query in chunk c sees only keys of chunk c up to itself,
// so rows of a chunk equal a separate causal problem over that chunk alone.
TEST(ClosedForm, ChunkedEqualsSeparateChunks) {
  CaseSpec s;
  s.batch = 1, s.seq_q = 14, s.seq_k = 14, s.heads_q = 2, s.heads_kv = 1, s.dim_qk = 8, s.dim_v = 8;
  s.dtype = DType::f32, s.out_dtype = DType::f32, s.seed = 20;
  s.mask.causal = true, s.mask.chunk_size = 5;
  Case c = make_case(s);
  run(c);
  for (int64_t start = 0; start < 14; start += 5) {
    const int64_t len = std::min<int64_t>(5, 14 - start);
    CaseSpec cs = s;
    cs.seq_q = cs.seq_k = len;
    cs.mask.chunk_size = 0;
    Case part = make_case(cs);
    for (int64_t i = 0; i < len; ++i)
      for (int64_t d = 0; d < 8; ++d) {
        static_cast<float*>(part.q.t.data)[(i * 2 + 0) * 8 + d] = float(at(c.q, 0, start + i, 0, d));
        static_cast<float*>(part.q.t.data)[(i * 2 + 1) * 8 + d] = float(at(c.q, 0, start + i, 1, d));
        static_cast<float*>(part.k.t.data)[i * 8 + d] = float(at(c.k, 0, start + i, 0, d));
        static_cast<float*>(part.v.t.data)[i * 8 + d] = float(at(c.v, 0, start + i, 0, d));
      }
    run(part);
    for (int64_t i = 0; i < len; ++i)
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t d = 0; d < 8; ++d) ASSERT_EQ(at(c.out, 0, start + i, h, d), at(part.out, 0, i, h, d));
  }
}

// A NaN key poisons exactly the rows that see it (causal: the rows at or after it), and
// the masked rows stay finite: masking removes a key, it does not multiply it by zero.
TEST(ClosedForm, NanKeyReachesOnlyRowsThatSeeIt) {
  CaseSpec s;
  s.batch = 1, s.seq_q = s.seq_k = 12, s.heads_q = 2, s.heads_kv = 1, s.dim_qk = 8, s.dim_v = 8;
  s.mask.causal = true, s.out_dtype = DType::f32, s.seed = 24;
  Case c = make_case(s);
  detail::store_from_float(c.k.t.data, DType::bf16, 7 * 8 + 3, NAN);  // key 7, dim 3
  ASSERT_TRUE(forward(c.args).ok());
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 12; ++i) {
      ASSERT_EQ(std::isnan(at(c.out, 0, i, h, 0)), i >= 7) << "row " << i;
      ASSERT_EQ(std::isnan(lse_at(c.lse, 0, h, i)), i >= 7) << "row " << i;
    }
}

// Query head h reads kv head h / (heads_q / heads_kv): GQA equals MHA with K/V heads repeated.
TEST(ClosedForm, GqaHeadMapping) {
  CaseSpec s;
  s.batch = 2, s.seq_q = 7, s.seq_k = 9, s.heads_q = 6, s.heads_kv = 2, s.dim_qk = 8, s.dim_v = 12;
  s.mask.causal = true, s.seed = 21;
  Case gqa = make_case(s);
  CaseSpec m = s;
  m.heads_kv = 6;
  Case mha = make_case(m);
  std::copy(gqa.q.bytes.begin(), gqa.q.bytes.end(), mha.q.bytes.begin());
  auto* kd = static_cast<uint16_t*>(mha.k.t.data);
  auto* vd = static_cast<uint16_t*>(mha.v.t.data);
  const auto* ks = static_cast<const uint16_t*>(gqa.k.t.data);
  const auto* vs = static_cast<const uint16_t*>(gqa.v.t.data);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t j = 0; j < 9; ++j)
      for (int64_t h = 0; h < 6; ++h) {
        for (int64_t d = 0; d < 8; ++d) kd[((b * 9 + j) * 6 + h) * 8 + d] = ks[((b * 9 + j) * 2 + h / 3) * 8 + d];
        for (int64_t d = 0; d < 12; ++d) vd[((b * 9 + j) * 6 + h) * 12 + d] = vs[((b * 9 + j) * 2 + h / 3) * 12 + d];
      }
  run(gqa);
  run(mha);
  EXPECT_TRUE(gqa.out.bytes == mha.out.bytes);
  EXPECT_TRUE(gqa.lse.bytes == mha.lse.bytes);
}

// fp8: the reference on e4m3 data with descales equals the reference on the dequantized
// values in f32. Descales with few significant bits keep the dequantized products exact.
TEST(ClosedForm, Fp8EqualsF32OnDequantizedData) {
  CaseSpec s;
  s.batch = 2, s.seq_q = 6, s.seq_k = 10, s.heads_q = 4, s.heads_kv = 2, s.dim_qk = 16, s.dim_v = 16;
  s.dtype = DType::e4m3, s.out_dtype = DType::f32, s.mask.causal = true, s.amp = 3.0f, s.seed = 22;
  Case f8 = make_case(s);
  const float pick[] = {0.5f, 1.25f, 2.0f, 0.75f, 1.5f};
  int n = 0;
  for (HostTensor* d : {&f8.q_descale, &f8.k_descale, &f8.v_descale})
    for (int64_t i = 0; i < 4; ++i) static_cast<float*>(d->t.data)[i] = pick[n++ % 5];
  CaseSpec fs = s;
  fs.dtype = DType::f32;
  Case f32 = make_case(fs);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 4; ++h)
      for (int64_t i = 0; i < 6; ++i)
        for (int64_t d = 0; d < 16; ++d)
          static_cast<float*>(f32.q.t.data)[((b * 6 + i) * 4 + h) * 16 + d] =
              float(at(f8.q, b, i, h, d) * get(f8.q_descale.t, {b, h / 2}));
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t j = 0; j < 10; ++j)
      for (int64_t hk = 0; hk < 2; ++hk)
        for (int64_t d = 0; d < 16; ++d) {
          static_cast<float*>(f32.k.t.data)[((b * 10 + j) * 2 + hk) * 16 + d] =
              float(at(f8.k, b, j, hk, d) * get(f8.k_descale.t, {b, hk}));
          static_cast<float*>(f32.v.t.data)[((b * 10 + j) * 2 + hk) * 16 + d] =
              float(at(f8.v, b, j, hk, d) * get(f8.v_descale.t, {b, hk}));
        }
  run(f8);
  run(f32);
  for (int64_t i = 0; i < f8.out.t.numel(); ++i) ASSERT_NEAR(get(f8.out, i), get(f32.out, i), 1e-6) << i;
  for (int64_t i = 0; i < f8.lse.t.numel(); ++i) ASSERT_NEAR(get(f8.lse, i), get(f32.lse, i), 1e-5) << i;
}

}  // namespace
}  // namespace longattn::testing
