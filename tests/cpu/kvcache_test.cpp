// The kvcache serving path (issue 17) on the CPU backend, per kernel ISA, against the
// float64 reference: odd sizes, dense and paged caches, every KvCacheArgs input. The cache
// must hold exactly the definition's append (every other slot untouched), the output pass
// the oracle rule (kvcache_case.h check_kv_call).
#include <gtest/gtest.h>

#include "cpu/cpu_test_util.h"
#include "support/kvcache_case.h"

namespace longattn::testing {
namespace {

class CpuKvcache : public PerIsaTest {
 protected:
  std::string run(const KvCaseSpec& spec, double atol = 1e-3) const {
    KvCase c = make_kv_case(spec);
    c.args.backend = Backend::cpu;
    c.args.cpu_isa = isa();
    const KvSnapshot before = snapshot(c);
    const Status st = forward(c.args);
    if (!st.ok()) return "forward: " + st.message();
    return check_kv_call(c.args, before, atol);
  }
};

KvCaseSpec base(uint64_t seed) {
  KvCaseSpec s;
  s.batch = 3, s.seq_q = 37, s.heads_q = 6, s.heads_kv = 2, s.dim_qk = 72, s.dim_v = 40;
  s.capacity = 131, s.seqlen_new = 37, s.mask.causal = true, s.seed = seed;
  return s;
}

TEST_P(CpuKvcache, DecodeDenseAndPaged) {
  for (int64_t ps : {0, 1, 16, 64}) {
    KvCaseSpec s = base(1 + uint64_t(ps));
    s.seq_q = 1, s.seqlen_new = 1, s.page_size = ps, s.rotary_dim = 32;
    EXPECT_EQ(run(s), "") << describe(s);
  }
}

TEST_P(CpuKvcache, ChunkedPrefillDenseAndPaged) {
  for (int64_t ps : {0, 7, 16}) {
    KvCaseSpec s = base(10 + uint64_t(ps));
    s.page_size = ps, s.rotary_dim = 72, s.interleaved = false;
    EXPECT_EQ(run(s), "") << describe(s);
  }
}

TEST_P(CpuKvcache, RotaryStylesDimsAndTables) {
  for (bool gptj : {true, false})
    for (int64_t rd : {2, 16, 64})
      for (bool f32_tables : {false, true}) {
        KvCaseSpec s = base(20 + uint64_t(rd) + (gptj ? 0 : 100) + (f32_tables ? 1000 : 0));
        s.rotary_dim = rd, s.interleaved = gptj, s.rotary_f32 = f32_tables;
        EXPECT_EQ(run(s), "") << describe(s);
      }
}

TEST_P(CpuKvcache, RotaryFixedPositionsWithoutMask) {
  KvCaseSpec s = base(30);
  s.mask = Mask{}, s.rotary_dim = 24;
  EXPECT_EQ(run(s), "") << describe(s);
}

TEST_P(CpuKvcache, RotarySeqlens) {
  KvCaseSpec s = base(31);
  s.rotary_dim = 24, s.rotary_seqlens = true, s.page_size = 16;
  EXPECT_EQ(run(s), "") << describe(s);
}

TEST_P(CpuKvcache, RaggedNewKeysAndQueries) {
  for (int64_t ps : {0, 16}) {
    KvCaseSpec s = base(40 + uint64_t(ps));
    s.batch = 5, s.ragged_new = true, s.ragged_q = true, s.rotary_dim = 32, s.page_size = ps;
    EXPECT_EQ(run(s), "") << describe(s);
  }
}

TEST_P(CpuKvcache, CacheBatchIdxAndLeftpad) {
  for (int64_t ps : {0, 16})
    for (bool append : {false, true}) {
      KvCaseSpec s = base(50 + uint64_t(ps) + (append ? 7 : 0));
      s.batch_idx = true, s.leftpad = true, s.page_size = ps, s.append = append;
      s.rotary_dim = append ? 16 : 0;
      EXPECT_EQ(run(s), "") << describe(s);
    }
}

TEST_P(CpuKvcache, MasksSoftcapSinks) {
  KvCaseSpec s = base(60);
  s.rotary_dim = 32, s.mask.causal = false, s.mask.window_left = 20, s.mask.window_right = 3;
  EXPECT_EQ(run(s), "") << describe(s);
  s = base(61);
  s.mask.chunk_size = 40, s.softcap = 20.0f, s.sinks = true, s.rotary_dim = 32;
  EXPECT_EQ(run(s), "") << describe(s);
}

TEST_P(CpuKvcache, Dtypes) {
  for (DType t : {DType::f16, DType::f32, DType::e4m3}) {
    KvCaseSpec s = base(70 + uint64_t(t));
    s.dtype = t, s.page_size = 16, s.rotary_dim = t == DType::e4m3 ? 0 : 32;
    EXPECT_EQ(run(s), "") << describe(s);
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, CpuKvcache, ::testing::ValuesIn(cpu_isas()), isa_name);

}  // namespace
}  // namespace longattn::testing
