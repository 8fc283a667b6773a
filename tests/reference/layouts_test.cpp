// Layouts are only addressing: paged, ragged and padded problems equal their dense twins
// bitwise (the reference does the same float64 arithmetic on the same values).
#include <gtest/gtest.h>

#include <cstring>

#include "support/testing.h"

namespace longattn::testing {
namespace {

void run(Case& c) {
  poison(c.out);
  poison(c.lse);
  Status s = forward(c.args);
  ASSERT_TRUE(s.ok()) << s.message();
}

// Paged K/V with a shuffled page table equals dense K/V gathered through that table.
class PagedEqualsDense : public ::testing::TestWithParam<std::tuple<int64_t, bool>> {};

TEST_P(PagedEqualsDense, AfterGathering) {
  const auto [page_size, seqused] = GetParam();
  CaseSpec s;
  s.batch = 3, s.seq_q = 7, s.seq_k = 37, s.heads_q = 4, s.heads_kv = 2, s.dim_qk = 16, s.dim_v = 24;
  s.mask.causal = true, s.page_size = page_size, s.seqused_k = seqused, s.sinks = true;
  s.seed = 30 + uint64_t(page_size);
  Case paged = make_case(s);
  const int64_t max_pages = paged.page_table.t.shape[1], cap = max_pages * page_size;
  CaseSpec ds = s;
  ds.page_size = 0, ds.seq_k = cap, ds.seqused_k = false;
  Case dense = make_case(ds);
  dense.q.bytes = paged.q.bytes;
  dense.q.t.data = dense.q.bytes.data(), dense.args.q = dense.q.t;
  dense.sinks.bytes = paged.sinks.bytes;
  if (seqused) {
    dense.seqused_k = paged.seqused_k;  // a deep copy
    dense.args.seqused_k = dense.seqused_k.t;
  }
  const auto* table = static_cast<const int32_t*>(paged.page_table.t.data);
  for (const auto& [src, dst, dim] : {std::tuple{&paged.k, &dense.k, s.dim_qk}, std::tuple{&paged.v, &dense.v, s.dim_v}})
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t j = 0; j < cap; ++j) {
        const int64_t page = table[b * max_pages + j / page_size];
        const size_t row = size_t(s.heads_kv * dim * 2);  // bytes of one token's heads
        std::memcpy(dst->bytes.data() + size_t(b * cap + j) * row,
                    src->bytes.data() + size_t(page * page_size + j % page_size) * row, row);
      }
  run(paged);
  run(dense);
  EXPECT_EQ(count_nan(paged.out), 0);
  EXPECT_TRUE(paged.out.bytes == dense.out.bytes);
  EXPECT_TRUE(paged.lse.bytes == dense.lse.bytes);
}

INSTANTIATE_TEST_SUITE_P(PageSizes, PagedEqualsDense,
                         ::testing::Combine(::testing::Values(1, 3, 16), ::testing::Bool()));

// Ragged q and k (lengths 0 and 1 among longer ones) equal one dense problem per sequence.
TEST(Layouts, RaggedEqualsPerSequenceDense) {
  for (bool seqused : {false, true}) {
    CaseSpec s;
    s.batch = 5, s.heads_q = 4, s.heads_kv = 1, s.dim_qk = 8, s.dim_v = 16;
    s.ragged_q = s.ragged_k = true;
    s.seqlens_q = {7, 0, 1, 12, 5};
    s.seqlens_k = {9, 4, 0, 12, 1};
    s.seqused_k = seqused;
    s.mask.causal = true, s.sinks = true, s.seed = 40;
    Case rag = make_case(s);
    run(rag);
    const auto* cq = static_cast<const int32_t*>(rag.cu_seqlens_q.t.data);
    const auto* ck = static_cast<const int32_t*>(rag.cu_seqlens_k.t.data);
    for (int64_t b = 0; b < s.batch; ++b) {
      const int64_t lq = s.seqlens_q[size_t(b)], lk = s.seqlens_k[size_t(b)];
      if (lq == 0) continue;
      CaseSpec d = s;
      d.batch = 1, d.seq_q = lq, d.seq_k = lk, d.ragged_q = d.ragged_k = false;
      d.seqlens_q.clear(), d.seqlens_k.clear(), d.seqused_k = false;
      Case one = make_case(d);
      one.sinks.bytes = rag.sinks.bytes;
      const size_t qrow = size_t(s.heads_q * s.dim_qk * 2), krow = size_t(s.heads_kv * s.dim_qk * 2),
                   vrow = size_t(s.heads_kv * s.dim_v * 2);
      std::memcpy(one.q.bytes.data(), rag.q.bytes.data() + cq[b] * qrow, size_t(lq) * qrow);
      std::memcpy(one.k.bytes.data(), rag.k.bytes.data() + ck[b] * krow, size_t(lk) * krow);
      std::memcpy(one.v.bytes.data(), rag.v.bytes.data() + ck[b] * vrow, size_t(lk) * vrow);
      HostTensor used;
      if (seqused) {
        used = int_tensor({static_cast<const int32_t*>(rag.seqused_k.t.data)[b]});
        one.args.seqused_k = used.t;
      }
      run(one);
      for (int64_t i = 0; i < lq; ++i)
        for (int64_t h = 0; h < s.heads_q; ++h) {
          for (int64_t dd = 0; dd < s.dim_v; ++dd)
            ASSERT_EQ(get(rag.out.t, {cq[b] + i, h, dd}), get(one.out.t, {0, i, h, dd}))
                << "b=" << b << " i=" << i << " h=" << h;
          ASSERT_EQ(get(rag.lse.t, {h, cq[b] + i}), get(one.lse.t, {0, h, i}));
        }
    }
  }
}

// Rows that are not packed (padding between rows) give the same values.
TEST(Layouts, PaddedRowsEqualPacked) {
  for (bool paged : {false, true}) {
    CaseSpec s;
    s.ragged_q = true, s.seq_q = 9, s.mask.causal = true, s.seed = 50;
    if (paged) s.page_size = 5;
    Case packed = make_case(s);
    s.padded = true;
    Case padded = make_case(s);
    ASSERT_NE(padded.q.t.stride[1], packed.q.t.stride[1]);
    run(packed);
    run(padded);
    ASSERT_EQ(packed.out.t.numel(), padded.out.t.numel());
    for (int64_t i = 0; i < packed.out.t.numel(); ++i) ASSERT_EQ(get(packed.out, i), get(padded.out, i)) << i;
    EXPECT_TRUE(packed.lse.bytes == padded.lse.bytes);
  }
}

}  // namespace
}  // namespace longattn::testing
