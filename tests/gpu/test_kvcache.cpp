// The kvcache serving path (issue 17) on the CUDA backend: the pre-kernels' append + rotary
// (append_rotary.cu) and the attention over the updated cache, against the definition
// (kvcache_case.h check_kv_call: every cache slot but the appended ones untouched, rotated
// keys within one unit in the last place of the host's float64 rotation, out / lse by the
// oracle rule). All metadata is device-resident, so the device-side checks run too.
#include <gtest/gtest.h>

#include <cmath>

#include "support/kvcache_case.h"
#include "gpu/device_case.h"

namespace longattn::gputest {
namespace {

using testing::KvCase;
using testing::KvCaseSpec;
using testing::KvSnapshot;

struct DeviceKv {
  DeviceCase d;
  Args args;
};

DeviceKv upload(KvCase& c) {
  DeviceKv r;
  DeviceCase& d = r.d;
  Args& a = r.args;
  a = c.args;
  a.backend = Backend::cuda;
  a.q = d.upload(c.q), a.k = d.upload(c.k), a.v = d.upload(c.v), a.out = d.upload(c.out), a.lse = d.upload(c.lse);
  a.cu_seqlens_q = d.upload(c.cu_seqlens_q), a.seqused_k = d.upload(c.seqused_k), a.page_table = d.upload(c.page_table);
  a.sinks = d.upload(c.sinks);
  a.q_descale = d.upload(c.q_descale), a.k_descale = d.upload(c.k_descale), a.v_descale = d.upload(c.v_descale);
  KvCacheArgs& kc = a.kvcache;
  kc.k_new = d.upload(c.k_new), kc.v_new = d.upload(c.v_new), kc.cu_seqlens_k_new = d.upload(c.cu_seqlens_k_new);
  kc.cache_batch_idx = d.upload(c.cache_batch_idx), kc.cache_leftpad = d.upload(c.cache_leftpad);
  kc.rotary_cos = d.upload(c.rotary_cos), kc.rotary_sin = d.upload(c.rotary_sin);
  kc.rotary_seqlens = d.upload(c.rotary_seqlens);
  return r;
}

// Runs the case on the GPU; the host tensors of `c` then hold what the device has.
Status run_device(KvCase& c, bool check = false) {
  DeviceKv r = upload(c);
  r.args.kvcache.check = check;
  Status st = forward(r.args);
  if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess && st.ok()) st = Status::Error(cudaGetErrorString(e));
  r.d.download(c.k, r.args.k);
  r.d.download(c.v, r.args.v);
  r.d.download(c.out, r.args.out);
  r.d.download(c.lse, r.args.lse);
  return st;
}

std::string run_and_check(const KvCaseSpec& s) {
  KvCase c = testing::make_kv_case(s);
  const KvSnapshot before = testing::snapshot(c);
  const Status st = run_device(c);
  if (!st.ok()) return "forward: " + st.message();
  return testing::check_kv_call(c.args, before, 1e-3, /*cache_ulps=*/1);
}

// Serving shapes: hdim 128, 32 / 8 heads (GQA), causal, NeoX rotary over the whole head.
KvCaseSpec serving(int64_t batch, int64_t seq_q, int64_t cached, int64_t page, uint64_t seed) {
  KvCaseSpec s;
  s.batch = batch, s.seq_q = seq_q, s.seqlen_new = seq_q, s.capacity = cached + seq_q;
  s.heads_q = 32, s.heads_kv = 8, s.dim_qk = s.dim_v = 128, s.page_size = page;
  s.rotary_dim = 128, s.interleaved = false, s.mask.causal = true, s.seed = seed;
  return s;
}

class GpuKvcache : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_sm90()) GTEST_SKIP() << "no sm_90 device";
  }
};

TEST_F(GpuKvcache, DecodeDenseAndPaged) {
  for (int64_t page : {0, 16, 64}) {
    const KvCaseSpec s = serving(4, 1, 1000, page, 1 + uint64_t(page));
    EXPECT_EQ(run_and_check(s), "") << describe(s);
  }
}

TEST_F(GpuKvcache, DecodeManyNewTokens) {
  for (int64_t n : {16, 64})
    for (int64_t page : {0, 16, 64}) {
      const KvCaseSpec s = serving(3, n, 900, page, 10 + uint64_t(n + page));
      EXPECT_EQ(run_and_check(s), "") << describe(s);
    }
}

TEST_F(GpuKvcache, ChunkedPrefill) {
  for (int64_t page : {0, 16, 64}) {
    KvCaseSpec s = serving(2, 512, 1536, page, 20 + uint64_t(page));
    s.heads_q = 8, s.heads_kv = 2;
    EXPECT_EQ(run_and_check(s), "") << describe(s);
  }
}

