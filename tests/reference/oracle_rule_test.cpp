// The oracle-rule checker (tests/support) passes correct outputs over every feature, and
// -- just as important -- fails wrong ones: a check that cannot fail proves nothing.
#include <gtest/gtest.h>

#include <cmath>

#include "common/problem.h"
#include "reference/reference.h"
#include "support/testing.h"

namespace longattn::testing {
namespace {

std::vector<CaseSpec> feature_specs() {
  std::vector<CaseSpec> v;
  CaseSpec s;
  s.seq_q = 33, s.seq_k = 47, s.seed = 70;
  v.push_back(s);  // plain bf16 GQA
  CaseSpec c = s;
  c.mask.causal = true, c.dtype = DType::f16, c.out_dtype = DType::f32;
  v.push_back(c);
  CaseSpec w = s;
  w.mask.window_left = 5, w.mask.window_right = 3, w.sinks = true, w.softcap = 2.0f;
  w.out_dtype = DType::f16;
  v.push_back(w);
  CaseSpec ch = s;
  ch.mask.causal = true, ch.mask.chunk_size = 8, ch.mask.align = CausalAlign::top_left;
  v.push_back(ch);
  CaseSpec r = s;
  r.ragged_q = r.ragged_k = true, r.batch = 4, r.seqused_k = true, r.mask.causal = true;
  v.push_back(r);
  CaseSpec p = s;
  p.page_size = 4, p.seqused_k = true, p.padded = true, p.dim_qk = 40, p.dim_v = 24;
  v.push_back(p);
  CaseSpec f8 = s;
  f8.dtype = DType::e4m3, f8.mask.causal = true;
  v.push_back(f8);
  CaseSpec f32 = s;
  f32.dtype = DType::f32, f32.out_dtype = DType::f32, f32.heads_q = 8, f32.heads_kv = 1;
  v.push_back(f32);
  return v;
}

TEST(OracleRule, ReferencePassesOnEveryFeature) {
  int n = 0;
  for (const CaseSpec& s : feature_specs()) {
    Case c = make_case(s);
    OracleResult r = run_and_check(c.args);
    EXPECT_TRUE(r.failure.empty()) << describe(s) << ": " << r.failure;
    EXPECT_GT(r.naive_err, 0.0) << "spec " << n << ": the naive baseline must differ from float64";
    ++n;
  }
}

// The emulated-precision result is itself within the bound (it defines it), and its error
// is of the size expected for bf16 (not 0, not huge).
TEST(OracleRule, EmulatedIsNaiveSized) {
  Case c = make_case(CaseSpec{});
  detail::Problem p;
  ASSERT_TRUE(detail::build_problem(c.args, &p).ok());
  poison(c.out);
  ASSERT_TRUE(detail::emulated_forward(c.args, p).ok());
  OracleResult r = check_against_reference(c.args);
  EXPECT_TRUE(r.failure.empty()) << r.failure;
  EXPECT_GT(r.max_err, 1e-5);
  EXPECT_LT(r.max_err, 1e-2);
}

Case computed() {
  CaseSpec s;
  s.mask.causal = true, s.seed = 71;
  Case c = make_case(s);
  EXPECT_TRUE(forward(c.args).ok());
  EXPECT_TRUE(check_against_reference(c.args).failure.empty());
  return c;
}

TEST(OracleRule, DetectsOneWrongElement) {
  Case c = computed();
  detail::store_from_float(c.out.t.data, DType::bf16, 100, float(get(c.out, 100)) + 0.05f);
  OracleResult r = check_against_reference(c.args);
  EXPECT_NE(r.failure.find("exceeds bound"), std::string::npos) << r.failure;
}

TEST(OracleRule, DetectsUnwrittenElement) {
  Case c = computed();
  detail::store_from_float(c.out.t.data, DType::bf16, c.out.t.numel() - 1, NAN);
  OracleResult r = check_against_reference(c.args);
  EXPECT_NE(r.failure.find("NaN (not written?)"), std::string::npos) << r.failure;
}

TEST(OracleRule, DetectsWrongLse) {
  Case c = computed();
  static_cast<float*>(c.lse.t.data)[7] += 0.01f;
  OracleResult r = check_against_reference(c.args);
  EXPECT_NE(r.failure.find("lse"), std::string::npos) << r.failure;
}

TEST(OracleRule, DetectsMaskIgnored) {
  Case c = computed();
  Args unmasked = c.args;
  unmasked.mask.causal = false;
  ASSERT_TRUE(forward(unmasked).ok());
  EXPECT_FALSE(check_against_reference(c.args).failure.empty());
}

TEST(OracleRule, DetectsWrongCausalAlignment) {
  Case c = computed();  // seq_q 17 != seq_k 23: the alignments differ
  Args top_left = c.args;
  top_left.mask.align = CausalAlign::top_left;
  ASSERT_TRUE(forward(top_left).ok());
  EXPECT_FALSE(check_against_reference(c.args).failure.empty());
}

// Sampled rows (the CLI and GPU tests check a sample) equal the same rows computed in order.
TEST(OracleRule, RowsAtEqualsRowRange) {
  CaseSpec s;
  s.ragged_q = true, s.page_size = 3, s.mask.causal = true, s.sinks = true, s.seed = 72;
  Case c = make_case(s);
  detail::Problem p;
  ASSERT_TRUE(detail::build_problem(c.args, &p).ok());
  const int64_t b = 0, h = 3, n = s.seq_q;  // sequence 0 has the full length
  std::vector<double> ref(size_t(n * s.dim_v)), lse(static_cast<size_t>(n));
  std::vector<float> emu(size_t(n * s.dim_v)), emu_lse(static_cast<size_t>(n));
  detail::reference_rows(c.args, p, b, h, 0, n, ref.data(), lse.data());
  detail::emulated_rows(c.args, p, b, h, 0, n, emu.data(), emu_lse.data());
  const std::vector<int64_t> rows = {n - 1, 0, 5, 5};
  std::vector<double> ref2(rows.size() * size_t(s.dim_v)), lse2(rows.size());
  std::vector<float> emu2(rows.size() * size_t(s.dim_v)), else2(rows.size());
  detail::reference_rows_at(c.args, p, b, h, rows.data(), 4, ref2.data(), lse2.data());
  detail::emulated_rows_at(c.args, p, b, h, rows.data(), 4, emu2.data(), else2.data());
  for (size_t r = 0; r < rows.size(); ++r) {
    const size_t i = size_t(rows[r]);
    EXPECT_EQ(lse2[r], lse[i]);
    EXPECT_EQ(else2[r], emu_lse[i]);
    for (size_t d = 0; d < size_t(s.dim_v); ++d) {
      ASSERT_EQ(ref2[r * size_t(s.dim_v) + d], ref[i * size_t(s.dim_v) + d]);
      ASSERT_EQ(emu2[r * size_t(s.dim_v) + d], emu[i * size_t(s.dim_v) + d]);
    }
  }
}

TEST(OracleRule, DescribeNamesTheFeatures) {
  CaseSpec s;
  s.mask.causal = true, s.page_size = 16, s.sinks = true;
  EXPECT_EQ(describe(s), "b2 sq17 sk23 h4/2 d64/64 bf16->bf16 causal(br) sinks paged16 seed=1");
}

TEST(TestSupport, HostTensorCopyIsDeep) {
  HostTensor a = random_padded(DType::f32, {3, 4}, 2, 5);
  HostTensor b = a;
  EXPECT_NE(b.t.data, a.t.data);
  EXPECT_EQ(b.t.data, static_cast<void*>(b.bytes.data()));
  static_cast<float*>(b.t.data)[0] = 42.0f;
  EXPECT_NE(get(a, 0), 42.0);
  EXPECT_EQ(get(b, 0), 42.0);
  EXPECT_EQ(get(b, 5), get(a, 5));  // padded strides survive the copy
  HostTensor c;
  c = a;
  EXPECT_EQ(c.t.data, static_cast<void*>(c.bytes.data()));
}

TEST(OracleRule, DetectsBackendError) {
  Case c = make_case(CaseSpec{});
  c.args.backend = Backend::cuda;  // host tensors: refused
  OracleResult r = run_and_check(c.args);
  EXPECT_NE(r.failure.find("forward"), std::string::npos) << r.failure;
}

}  // namespace
}  // namespace longattn::testing
