// NaN and Inf inputs propagate exactly where the float64 reference says (and nowhere
// else: a NaN in a key or value that a row cannot see must not reach that row), per ISA.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/problem.h"
#include "cpu/cpu_test_util.h"

namespace longattn::testing {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Writes x at a dense (b, token, head, d) index.
void set(HostTensor& t, int64_t b, int64_t i, int64_t h, int64_t d, float x) {
  const int64_t* st = t.t.stride;
  detail::store_from_float(t.t.data, t.t.dtype, b * st[0] + i * st[1] + h * st[2] + d * st[3], x);
}

struct Poke {
  const char* what;  // "q", "k" or "v"
  int64_t i, h, d;
  float x;
};

class CpuNonFinite : public PerIsaTest {};

TEST_P(CpuNonFinite, PropagatesLikeReference) {
  const Poke pokes[] = {
      {"q", 10, 1, 5, kNaN},  {"q", 90, 2, 0, -kInf}, {"k", 50, 0, 3, kNaN},
      {"k", 70, 1, 7, kInf},  {"k", 3, 1, 0, -kInf},  {"v", 70, 1, 0, kInf},
      {"v", 64, 0, 9, kNaN},  {"v", 130, 1, 4, -kInf},
  };
  int n = 0;
  for (const Poke& pk : pokes) {
    for (int variant = 0; variant < 3; ++variant) {
      CaseSpec s;
      s.batch = 1, s.seq_q = 140, s.seq_k = 140, s.heads_q = 4, s.heads_kv = 2;
      s.dim_qk = s.dim_v = 32, s.seed = 600 + uint64_t(n++);
      s.dtype = variant == 2 ? DType::f32 : DType::bf16;
      s.mask.causal = variant != 1;  // masked keys must not leak into earlier rows
      s.mask.window_left = variant == 1 ? 40 : -1;
      s.softcap = variant == 2 ? 3.0f : 0.0f;
      s.sinks = variant == 1;
      Case c = make_case(s);
      HostTensor& t = pk.what[0] == 'q' ? c.q : (pk.what[0] == 'k' ? c.k : c.v);
      set(t, 0, pk.i, pk.h, pk.d, pk.x);
      c.args.backend = Backend::cpu;
      c.args.cpu_isa = isa();
      OracleResult r = run_and_check(c.args);
      EXPECT_EQ(r.failure, "") << pk.what << "[" << pk.i << "," << pk.h << "," << pk.d << "] = " << pk.x
                               << " variant " << variant;
    }
  }
}

// A NaN everywhere in K and V outside every row's window: nothing may leak.
TEST_P(CpuNonFinite, MaskedGarbageNeverLeaks) {
  CaseSpec s;
  s.batch = 1, s.seq_q = 100, s.seq_k = 300, s.heads_q = 2, s.heads_kv = 1, s.dim_qk = s.dim_v = 48;
  s.mask.causal = true, s.mask.window_left = 90, s.seed = 650;
  Case c = make_case(s);
  // Bottom-right: query i sits at key position i + 200 and sees [i + 110, i + 200].
  for (int64_t j = 0; j < 110; ++j)
    for (int64_t d = 0; d < 48; ++d) {
      set(c.k, 0, j, 0, d, kNaN);
      set(c.v, 0, j, 0, d, (j % 2) ? kInf : kNaN);
    }
  c.args.backend = Backend::cpu;
  c.args.cpu_isa = isa();
  OracleResult r = run_and_check(c.args);
  EXPECT_EQ(r.failure, "");
  EXPECT_EQ(count_nan(c.out), 0);
}

INSTANTIATE_TEST_SUITE_P(Isa, CpuNonFinite, ::testing::ValuesIn(cpu_isas()), isa_name);

}  // namespace
}  // namespace longattn::testing