// A paged cache whose head dims run on the hdim-256 kernel without being 256 / 256: the append
// writes the pages, then the attention reads dense copies of them (forward_sm90.cpp
// PageGather, its scratch taken before the append).
TEST_F(GpuKvcache, PagedDimsOnDenseCopies) {
  for (int64_t d : {200, 64}) {
    KvCaseSpec s = serving(3, 16, 700, 16, 40 + uint64_t(d));
    s.heads_q = 8, s.heads_kv = 2;
    s.dim_qk = d, s.dim_v = d == 64 ? 256 : d, s.rotary_dim = d == 64 ? 64 : 128;
    EXPECT_EQ(run_and_check(s), "") << describe(s);
  }
}

TEST_F(GpuKvcache, RotaryStylesDimsTablesAndSeqlens) {
  for (bool gptj : {true, false})
    for (int64_t rd : {32, 128}) {
      KvCaseSpec s = serving(3, 16, 300, 16, 30 + uint64_t(rd) + (gptj ? 1 : 0));
      s.interleaved = gptj, s.rotary_dim = rd, s.rotary_f32 = rd == 32, s.rotary_seqlens = gptj;
      EXPECT_EQ(run_and_check(s), "") << describe(s);
    }
}

TEST_F(GpuKvcache, NonCausalRotatesEveryQueryAtOnePosition) {
  KvCaseSpec s = serving(2, 24, 200, 0, 40);
  s.mask.causal = false;
  EXPECT_EQ(run_and_check(s), "") << describe(s);
  s.mask.window_left = 50, s.seed = 41;  // a window: per-row positions again
  EXPECT_EQ(run_and_check(s), "") << describe(s);
}

TEST_F(GpuKvcache, RaggedNewKeysAndQueries) {
  for (int64_t page : {0, 16}) {
    KvCaseSpec s = serving(5, 40, 400, page, 50 + uint64_t(page));
    s.ragged_new = true, s.ragged_q = true;
    EXPECT_EQ(run_and_check(s), "") << describe(s);
  }
}

TEST_F(GpuKvcache, CacheBatchIdxDenseAndPaged) {
  for (int64_t page : {0, 16}) {
    KvCaseSpec s = serving(3, 8, 500, page, 60 + uint64_t(page));
    s.batch_idx = true;
    EXPECT_EQ(run_and_check(s), "") << describe(s);
    s.append = false, s.rotary_dim = 0, s.seed += 100;  // attention only over the chosen rows
    EXPECT_EQ(run_and_check(s), "") << describe(s);
  }
}

TEST_F(GpuKvcache, CacheLeftpadDense) {
  KvCaseSpec s = serving(4, 8, 500, 0, 70);
  s.leftpad = true, s.batch_idx = true;
  EXPECT_EQ(run_and_check(s), "") << describe(s);
}

TEST_F(GpuKvcache, HeadDimsDtypesFeatures) {
  KvCaseSpec s = serving(2, 16, 300, 16, 80);
  s.dim_qk = s.dim_v = 64, s.rotary_dim = 64;
  EXPECT_EQ(run_and_check(s), "") << describe(s);
  s = serving(2, 16, 300, 0, 81);
  s.dim_qk = s.dim_v = 256, s.rotary_dim = 64, s.dtype = DType::f16;
  EXPECT_EQ(run_and_check(s), "") << describe(s);
  s = serving(2, 16, 300, 16, 82);
  s.softcap = 30.0f, s.sinks = true;
  EXPECT_EQ(run_and_check(s), "") << describe(s);
}

// fp8 at head dim 128 (the fp8 kernel, pages of 16), and at 256 and 64 with cache_batch_idx
// over a dense cache: the upcast path (fp8_upcast.h) on the kvcache's ragged view, whose
// sequence starts follow the chosen cache rows (not sorted), so v_descale goes on the output
// rows, not into the V copy.
TEST_F(GpuKvcache, Fp8CacheAppend) {
  struct Variant {
    int64_t dim, page;
    bool batch_idx;
  };
  for (const Variant x : {Variant{128, 16, false}, Variant{256, 0, true}, Variant{64, 0, true}}) {
    KvCaseSpec s = serving(3, 16, 300, x.page, 90 + uint64_t(x.dim));
    s.dtype = DType::e4m3, s.rotary_dim = 0;
    s.dim_qk = s.dim_v = x.dim, s.batch_idx = x.batch_idx;
    KvCase c = testing::make_kv_case(s);
    const KvSnapshot before = testing::snapshot(c);
    const Status st = run_device(c);
    ASSERT_TRUE(st.ok()) << describe(s) << ": " << st.message();
    // fp8 tensor-core accumulation: the cache bit for bit, the output within the fp8 bound.
    EXPECT_EQ(testing::check_kv_call(c.args, before, 1e-3, 0, /*acc_eps=*/1.0 / 2048), "") << describe(s);
  }
}

