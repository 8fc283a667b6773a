// The CPU backend's result does not depend on the thread count or on the run: every work
// item is computed by one thread with no cross-thread reduction. Compared bitwise.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>
#include <utility>

#include "cpu/cpu_test_util.h"
#include "cpu/work_items.h"

namespace longattn::testing {
namespace {

struct Outputs {
  std::vector<uint8_t> out, lse;
};

Outputs run_cpu(Case& c, int threads, CpuIsa isa = CpuIsa::automatic) {
  poison(c.out);
  poison(c.lse);
  c.args.backend = Backend::cpu;
  c.args.cpu_isa = isa;
  c.args.num_threads = threads;
  Status st = forward(c.args);
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(count_nan(c.out), 0);
  return {c.out.bytes, c.lse.bytes};
}

std::vector<CaseSpec> specs() {
  std::vector<CaseSpec> v;
  CaseSpec a;  // causal GQA, several work items per head
  a.batch = 2, a.seq_q = 300, a.seq_k = 300, a.heads_q = 8, a.heads_kv = 2, a.dim_qk = a.dim_v = 64;
  a.mask.causal = true, a.sinks = true, a.seed = 501;
  v.push_back(a);
  CaseSpec b;  // ragged + paged-free window + softcap
  b.batch = 4, b.seq_q = 200, b.seq_k = 260, b.ragged_q = b.ragged_k = true, b.heads_q = 4;
  b.heads_kv = 4, b.mask.window_left = 33, b.softcap = 4.0f, b.seed = 502;
  v.push_back(b);
  CaseSpec c;  // paged fp8
  c.batch = 3, c.seq_q = 150, c.seq_k = 333, c.page_size = 16, c.seqused_k = true;
  c.dtype = DType::e4m3, c.heads_q = 4, c.heads_kv = 1, c.mask.causal = true, c.seed = 503;
  v.push_back(c);
  CaseSpec d;  // f32 (the AMX kernel's three-plane split), several 256-key tiles
  d.batch = 2, d.seq_q = 333, d.seq_k = 600, d.heads_q = 4, d.heads_kv = 2, d.dim_qk = d.dim_v = 96;
  d.dtype = d.out_dtype = DType::f32, d.mask.causal = true, d.sinks = true, d.seed = 504;
  v.push_back(d);
  return v;
}

class CpuDeterminism : public PerIsaTest {};

TEST_P(CpuDeterminism, ThreadCountInvariant) {
  for (const CaseSpec& s : specs()) {
    Case c = make_case(s);
    const Outputs one = run_cpu(c, 1, isa());
    for (int t : {2, 3, 5, 16}) {
      const Outputs many = run_cpu(c, t, isa());
      EXPECT_TRUE(one.out == many.out) << "threads " << t << " seed " << s.seed;
      EXPECT_TRUE(one.lse == many.lse) << "threads " << t << " seed " << s.seed;
    }
  }
}

TEST_P(CpuDeterminism, RepeatedRunsIdentical) {
  for (const CaseSpec& s : specs()) {
    Case c = make_case(s);
    const Outputs first = run_cpu(c, 0, isa());
    for (int rep = 0; rep < 3; ++rep) {
      const Outputs again = run_cpu(c, 0, isa());
      EXPECT_TRUE(first.out == again.out) << "rep " << rep << " seed " << s.seed;
      EXPECT_TRUE(first.lse == again.lse) << "rep " << rep << " seed " << s.seed;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, CpuDeterminism, ::testing::ValuesIn(cpu_isas()), isa_name);

// With Args::num_threads = 0 the thread count comes from LONGATTN_NUM_THREADS (its text is
// passed in here instead of set in the process environment); nonsense values fall back to
// the hardware count. The result stays the same either way.
TEST(CpuThreads, EnvironmentVariable) {
  const int hw = std::max(1, int(std::thread::hardware_concurrency()));
  EXPECT_EQ(detail::cpu::resolve_threads(0, nullptr), hw);
  EXPECT_EQ(detail::cpu::resolve_threads(5, "3"), 5);  // Args::num_threads wins
  EXPECT_EQ(detail::cpu::resolve_threads(0, "100000"), 4096);
  CaseSpec s = specs()[0];
  Case c = make_case(s);
  const Outputs ref = run_cpu(c, 1);
  const std::pair<const char*, int> values[] = {{"1", 1},   {"3", 3},    {"0", hw},
                                                {"-2", hw}, {"abc", hw}, {"", hw}};
  for (auto [v, want] : values) {
    const int t = detail::cpu::resolve_threads(0, v);
    EXPECT_EQ(t, want) << "LONGATTN_NUM_THREADS=" << v;
    const Outputs got = run_cpu(c, t);
    EXPECT_TRUE(got.out == ref.out) << "LONGATTN_NUM_THREADS=" << v;
  }
}

}  // namespace
}  // namespace longattn::testing
