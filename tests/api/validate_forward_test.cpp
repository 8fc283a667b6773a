// Every invalid forward input returns Invalid naming the argument, and writes nothing.
#include <cmath>
#include <limits>

#include "api/invalid_fixture.h"

namespace longattn::testing {
namespace {

using Bad = InvalidInput;

// The unmodified fixture is valid and runs: otherwise every test below proves nothing.
TEST_F(Bad, BaselineIsValid) {
  EXPECT_TRUE(validate(c.args).ok()) << validate(c.args).message();
  OracleResult r = run_and_check(c.args);
  EXPECT_TRUE(r.failure.empty()) << r.failure;
}

// --- missing tensors ---------------------------------------------------------------------
TEST_F(Bad, NullQ) { Args a = c.args; a.q.data = nullptr; expect_invalid(a, "q", "null"); }
TEST_F(Bad, NullK) { Args a = c.args; a.k.data = nullptr; expect_invalid(a, "k", "null"); }
TEST_F(Bad, NullV) { Args a = c.args; a.v.data = nullptr; expect_invalid(a, "v", "null"); }
TEST_F(Bad, NullOut) { Args a = c.args; a.out.data = nullptr; expect_invalid(a, "out", "null"); }

// --- dtypes ------------------------------------------------------------------------------
TEST_F(Bad, KDtypeDiffersFromQ) {
  Args a = c.args;
  a.k.dtype = DType::f16;
  expect_invalid(a, "k", "f16");
}
TEST_F(Bad, VDtypeDiffersFromQ) {
  Args a = c.args;
  a.v.dtype = DType::f32;
  expect_invalid(a, "v", "f32");
}
TEST_F(Bad, QDtypeInt) {
  Args a = c.args;
  a.q.dtype = a.k.dtype = a.v.dtype = DType::i32;
  expect_invalid(a, "q", "i32");
}
TEST_F(Bad, OutDtypeFp8) {
  Args a = c.args;
  a.out.dtype = DType::e4m3;
  expect_invalid(a, "out", "e4m3");
}
TEST_F(Bad, LseDtypeBf16) {
  Args a = c.args;
  a.lse.dtype = DType::bf16;
  expect_invalid(a, "lse", "bf16");
}
TEST_F(Bad, SinksDtypeBf16) {
  CaseSpec s = c.spec;
  s.sinks = true;
  make(s);
  Args a = c.args;
  a.sinks.dtype = DType::bf16;
  expect_invalid(a, "sinks", "bf16");
}
TEST_F(Bad, CuSeqlensDtypeFloat) {
  CaseSpec s = c.spec;
  s.ragged_q = true;
  make(s);
  Args a = c.args;
  a.cu_seqlens_q.dtype = DType::f32;
  expect_invalid(a, "cu_seqlens_q", "i32");
}

// --- ranks, shapes, strides --------------------------------------------------------------
TEST_F(Bad, QRank3WithoutCuSeqlens) {
  Args a = c.args;
  a.q.rank = 3;
  expect_invalid(a, "q", "rank 3");
}
TEST_F(Bad, KRankWrong) {
  Args a = c.args;
  a.k.rank = 3;
  expect_invalid(a, "k", "rank 3");
}
TEST_F(Bad, RankAboveMax) {
  Args a = c.args;
  a.v.rank = 5;
  expect_invalid(a, "v", "rank 5");
}
TEST_F(Bad, QLastDimNotContiguous) {
  Args a = c.args;
  a.q.stride[3] = 2;
  expect_invalid(a, "q", "contiguous");
}
TEST_F(Bad, OutLastDimNotContiguous) {
  Args a = c.args;
  a.out.stride[3] = 0;
  expect_invalid(a, "out", "contiguous");
}
TEST_F(Bad, NegativeStride) {
  Args a = c.args;
  a.k.stride[1] = -a.k.stride[1];
  expect_invalid(a, "k", "negative stride");
}
TEST_F(Bad, NegativeExtent) {
  Args a = c.args;
  a.v.shape[1] = -1;
  expect_invalid(a, "v", "negative extent");
}
TEST_F(Bad, StridesOverflowInt64) {
  Args a = c.args;
  a.k.stride[0] = int64_t(1) << 62;
  expect_invalid(a, "k", "overflows");
}
TEST_F(Bad, HeadDimAbove256) {
  Args a = c.args;
  a.q.shape[3] = a.k.shape[3] = 320;
  expect_invalid(a, "q", "head dim 320");
}
TEST_F(Bad, HeadDimZero) {
  Args a = c.args;
  a.q.shape[3] = a.k.shape[3] = 0;
  expect_invalid(a, "q", "head dim 0");
}
TEST_F(Bad, VHeadDimAbove512) {
  Args a = c.args;
  a.v.shape[3] = a.out.shape[3] = 513;
  expect_invalid(a, "v", "head dim 513");
}
TEST_F(Bad, KHeadDimDiffersFromQ) {
  Args a = c.args;
  a.k.shape[3] = 4;
  expect_invalid(a, "k", "head dim 4");
}
TEST_F(Bad, KvHeadsDoNotDivideQueryHeads) {
  Args a = c.args;
  a.k.shape[2] = a.v.shape[2] = 3;
  expect_invalid(a, "k", "k: 3 kv heads do not divide 4 query heads");
}
TEST_F(Bad, VHeadsDifferFromK) {
  Args a = c.args;
  a.v.shape[2] = 1;
  expect_invalid(a, "v", "1 heads differ");
}
TEST_F(Bad, ZeroQueryHeads) {
  Args a = c.args;
  a.q.shape[2] = a.out.shape[2] = 0;
  expect_invalid(a, "q", "0 heads");
}
TEST_F(Bad, BatchMismatch) {
  Args a = c.args;
  a.k.shape[0] = a.v.shape[0] = 1;
  expect_invalid(a, "k", "batch 1");
}
TEST_F(Bad, VSeqDiffersFromK) {
  Args a = c.args;
  a.v.shape[1] = 6;
  expect_invalid(a, "v", "does not match k");
}
TEST_F(Bad, OutSeqDiffersFromQ) {
  Args a = c.args;
  a.out.shape[1] = 4;
  expect_invalid(a, "out", "does not match q");
}
TEST_F(Bad, OutHeadDimWrong) {
  Args a = c.args;
  a.out.shape[3] = 4;
  expect_invalid(a, "out", "head dim 4");
}
TEST_F(Bad, LseWrongShape) {
  Args a = c.args;
  a.lse.shape[2] = 4;  // seq_q is 5
  expect_invalid(a, "lse", "(2, 4, 5)");
}
TEST_F(Bad, LseRaggedWrongShape) {
  CaseSpec s = c.spec;
  s.ragged_q = true;
  make(s);
  Args a = c.args;
  a.lse.shape[1] += 1;
  expect_invalid(a, "lse", "(heads_q, total_q)");
}
TEST_F(Bad, SinksWrongShape) {
  CaseSpec s = c.spec;
  s.sinks = true;
  make(s);
  Args a = c.args;
  a.sinks.shape[0] = 2;
  expect_invalid(a, "sinks", "(heads_q)");
}

// --- scalars -----------------------------------------------------------------------------
TEST_F(Bad, ScaleNaN) {
  Args a = c.args;
  a.softmax_scale = std::nanf("");
  expect_invalid(a, "softmax_scale", "finite");
}
TEST_F(Bad, ScaleInf) {
  Args a = c.args;
  a.softmax_scale = std::numeric_limits<float>::infinity();
  expect_invalid(a, "softmax_scale");
}
TEST_F(Bad, ScaleZero) {
  Args a = c.args;
  a.softmax_scale = 0.0f;
  expect_invalid(a, "softmax_scale", "> 0");
}
TEST_F(Bad, ScaleNegative) {
  Args a = c.args;
  a.softmax_scale = -0.5f;
  expect_invalid(a, "softmax_scale", "-0.5");
}
TEST_F(Bad, SoftcapNegative) {
  Args a = c.args;
  a.softcap = -1.0f;
  expect_invalid(a, "softcap", ">= 0");
}
TEST_F(Bad, SoftcapNaN) {
  Args a = c.args;
  a.softcap = std::nanf("");
  expect_invalid(a, "softcap");
}
TEST_F(Bad, SoftcapInf) {
  Args a = c.args;
  a.softcap = std::numeric_limits<float>::infinity();
  expect_invalid(a, "softcap");
}

TEST_F(Bad, NegativeThreadCount) {
  Args a = c.args;
  a.num_threads = -2;
  expect_invalid(a, "num_threads", "-2");
}
TEST_F(Bad, NegativeSmMargin) {
  Args a = c.args;
  a.sm_margin = -3;
  expect_invalid(a, "sm_margin", "-3");
}
TEST_F(Bad, UnknownCpuIsa) {
  Args a = c.args;
  a.cpu_isa = static_cast<CpuIsa>(42);
  expect_invalid(a, "cpu_isa", "42");
}
TEST_F(Bad, NegativeL2Budget) {
  Args a = c.args;
  a.l2_budget_bytes = -7;
  expect_invalid(a, "l2_budget_bytes", "-7");
}

// --- masks -------------------------------------------------------------------------------
TEST_F(Bad, WindowLeftBelowMinusOne) {
  Args a = c.args;
  a.mask.window_left = -2;
  expect_invalid(a, "mask.window_left", "-2");
}
TEST_F(Bad, WindowRightBelowMinusOne) {
  Args a = c.args;
  a.mask.window_right = -5;
  expect_invalid(a, "mask.window_right", "-5");
}
TEST_F(Bad, CausalWithRightWindow) {
  Args a = c.args;
  a.mask.causal = true;
  a.mask.window_right = 3;
  expect_invalid(a, "mask.window_right", "causal");
}
TEST_F(Bad, NegativeChunk) {
  Args a = c.args;
  a.mask.chunk_size = -4;
  expect_invalid(a, "mask.chunk_size", "-4");
}

// --- ragged metadata ---------------------------------------------------------------------
class BadRagged : public InvalidInput {
 protected:
  void SetUp() override {
    CaseSpec s;
    s.batch = 3, s.heads_q = 2, s.heads_kv = 1, s.dim_qk = s.dim_v = 8;
    s.ragged_q = s.ragged_k = true;
    s.seqlens_q = {4, 0, 3};
    s.seqlens_k = {5, 2, 6};
    make(s);
  }
  int32_t* cu_q() { return static_cast<int32_t*>(c.cu_seqlens_q.t.data); }
  int32_t* cu_k() { return static_cast<int32_t*>(c.cu_seqlens_k.t.data); }
};

TEST_F(BadRagged, BaselineIsValid) {
  OracleResult r = run_and_check(c.args);
  EXPECT_TRUE(r.failure.empty()) << r.failure;
}
TEST_F(BadRagged, CuSeqlensNonMonotonic) {
  cu_q()[2] = 1;  // {0, 4, 1, 7}
  expect_invalid(c.args, "cu_seqlens_q", "non-decreasing");
}
TEST_F(BadRagged, CuSeqlensFirstNotZero) {
  cu_k()[0] = 1;
  expect_invalid(c.args, "cu_seqlens_k", "first entry");
}
TEST_F(BadRagged, CuSeqlensPastTensor) {
  cu_k()[3] = 99;
  expect_invalid(c.args, "cu_seqlens_k", "past the");
}
TEST_F(BadRagged, CuSeqlensKWrongLength) {
  Args a = c.args;
  a.cu_seqlens_k.shape[0] = 3;  // batch is 3: needs 4 entries
  expect_invalid(a, "cu_seqlens_k", "(batch + 1)");
}
TEST_F(BadRagged, CuSeqlensEmpty) {
  Args a = c.args;
  a.cu_seqlens_q.shape[0] = 0;
  expect_invalid(a, "cu_seqlens_q", "batch + 1");
}
TEST_F(BadRagged, MaxSeqlenBelowLongest) {
  Args a = c.args;
  a.max_seqlen_q = 3;  // longest is 4
  expect_invalid(a, "max_seqlen_q", "longest");
}
TEST_F(BadRagged, MaxSeqlenNegative) {
  Args a = c.args;
  a.max_seqlen_k = -1;
  expect_invalid(a, "max_seqlen_k", ">= 0");
}
TEST_F(BadRagged, MaxSeqlenRequiredForDeviceMetadata) {
  // Device tensors are never dereferenced by validation, so host memory tagged cuda is safe.
  Args a = c.args;
  for (Tensor* t : {&a.q, &a.k, &a.v, &a.out, &a.lse, &a.cu_seqlens_q, &a.cu_seqlens_k})
    t->device = Device{DeviceKind::cuda, 0};
  expect_invalid(a, "max_seqlen_q", "required");
}
TEST_F(BadRagged, SequsedAboveCapacity) {
  HostTensor used = int_tensor({5, 3, 6});  // sequence 1 holds 2 keys
  Args a = c.args;
  a.seqused_k = used.t;
  expect_invalid(a, "seqused_k", "entry [1] = 3", {&used});
}
TEST_F(BadRagged, SequsedNegative) {
  HostTensor used = int_tensor({5, -1, 6});
  Args a = c.args;
  a.seqused_k = used.t;
  expect_invalid(a, "seqused_k", "-1", {&used});
}
TEST_F(BadRagged, SequsedWrongShape) {
  HostTensor used = int_tensor({5, 1});
  Args a = c.args;
  a.seqused_k = used.t;
  expect_invalid(a, "seqused_k", "(batch)", {&used});
}

// --- paged metadata ----------------------------------------------------------------------
class BadPaged : public InvalidInput {
 protected:
  void SetUp() override {
    CaseSpec s;
    s.batch = 2, s.seq_q = 3, s.seq_k = 10, s.heads_q = 2, s.heads_kv = 1, s.dim_qk = s.dim_v = 8;
    s.page_size = 3;  // 4 pages per sequence, 11 pages in all
    make(s);
  }
  int32_t* table() { return static_cast<int32_t*>(c.page_table.t.data); }
};

TEST_F(BadPaged, BaselineIsValid) {
  OracleResult r = run_and_check(c.args);
  EXPECT_TRUE(r.failure.empty()) << r.failure;
}
TEST_F(BadPaged, PageTableEntryPastPages) {
  table()[5] = 11;
  expect_invalid(c.args, "page_table", "entry [1, 1] = 11");
}
TEST_F(BadPaged, PageTableEntryNegative) {
  table()[0] = -1;
  expect_invalid(c.args, "page_table", "entry [0, 0] = -1");
}
TEST_F(BadPaged, UnusedPageTableEntriesAreNotChecked) {
  // Sequence 0 uses 4 keys = 2 pages, so entries [0, 2..3] may hold padding.
  HostTensor used = int_tensor({4, 10});
  table()[3] = -7;
  Args a = c.args;
  a.seqused_k = used.t;
  OracleResult r = run_and_check(a);
  EXPECT_TRUE(r.failure.empty()) << r.failure;
}
TEST_F(BadPaged, PageTableDtypeFloat) {
  Args a = c.args;
  a.page_table.dtype = DType::f32;
  expect_invalid(a, "page_table", "i32");
}
TEST_F(BadPaged, PageSizeZero) {
  Args a = c.args;
  a.k.shape[1] = a.v.shape[1] = 0;
  expect_invalid(a, "k", "page size 0");
}
TEST_F(BadPaged, PageTableWrongBatch) {
  Args a = c.args;
  a.page_table.shape[0] = 1;
  expect_invalid(a, "page_table", "(batch, max_pages)");
}
TEST_F(BadPaged, PagedWithCuSeqlensK) {
  HostTensor cu = int_tensor({0, 3, 6});
  Args a = c.args;
  a.cu_seqlens_k = cu.t;
  expect_invalid(a, "cu_seqlens_k", "page_table", {&cu});
}
TEST_F(BadPaged, SequsedAbovePagedCapacity) {
  HostTensor used = int_tensor({13, 2});  // capacity is 4 pages x 3 = 12
  Args a = c.args;
  a.seqused_k = used.t;
  expect_invalid(a, "seqused_k", "[0, 12]", {&used});
}

// --- fp8 descales ------------------------------------------------------------------------
class BadFp8 : public InvalidInput {
 protected:
  void SetUp() override {
    CaseSpec s;
    s.batch = 2, s.seq_q = 4, s.seq_k = 6, s.heads_q = 4, s.heads_kv = 2, s.dim_qk = s.dim_v = 16;
    s.dtype = DType::e4m3;
    make(s);
  }
};

TEST_F(BadFp8, BaselineIsValid) {
  OracleResult r = run_and_check(c.args);
  EXPECT_TRUE(r.failure.empty()) << r.failure;
}
TEST_F(BadFp8, MissingQDescale) {
  Args a = c.args;
  a.q_descale = Tensor{};
  expect_invalid(a, "q_descale", "required");
}
TEST_F(BadFp8, MissingVDescale) {
  Args a = c.args;
  a.v_descale = Tensor{};
  expect_invalid(a, "v_descale", "required");
}
TEST_F(BadFp8, DescaleWrongShape) {
  Args a = c.args;
  a.k_descale.shape[1] = 4;  // per (batch, kv head): kv heads are 2
  expect_invalid(a, "k_descale", "(batch, heads_kv)");
}
TEST_F(BadFp8, DescaleDtypeBf16) {
  Args a = c.args;
  a.v_descale.dtype = DType::bf16;
  expect_invalid(a, "v_descale", "f32");
}
TEST_F(Bad, DescaleWithoutFp8) {
  HostTensor d = random_tensor(DType::f32, {2, 2}, 3);
  Args a = c.args;
  a.q_descale = d.t;
  expect_invalid(a, "q_descale", "e4m3", {&d});
}

// --- devices and aliasing ----------------------------------------------------------------
TEST_F(Bad, MixedDevices) {
  Args a = c.args;
  a.k.device = Device{DeviceKind::cuda, 0};
  expect_invalid(a, "k", "one device");
}
TEST_F(Bad, MixedCudaOrdinals) {
  Args a = c.args;
  for (Tensor* t : {&a.q, &a.k, &a.v, &a.out, &a.lse}) t->device = Device{DeviceKind::cuda, 0};
  a.lse.device.ordinal = 1;
  expect_invalid(a, "lse", "cuda:1");
}
TEST_F(Bad, OutAliasesQ) {
  Args a = c.args;
  a.out.data = a.q.data;  // same dtype and shape: only the aliasing is wrong
  expect_invalid(a, "out", "overlaps q");
}
TEST_F(Bad, OutOverlapsTailOfK) {
  Args a = c.args;
  a.out.data = static_cast<uint8_t*>(a.k.data) + c.k.bytes.size() - 2;  // last element of k
  expect_invalid(a, "out", "overlaps k");
}
TEST_F(Bad, LseInsideOut) {
  Args a = c.args;
  a.lse.data = static_cast<uint8_t*>(a.out.data) + 16;
  expect_invalid(a, "lse", "overlaps out");
}
TEST_F(Bad, OutRowsOverlapEachOther) {
  Args a = c.args;
  a.out.stride[1] = 0;  // every query row of a sequence would write the same address
  expect_invalid(a, "out", "overlap");
}
TEST_F(Bad, LseStridesOverlap) {
  Args a = c.args;
  a.lse.stride[1] = 2;  // heads step 2 but each head spans seq_q = 5 entries
  expect_invalid(a, "lse", "overlap");
}
TEST_F(Bad, OutOverlapsV) {
  Args a = c.args;
  a.out.data = static_cast<uint8_t*>(a.v.data) + 8;
  expect_invalid(a, "out", "overlaps");
}

}  // namespace
}  // namespace longattn::testing
