// Validation of the arguments added for FlashAttention-3 parity (issue 16): seqused_q,
// chunk + window masks, and empty key sets with device-resident metadata.
#include "api/invalid_fixture.h"

namespace longattn::testing {
namespace {

// Dense q (batch 2, seq_q 5) with seqused_q.
class SeqUsedQ : public InvalidInput {
 protected:
  void SetUp() override {
    CaseSpec s;
    s.batch = 2, s.seq_q = 5, s.seq_k = 7, s.heads_q = 4, s.heads_kv = 2, s.dim_qk = s.dim_v = 8;
    s.used_q = {5, 2};
    make(s);
  }
  int32_t* used() { return static_cast<int32_t*>(c.seqused_q.t.data); }
};

TEST_F(SeqUsedQ, BaselineIsValid) {
  OracleResult r = run_and_check(c.args);
  EXPECT_TRUE(r.failure.empty()) << r.failure;
}
TEST_F(SeqUsedQ, ZeroAndFullAreValid) {
  used()[0] = 0, used()[1] = 5;
  OracleResult r = run_and_check(c.args);
  EXPECT_TRUE(r.failure.empty()) << r.failure;
}
TEST_F(SeqUsedQ, AboveRows) {
  used()[1] = 6;
  expect_invalid(c.args, "seqused_q", "entry [1] = 6 outside [0, 5]");
}
TEST_F(SeqUsedQ, Negative) {
  used()[0] = -1;
  expect_invalid(c.args, "seqused_q", "entry [0] = -1");
}
TEST_F(SeqUsedQ, WrongLength) {
  Args a = c.args;
  a.seqused_q.shape[0] = 1;
  expect_invalid(a, "seqused_q", "(batch)");
}
TEST_F(SeqUsedQ, WrongRank) {
  Args a = c.args;
  a.seqused_q.rank = 2, a.seqused_q.shape[1] = 1, a.seqused_q.stride[1] = 1;
  expect_invalid(a, "seqused_q", "(batch)");
}
TEST_F(SeqUsedQ, DtypeFloat) {
  Args a = c.args;
  a.seqused_q.dtype = DType::f32;
  expect_invalid(a, "seqused_q", "i32");
}
TEST_F(SeqUsedQ, OnAnotherDevice) {
  Args a = c.args;
  a.seqused_q.device = Device{DeviceKind::cuda, 0};
  expect_invalid(a, "seqused_q", "one device");
}
TEST_F(SeqUsedQ, OutOverlapsSeqUsedQ) {
  // Valid counts stored inside the bf16 output: only the aliasing is wrong.
  auto* inside = reinterpret_cast<int32_t*>(c.out.bytes.data() + 4);
  inside[0] = 5, inside[1] = 2;
  Args a = c.args;
  a.seqused_q.data = inside;
  expect_invalid(a, "out", "overlaps seqused_q");
}

// Ragged q: seqused_q is bounded by each sequence's cu_seqlens_q length, and max_seqlen_q
// by the longest *used* length.
class SeqUsedQRagged : public InvalidInput {
 protected:
  void SetUp() override {
    CaseSpec s;
    s.batch = 3, s.heads_q = 2, s.heads_kv = 1, s.dim_qk = s.dim_v = 8;
    s.ragged_q = s.ragged_k = true;
    s.seqlens_q = {4, 0, 3};
    s.seqlens_k = {5, 2, 6};
    s.used_q = {2, 0, 3};
    make(s);
  }
};

TEST_F(SeqUsedQRagged, BaselineIsValid) {
  OracleResult r = run_and_check(c.args);
  EXPECT_TRUE(r.failure.empty()) << r.failure;
}
TEST_F(SeqUsedQRagged, AboveSequenceLength) {
  static_cast<int32_t*>(c.seqused_q.t.data)[1] = 1;  // sequence 1 has no rows
  expect_invalid(c.args, "seqused_q", "entry [1] = 1 outside [0, 0]");
}
TEST_F(SeqUsedQRagged, MaxSeqlenBoundsUsedRows) {
  Args a = c.args;
  a.max_seqlen_q = 3;  // sequence 0 has 4 rows but uses 2: the longest used is 3
  OracleResult r = run_and_check(a);
  EXPECT_TRUE(r.failure.empty()) << r.failure;
  a.max_seqlen_q = 2;
  expect_invalid(a, "max_seqlen_q", "longest sequence (3)");
}
TEST_F(SeqUsedQRagged, DeviceMetadataIsNotRead) {
  // Validation never dereferences device tensors (host memory tagged cuda is safe here).
  Args a = c.args;
  static_cast<int32_t*>(c.seqused_q.t.data)[0] = 99;
  for (Tensor* t : {&a.q, &a.k, &a.v, &a.out, &a.lse, &a.cu_seqlens_q, &a.cu_seqlens_k, &a.seqused_q})
    t->device = Device{DeviceKind::cuda, 0};
  a.max_seqlen_q = 4, a.max_seqlen_k = 6;
  EXPECT_TRUE(validate(a).ok()) << validate(a).message();
}

// Chunked attention combines with sliding windows (the intersection, as FA3).
TEST_F(InvalidInput, ChunkWithWindowIsValid) {
  for (auto [wl, wr, causal] : {std::tuple{2, -1, true}, std::tuple{-1, 1, false}, std::tuple{1, 3, false},
                                std::tuple{0, 0, true}}) {
    Args a = c.args;
    a.mask.chunk_size = 3, a.mask.window_left = wl, a.mask.window_right = wr, a.mask.causal = causal;
    OracleResult r = run_and_check(a);
    EXPECT_TRUE(r.failure.empty()) << wl << "," << wr << " causal " << causal << ": " << r.failure;
  }
}

// Device-resident cu_seqlens_k: max_seqlen_k is required, unless k has no rows at all (every
// key sequence is then empty: FA3's max_seqlen_k = 0). Likewise for q.
class EmptyOnDevice : public InvalidInput {
 protected:
  void SetUp() override {
    CaseSpec s;
    s.batch = 2, s.heads_q = 2, s.heads_kv = 1, s.dim_qk = s.dim_v = 8;
    s.ragged_q = s.ragged_k = true;
    s.seqlens_q = {3, 2};
    s.seqlens_k = {0, 0};
    make(s);
    for (Tensor* t : {&c.args.q, &c.args.k, &c.args.v, &c.args.out, &c.args.lse, &c.args.cu_seqlens_q,
                      &c.args.cu_seqlens_k})
      t->device = Device{DeviceKind::cuda, 0};
    c.args.max_seqlen_q = 3;
  }
};

TEST_F(EmptyOnDevice, NoKeyRowsNeedNoMaxSeqlenK) {
  ASSERT_EQ(c.args.k.shape[0], 0);
  EXPECT_TRUE(validate(c.args).ok()) << validate(c.args).message();
}
TEST_F(EmptyOnDevice, KeyRowsStillNeedMaxSeqlenK) {
  Args a = c.args;
  a.k.shape[0] = a.v.shape[0] = 1;  // views of one row (the buffers hold at least one element)
  expect_invalid(a, "max_seqlen_k", "required");
}
TEST_F(EmptyOnDevice, NoQueryRowsNeedNoMaxSeqlenQ) {
  Args a = c.args;
  a.max_seqlen_q = 0, a.q.shape[0] = a.out.shape[0] = a.lse.shape[1] = 0;
  EXPECT_TRUE(validate(a).ok()) << validate(a).message();
  a.q.shape[0] = a.out.shape[0] = a.lse.shape[1] = 5;
  expect_invalid(a, "max_seqlen_q", "required");
}

}  // namespace
}  // namespace longattn::testing
