// Validation of Args::kvcache (issue 17): every bad input is Invalid naming the argument and
// leaves every buffer -- the cache above all -- untouched.
#include <gtest/gtest.h>

#include "api/invalid_fixture.h"
#include "support/kvcache_case.h"

namespace longattn::testing {
namespace {

class KvInvalid : public ::testing::Test {
 protected:
  void make(const KvCaseSpec& s) {
    c = make_kv_case(s);
    c.args.backend = Backend::cpu;
  }
  void SetUp() override {
    KvCaseSpec s;
    s.batch = 3, s.seq_q = 4, s.heads_q = 4, s.heads_kv = 2, s.dim_qk = s.dim_v = 16, s.capacity = 20;
    s.seqlen_new = 3, s.rotary_dim = 8, s.leftpad = true, s.batch_idx = true, s.mask.causal = true;
    make(s);
  }
  std::vector<HostTensor*> buffers() {
    return {&c.q, &c.k, &c.v, &c.out, &c.lse, &c.cu_seqlens_q, &c.seqused_k, &c.page_table, &c.k_new,
            &c.v_new, &c.cu_seqlens_k_new, &c.cache_batch_idx, &c.cache_leftpad, &c.rotary_cos, &c.rotary_sin,
            &c.rotary_seqlens};
  }
  // Invalid (or `code`), the message starts with "<arg>:" and holds `detail`; no byte changed.
  void expect_invalid(const Args& a, const std::string& arg, const std::string& detail = "",
                      Status::Code code = Status::Code::invalid_argument) {
    std::vector<std::vector<uint8_t>> before;
    for (HostTensor* x : buffers()) before.push_back(x->bytes);
    const Status v = validate(a), f = forward(a);
    EXPECT_EQ(f.code(), code) << f.message();
    EXPECT_EQ(v.message(), f.message());
    EXPECT_EQ(f.message().rfind(arg + ":", 0), 0u) << "message does not start with '" << arg << ":': " << f.message();
    if (!detail.empty()) EXPECT_NE(f.message().find(detail), std::string::npos) << f.message();
    const std::vector<HostTensor*> all = buffers();
    for (size_t i = 0; i < all.size(); ++i) EXPECT_TRUE(all[i]->bytes == before[i]) << "buffer " << i << " was modified";
  }
  int32_t* i32(HostTensor& t) { return static_cast<int32_t*>(t.t.data); }
  KvCase c;
};

TEST_F(KvInvalid, BaselineIsValid) {
  const KvSnapshot before = snapshot(c);
  ASSERT_TRUE(forward(c.args).ok());
  EXPECT_EQ(check_kv_call(c.args, before), "");
}

// --- the bad-input list of issue 17 ----------------------------------------------------------
TEST_F(KvInvalid, AppendOverflowsTheCache) {
  i32(c.seqused_k)[1] = 18;  // 18 + 3 new > 20 slots
  expect_invalid(c.args, "k_new", "sequence 1 appends 3 keys at slot 18");
}
TEST_F(KvInvalid, SeqlenNewAboveCapacity) {
  KvCaseSpec s = c.spec;
  s.capacity = 21, s.seqlen_new = 21, s.leftpad = false;
  make(s);  // every sequence ends at 0; then a view of the cache one slot shorter
  Args a = c.args;
  a.k.shape[1] = a.v.shape[1] = 20;
  expect_invalid(a, "k_new", "21 new keys per sequence overflow");
}
TEST_F(KvInvalid, PagedAppendOverflowsThePages) {
  KvCaseSpec s = c.spec;
  s.page_size = 4, s.capacity = 20;
  make(s);
  i32(c.seqused_k)[2] = 19;  // 5 pages of 4: 19 + 3 > 20
  expect_invalid(c.args, "k_new", "past the cache's 20 slots");
}
TEST_F(KvInvalid, PageTableEntryOfAnAppendedPage) {
  KvCaseSpec s = c.spec;
  s.page_size = 4, s.capacity = 20, s.batch_idx = false, s.leftpad = false;
  make(s);
  i32(c.seqused_k)[0] = 8;  // appends to slots 8..10: page 2 is written
  i32(c.page_table)[0 * 5 + 2] = 999;
  expect_invalid(c.args, "page_table", "entry [0, 2] = 999");
}
TEST_F(KvInvalid, PageTableEntryNegative) {
  KvCaseSpec s = c.spec;
  s.page_size = 4, s.capacity = 20, s.batch_idx = false, s.leftpad = false;
  make(s);
  i32(c.seqused_k)[1] = 4;
  i32(c.page_table)[1 * 5 + 0] = -1;
  expect_invalid(c.args, "page_table", "entry [1, 0] = -1");
}
TEST_F(KvInvalid, RotaryTableTooShortForTheNewKeys) {
  Args a = c.args;
  a.kvcache.rotary_cos.shape[0] = a.kvcache.rotary_sin.shape[0] = 20;  // sequence 0: positions up to 19 + ...
  i32(c.seqused_k)[0] = 17;  // new keys at positions 17, 18, 19; queries (causal) 17..20
  expect_invalid(a, "rotary_cos", "uses rotary positions up to 20, but the tables have 20 rows");
}
TEST_F(KvInvalid, RotaryTableTooShortViaRotarySeqlens) {
  KvCaseSpec s = c.spec;
  s.rotary_seqlens = true;
  make(s);
  Args a = c.args;
  i32(c.rotary_seqlens)[2] = int32_t(a.kvcache.rotary_cos.shape[0]) - 1;
  expect_invalid(a, "rotary_cos", "sequence 2 uses rotary positions");
}
TEST_F(KvInvalid, RotarySeqlensNegative) {
  KvCaseSpec s = c.spec;
  s.rotary_seqlens = true;
  make(s);
  i32(c.rotary_seqlens)[1] = -2;
  expect_invalid(c.args, "rotary_seqlens", "entry [1] = -2 is negative");
}
TEST_F(KvInvalid, KNewDtypeDiffersFromCache) {
  Args a = c.args;
  a.kvcache.k_new.dtype = DType::f16;
  expect_invalid(a, "k_new", "differs from the cache's");
}
TEST_F(KvInvalid, VNewDtypeDiffersFromCache) {
  Args a = c.args;
  a.kvcache.v_new.dtype = DType::f16;
  expect_invalid(a, "v_new", "differs from the cache's");
}
TEST_F(KvInvalid, RotaryDtype) {
  Args a = c.args;
  a.kvcache.rotary_cos.dtype = a.kvcache.rotary_sin.dtype = DType::f16;
  expect_invalid(a, "rotary_cos", "expected q's (bf16) or f32");
}
TEST_F(KvInvalid, RotarySinDtypeDiffersFromCos) {
  Args a = c.args;
  a.kvcache.rotary_sin.dtype = DType::f32;
  expect_invalid(a, "rotary_sin", "differs from rotary_cos's");
}

// --- rows, left padding, cache_seqlens ---------------------------------------------------------
TEST_F(KvInvalid, BatchIdxOutOfRange) {
  i32(c.cache_batch_idx)[2] = 5;  // 3 + 2 cache rows
  expect_invalid(c.args, "cache_batch_idx", "entry [2] = 5 outside [0, 5) (k's batch)");
}
TEST_F(KvInvalid, BatchIdxNegativePaged) {
  KvCaseSpec s = c.spec;
  s.page_size = 8;
  make(s);
  i32(c.cache_batch_idx)[0] = -1;
  expect_invalid(c.args, "cache_batch_idx", "page_table's rows");
}
TEST_F(KvInvalid, LeftpadPastEnd) {
  i32(c.cache_leftpad)[1] = i32(c.seqused_k)[1] + 1;
  expect_invalid(c.args, "cache_leftpad", "entry [1]");
}
TEST_F(KvInvalid, LeftpadNegative) {
  i32(c.cache_leftpad)[0] = -1;
  expect_invalid(c.args, "cache_leftpad", "entry [0] = -1");
}
TEST_F(KvInvalid, SequsedKNegative) {
  i32(c.seqused_k)[2] = -1;
  i32(c.cache_leftpad)[2] = 0;
  expect_invalid(c.args, "seqused_k", "entry [2] = -1");
}
TEST_F(KvInvalid, SequsedKRequiredWithAppend) {
  Args a = c.args;
  a.seqused_k = Tensor{};
  expect_invalid(a, "seqused_k", "required with k_new");
}

// --- presence, shapes, layouts -------------------------------------------------------------------
TEST_F(KvInvalid, KNewWithoutVNew) {
  Args a = c.args;
  a.kvcache.v_new = Tensor{};
  expect_invalid(a, "v_new", "required with k_new");
}
TEST_F(KvInvalid, VNewWithoutKNew) {
  Args a = c.args;
  a.kvcache.k_new = Tensor{};
  a.kvcache.rotary_cos = a.kvcache.rotary_sin = Tensor{};
  expect_invalid(a, "k_new", "required with v_new");
}
TEST_F(KvInvalid, RotaryWithoutAppend) {
  Args a = c.args;
  a.kvcache.k_new = a.kvcache.v_new = Tensor{};
  expect_invalid(a, "rotary_cos", "needs k_new");
}
TEST_F(KvInvalid, RotaryCosWithoutSin) {
  Args a = c.args;
  a.kvcache.rotary_sin = Tensor{};
  expect_invalid(a, "rotary_sin", "required with rotary_cos");
}
TEST_F(KvInvalid, RotaryDimAboveHeadDim) {
  Args a = c.args;
  a.kvcache.rotary_cos.shape[1] = a.kvcache.rotary_sin.shape[1] = 9;  // rotary_dim 18 > 16
  expect_invalid(a, "rotary_cos", "2 <= rotary_dim <= 16");
}
TEST_F(KvInvalid, RotarySinShape) {
  Args a = c.args;
  a.kvcache.rotary_sin.shape[0] -= 1;
  expect_invalid(a, "rotary_sin", "rotary_cos's shape");
}
TEST_F(KvInvalid, KNewHeads) {
  Args a = c.args;
  a.kvcache.k_new.shape[2] = 1;
  expect_invalid(a, "k_new", "(batch, seqlen_new, heads_kv, dim)");
}
TEST_F(KvInvalid, VNewSeqlenDiffers) {
  Args a = c.args;
  a.kvcache.v_new.shape[1] = 2;
  expect_invalid(a, "v_new", "(batch, seqlen_new, heads_kv, dim)");
}
TEST_F(KvInvalid, KNewRank) {
  Args a = c.args;
  Tensor& t = a.kvcache.k_new;  // (batch * 3, heads_kv, dim) without cu_seqlens_k_new
  t.rank = 3, t.shape[0] *= t.shape[1], t.shape[1] = t.shape[2], t.shape[2] = t.shape[3];
  t.stride[0] = t.stride[2], t.stride[1] = t.stride[3], t.stride[2] = 1;
  expect_invalid(a, "k_new", "rank 3, expected 4");
}
TEST_F(KvInvalid, CuSeqlensKNewWithoutAppend) {
  KvCaseSpec s = c.spec;
  s.ragged_new = true;
  make(s);
  Args a = c.args;
  a.kvcache.k_new = a.kvcache.v_new = a.kvcache.rotary_cos = a.kvcache.rotary_sin = Tensor{};
  expect_invalid(a, "cu_seqlens_k_new", "only valid with k_new");
}
TEST_F(KvInvalid, CuSeqlensKNewDecreasing) {
  KvCaseSpec s = c.spec;
  s.ragged_new = true, s.leftpad = false;
  make(s);
  int32_t* cu = i32(c.cu_seqlens_k_new);
  cu[1] = cu[2] + 1;
  expect_invalid(c.args, "cu_seqlens_k_new", "not non-decreasing");
}
TEST_F(KvInvalid, CuSeqlensKNewPastRows) {
  KvCaseSpec s = c.spec;
  s.ragged_new = true;
  make(s);
  i32(c.cu_seqlens_k_new)[3] += 1;
  expect_invalid(c.args, "cu_seqlens_k_new", "past the");
}
TEST_F(KvInvalid, BatchIdxShape) {
  Args a = c.args;
  a.kvcache.cache_batch_idx.shape[0] = 2;
  expect_invalid(a, "cache_batch_idx", "(batch)");
}
TEST_F(KvInvalid, LeftpadDtype) {
  Args a = c.args;
  a.kvcache.cache_leftpad.dtype = DType::f32;
  expect_invalid(a, "cache_leftpad", "i32");
}
TEST_F(KvInvalid, OnAnotherDevice) {
  Args a = c.args;
  a.kvcache.k_new.device = Device{DeviceKind::cuda, 0};
  expect_invalid(a, "k_new", "one device");
}
TEST_F(KvInvalid, RaggedKeysAreNoCache) {
  CaseSpec s;
  s.ragged_k = true;
  Case r = make_case(s);
  HostTensor lp = int_tensor({0, 0});
  Args a = r.args;
  a.kvcache.cache_leftpad = lp.t;
  const Status st = validate(a);
  EXPECT_EQ(st.code(), Status::Code::invalid_argument);
  EXPECT_EQ(st.message().rfind("cache_leftpad: needs a dense or paged KV cache", 0), 0u) << st.message();
}
TEST_F(KvInvalid, RotaryOfFp8IsNotSupported) {
  KvCaseSpec s = c.spec;
  s.dtype = DType::e4m3, s.rotary_f32 = true;
  make(s);
  expect_invalid(c.args, "rotary_cos", "e4m3", Status::Code::not_supported);
}

// --- aliasing: the cache is written ------------------------------------------------------------
TEST_F(KvInvalid, CacheOverlapsKNew) {
  Args a = c.args;
  a.kvcache.k_new.data = c.k.bytes.data();  // valid shape, inside the cache's bytes
  a.kvcache.k_new.shape[1] = 1;
  a.kvcache.v_new.shape[1] = 1;
  expect_invalid(a, "k", "overlaps k_new");
}
TEST_F(KvInvalid, OutOverlapsRotaryTable) {
  Args a = c.args;
  a.kvcache.rotary_cos.data = c.out.bytes.data();
  expect_invalid(a, "out", "overlaps rotary_cos");
}

// rotary_seqlens is ignored without rotary (FA3): even a wrong one is not an error.
TEST_F(KvInvalid, RotarySeqlensIgnoredWithoutRotary) {
  KvCaseSpec s = c.spec;
  s.rotary_dim = 0;
  make(s);
  HostTensor junk = int_tensor({-5});
  Args a = c.args;
  a.kvcache.rotary_seqlens = junk.t;
  const KvSnapshot before = snapshot(c);
  ASSERT_TRUE(forward(a).ok());
  a.kvcache.rotary_seqlens = Tensor{};
  EXPECT_EQ(check_kv_call(a, before), "");
}

}  // namespace
}  // namespace longattn::testing