// Device metadata a check rejects: nothing written to the cache; every output row is that of
// no key (0, LSE -inf); with kvcache.check the call returns Invalid naming the argument.
TEST_F(GpuKvcache, BadDeviceMetadataWritesNothing) {
  const KvCaseSpec s = serving(3, 4, 100, 0, 100);  // a dense cache of 104 slots
  for (bool check : {false, true}) {
    KvCase c = testing::make_kv_case(s);
    static_cast<int32_t*>(c.seqused_k.t.data)[1] = 102;  // 102 + 4 new keys > 104 slots
    const KvSnapshot before = testing::snapshot(c);
    const Status st = run_device(c, check);
    if (check) {
      EXPECT_EQ(st.code(), Status::Code::invalid_argument) << st.message();
      EXPECT_EQ(st.message().rfind("k_new: sequence 1 appends 4 keys at slot 102", 0), 0u) << st.message();
    } else {
      ASSERT_TRUE(st.ok()) << st.message();
      for (int64_t i = 0; i < c.out.t.numel(); ++i) ASSERT_EQ(testing::get(c.out, i), 0.0) << i;
      for (int64_t i = 0; i < c.lse.t.numel(); ++i) ASSERT_TRUE(std::isinf(testing::get(c.lse, i))) << i;
    }
    EXPECT_TRUE(c.k.bytes == before.k.bytes) << "k cache written (check " << check << ")";
    EXPECT_TRUE(c.v.bytes == before.v.bytes) << "v cache written (check " << check << ")";
  }
}

TEST_F(GpuKvcache, ReportsEachDeviceCheck) {
  struct Bad {
    const char* arg;
    void (*apply)(KvCase&);
  };
  const Bad bad[] = {
      {"cache_batch_idx", [](KvCase& c) { static_cast<int32_t*>(c.cache_batch_idx.t.data)[0] = 99; }},
      {"seqused_k", [](KvCase& c) { static_cast<int32_t*>(c.seqused_k.t.data)[2] = -1; }},
      {"page_table", [](KvCase& c) {
         const int32_t end = static_cast<int32_t*>(c.seqused_k.t.data)[0];
         const int32_t row = static_cast<int32_t*>(c.cache_batch_idx.t.data)[0];
         static_cast<int32_t*>(c.page_table.t.data)[row * c.page_table.t.stride[0] + end / 16] = -7;
       }},
      {"rotary_cos", [](KvCase& c) { static_cast<int32_t*>(c.rotary_seqlens.t.data)[1] = 1 << 20; }},
      {"rotary_seqlens", [](KvCase& c) { static_cast<int32_t*>(c.rotary_seqlens.t.data)[1] = -3; }},
  };
  for (const Bad& x : bad) {
    KvCaseSpec s = serving(3, 4, 100, 16, 110);
    s.batch_idx = true, s.rotary_seqlens = true;
    KvCase c = testing::make_kv_case(s);
    x.apply(c);
    const KvSnapshot before = testing::snapshot(c);
    const Status st = run_device(c, /*check=*/true);
    EXPECT_EQ(st.code(), Status::Code::invalid_argument) << x.arg << ": " << st.message();
    EXPECT_EQ(st.message().rfind(std::string(x.arg) + ":", 0), 0u) << st.message();
    EXPECT_TRUE(c.k.bytes == before.k.bytes && c.v.bytes == before.v.bytes) << x.arg << ": cache written";
  }
}

TEST_F(GpuKvcache, PagedLeftpadIsNotSupportedAndWritesNothing) {
  KvCaseSpec s = serving(2, 4, 100, 16, 120);
  s.leftpad = true;
  KvCase c = testing::make_kv_case(s);
  const KvSnapshot before = testing::snapshot(c);
  const Status st = run_device(c);
  EXPECT_EQ(st.code(), Status::Code::not_supported) << st.message();
  EXPECT_EQ(st.message().rfind("cache_leftpad:", 0), 0u) << st.message();
  EXPECT_TRUE(c.k.bytes == before.k.bytes && c.v.bytes == before.v.bytes);
}

}  // namespace
}  // namespace longattn::gputest
