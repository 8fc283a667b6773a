// combine() merges partial results over disjoint key sets into the full attention.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "common/problem.h"
#include "support/testing.h"

namespace longattn::testing {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Attention of the same queries over keys [begin, end) of `whole` (non-causal).
Case key_slice(const CaseSpec& s, const Case& whole, int64_t begin, int64_t end) {
  CaseSpec p = s;
  p.seq_k = end - begin;
  Case c = make_case(p);
  std::copy(whole.q.bytes.begin(), whole.q.bytes.end(), c.q.bytes.begin());
  const size_t krow = size_t(s.heads_kv * s.dim_qk) * 4, vrow = size_t(s.heads_kv * s.dim_v) * 4;
  std::memcpy(c.k.bytes.data(), whole.k.bytes.data() + size_t(begin) * krow, size_t(end - begin) * krow);
  std::memcpy(c.v.bytes.data(), whole.v.bytes.data() + size_t(begin) * vrow, size_t(end - begin) * vrow);
  EXPECT_TRUE(forward(c.args).ok());
  return c;
}

struct Partials {
  HostTensor out, lse;  // (splits, tokens, heads, dim), (splits, heads, tokens)
};

// Batch 1 makes dense out (1, seq, heads, dim) = (tokens, heads, dim) and lse (1, heads, seq) =
// (heads, tokens), so partials are plain concatenations.
Partials stack(const std::vector<const Case*>& parts) {
  const Tensor &o = parts[0]->out.t, &l = parts[0]->lse.t;
  Partials p;
  const int64_t n = int64_t(parts.size());
  p.out = empty_tensor(DType::f32, {n, o.shape[1], o.shape[2], o.shape[3]});
  p.lse = empty_tensor(DType::f32, {n, l.shape[1], l.shape[2]});
  for (int64_t s = 0; s < n; ++s) {
    std::memcpy(p.out.bytes.data() + size_t(s) * parts[size_t(s)]->out.bytes.size(),
                parts[size_t(s)]->out.bytes.data(), parts[size_t(s)]->out.bytes.size());
    std::memcpy(p.lse.bytes.data() + size_t(s) * parts[size_t(s)]->lse.bytes.size(),
                parts[size_t(s)]->lse.bytes.data(), parts[size_t(s)]->lse.bytes.size());
  }
  return p;
}

CaseSpec spec() {
  CaseSpec s;
  s.batch = 1, s.seq_q = 11, s.seq_k = 29, s.heads_q = 3, s.heads_kv = 1, s.dim_qk = 16, s.dim_v = 20;
  s.dtype = DType::f32, s.out_dtype = DType::f32, s.seed = 60;
  return s;
}

TEST(Combine, TwoHalvesEqualTheWhole) {
  const CaseSpec s = spec();
  Case whole = make_case(s);
  ASSERT_TRUE(forward(whole.args).ok());
  Case a = key_slice(s, whole, 0, 13), b = key_slice(s, whole, 13, 29);
  Partials p = stack({&a, &b});
  HostTensor out = empty_tensor(DType::f32, {11, 3, 20}), lse = empty_tensor(DType::f32, {3, 11});
  poison(out);
  poison(lse);
  CombineArgs c;
  c.out_partial = p.out.t, c.lse_partial = p.lse.t, c.out = out.t, c.lse = lse.t;
  ASSERT_TRUE(combine(c).ok());
  for (int64_t i = 0; i < out.t.numel(); ++i) ASSERT_NEAR(get(out, i), get(whole.out, i), 2e-6) << i;
  for (int64_t i = 0; i < lse.t.numel(); ++i) ASSERT_NEAR(get(lse, i), get(whole.lse, i), 2e-6) << i;
  // And the halves alone really differ from the whole (the test is not vacuous).
  double diff = 0;
  for (int64_t i = 0; i < out.t.numel(); ++i) diff = std::max(diff, std::fabs(get(a.out, i) - get(whole.out, i)));
  EXPECT_GT(diff, 1e-2);
}

// An empty partial (LSE -inf) contributes nothing, even if its output holds NaN.
TEST(Combine, EmptyPartialContributesNothing) {
  const CaseSpec s = spec();
  Case whole = make_case(s);
  ASSERT_TRUE(forward(whole.args).ok());
  Case empty = make_case(s);
  poison(empty.out);
  for (int64_t i = 0; i < empty.lse.t.numel(); ++i) static_cast<float*>(empty.lse.t.data)[i] = kNegInf;
  Partials p = stack({&empty, &whole, &empty});
  HostTensor out = empty_tensor(DType::f32, {11, 3, 20}), lse = empty_tensor(DType::f32, {3, 11});
  CombineArgs c;
  c.out_partial = p.out.t, c.lse_partial = p.lse.t, c.out = out.t, c.lse = lse.t;
  ASSERT_TRUE(combine(c).ok());
  EXPECT_TRUE(out.bytes == whole.out.bytes);
  EXPECT_TRUE(lse.bytes == whole.lse.bytes);
}

// Sinks under split-KV: the sink joins exactly one split's denominator, and that split may
// see no key at all. Its LSE must then be the sink (not -inf), or the merge loses the sink.
TEST(Combine, SinkCarriedByAKeylessSplit) {
  CaseSpec s = spec();
  s.sinks = true;
  Case whole = make_case(s);
  ASSERT_TRUE(forward(whole.args).ok());
  CaseSpec no_sink = s;
  no_sink.sinks = false;
  Case a = key_slice(s, whole, 0, 0);         // the sink and no key
  Case b = key_slice(no_sink, whole, 0, 29);  // every key, no sink
  for (int64_t i = 0; i < a.lse.t.numel(); ++i) {
    ASSERT_EQ(get(a.lse, i), get(a.sinks.t, {i / 11}));
    ASSERT_EQ(get(a.out, i), 0.0);
  }
  Partials p = stack({&a, &b});
  HostTensor out = empty_tensor(DType::f32, {11, 3, 20}), lse = empty_tensor(DType::f32, {3, 11});
  CombineArgs c;
  c.out_partial = p.out.t, c.lse_partial = p.lse.t, c.out = out.t, c.lse = lse.t;
  ASSERT_TRUE(combine(c).ok());
  for (int64_t i = 0; i < out.t.numel(); ++i) ASSERT_NEAR(get(out, i), get(whole.out, i), 2e-6) << i;
  for (int64_t i = 0; i < lse.t.numel(); ++i) ASSERT_NEAR(get(lse, i), get(whole.lse, i), 2e-6) << i;
}

// All partials empty: out 0 and lse -inf, never NaN.
TEST(Combine, AllEmptyGivesZeroAndMinusInf) {
  HostTensor op = random_tensor(DType::bf16, {2, 4, 2, 8}, 61);
  poison(op);
  HostTensor lp = empty_tensor(DType::f32, {2, 2, 4});
  for (int64_t i = 0; i < lp.t.numel(); ++i) static_cast<float*>(lp.t.data)[i] = kNegInf;
  HostTensor out = empty_tensor(DType::bf16, {4, 2, 8}), lse = empty_tensor(DType::f32, {2, 4});
  poison(out);
  poison(lse);
  CombineArgs c;
  c.out_partial = op.t, c.lse_partial = lp.t, c.out = out.t, c.lse = lse.t;
  ASSERT_TRUE(combine(c).ok());
  for (int64_t i = 0; i < out.t.numel(); ++i) ASSERT_EQ(get(out, i), 0.0);
  for (int64_t i = 0; i < lse.t.numel(); ++i) ASSERT_EQ(get(lse, i), -INFINITY);
}

// bf16 partials and a bf16 output: the merge matches within bf16 rounding.
TEST(Combine, Bf16PartialsWithinRounding) {
  CaseSpec s = spec();
  Case whole = make_case(s);
  ASSERT_TRUE(forward(whole.args).ok());
  Case a = key_slice(s, whole, 0, 7), b = key_slice(s, whole, 7, 29);
  Partials p = stack({&a, &b});
  HostTensor op = empty_tensor(DType::bf16, {2, 11, 3, 20});
  for (int64_t i = 0; i < op.t.numel(); ++i)
    detail::store_from_float(op.t.data, DType::bf16, i, static_cast<const float*>(p.out.t.data)[i]);
  HostTensor out = empty_tensor(DType::bf16, {11, 3, 20});
  CombineArgs c;
  c.out_partial = op.t, c.lse_partial = p.lse.t, c.out = out.t;
  ASSERT_TRUE(combine(c).ok());
  for (int64_t i = 0; i < out.t.numel(); ++i) {
    // |partials| <= 1: their rounding moves the result by <= 2^-9, the output's by 2^-9 |w|.
    ASSERT_NEAR(get(out, i), get(whole.out, i), 4e-3) << i;
  }
}

}  // namespace
}  // namespace longattn::testing
