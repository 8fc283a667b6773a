// Split-KV (schedule_rule.h kv_splits): dense batch-1 calls with fewer tiles than half the
// SMs split their keys, the partials merged by the combine kernel. Against the float64
// reference (oracle rule, poisoned outputs, LSE included): the rule's own splits (few heads
// with long keys; a short query chunk against a long KV prefix, causal bottom-right), forced
// splits (Overrides::kv_splits = N, including more splits than key blocks to fill, i.e. empty ones,
// and rows that see no key at all), every head dim, f32 output. By design a batched call
// never splits (a row's result must not depend on the rest of its batch), so a batch-1 call
// that splits is not bitwise equal to the same sequence inside a batch; both are checked
// against the reference.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gpu_case.h"

namespace longattn::gputest {
namespace {

Shape shape(int64_t b, int64_t sq, int64_t sk, int64_t hq, int64_t hkv, int64_t d, bool causal) {
  Shape s = dense_shape(b, sq, sk, hq, hkv, d, causal);
  s.rows_per_head = 40;
  return s;
}

struct SplitCase {
  Shape s;
  const char* splits;  // Overrides::kv_splits ("" = the rule, "0" = none, "N" = N splits)
};

void PrintTo(const SplitCase& c, std::ostream* os) { *os << c.s.name() << " splits '" << c.splits << "'"; }

class GpuSplitKv : public ::testing::TestWithParam<SplitCase> {};

TEST_P(GpuSplitKv, MatchesReference) {
  if (!cuda_available()) GTEST_SKIP() << "no sm_90 device";
  const SplitCase& c = GetParam();
  Shape s = c.s;
  if (c.splits[0]) s.ov.kv_splits = std::atoll(c.splits);
  const CheckResult r = run_case(s);
  printf("%-48s splits '%s': err %.2e naive %.2e lse %.2e (naive %.2e)\n", c.s.name().c_str(), c.splits,
         r.max_err, r.naive_err, r.lse_err, r.lse_naive);
  EXPECT_TRUE(r.failure.empty()) << c.s.name() << " splits=" << c.splits << ": " << r.failure;
}

std::vector<SplitCase> cases() {
  std::vector<SplitCase> v;
  v.push_back({shape(1, 3001, 20011, 2, 1, 128, false), ""});     // 48 tiles: the rule splits 2
  v.push_back({shape(1, 200, 30007, 4, 2, 128, true), ""});       // chunked prefill: 8 tiles, 14 splits
  v.push_back({shape(1, 130, 9000, 3, 3, 64, true), ""});         // hdim 64
  v.push_back({shape(1, 257, 12345, 2, 2, 256, false), ""});      // hdim 256
  v.push_back({shape(1, 700, 5000, 4, 1, 128, true), "3"});       // forced, causal with a prefix
  v.push_back({shape(1, 5000, 3000, 1, 1, 128, true), "3"});      // rows without keys (bottom-right)
  v.push_back({shape(1, 300, 1000, 2, 1, 128, false), "7"});      // 8 key blocks, 7 splits: empty ones
  v.push_back({shape(1, 900, 2500, 4, 2, 128, true), "0"});       // off
  {
    Shape s = shape(1, 200, 17000, 4, 2, 128, true);
    s.top_left = true;
    v.push_back({s, ""});
  }
  {
    Shape s = shape(1, 333, 20000, 2, 1, 128, false);
    s.out = DType::f32;
    s.in = DType::f16;
    v.push_back({s, ""});
  }
  return v;
}

std::string name(const ::testing::TestParamInfo<SplitCase>& i) {
  return i.param.s.name() + "_splits" + (i.param.splits[0] ? i.param.splits : "Rule");
}

INSTANTIATE_TEST_SUITE_P(SplitKv, GpuSplitKv, ::testing::ValuesIn(cases()), name);

}  // namespace
}  // namespace longattn::gputest
