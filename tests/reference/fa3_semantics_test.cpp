// The float64 reference on the FlashAttention-3 semantics of issue 16: seqused_q (a sequence
// with seqused_q[b] rows is exactly the problem over its first seqused_q[b] queries),
// chunk + window masks (the intersection), and empty key sets (zeros, LSE -inf or the sink).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "common/problem.h"
#include "reference/reference.h"
#include "support/testing.h"

namespace longattn::testing {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Rows [0, n) of sequence b in a problem of its own: the first n queries of sequence b (q, out
// and lse views of those rows) against sequence b's keys. Dense or ragged q; any K/V layout
// (the key views keep the layout, restricted to batch entry b where it is per-batch).
Args one_sequence(const Args& a, int64_t b, int64_t n) {
  detail::Problem p;
  EXPECT_TRUE(detail::build_problem(a, &p).ok());
  const detail::SeqInfo s = detail::seq_info(a, p, b);
  Args o = a;
  o.seqused_q = Tensor{};
  o.cu_seqlens_q = Tensor{};
  o.lse = Tensor{};
  o.max_seqlen_q = 0;
  auto rows_view = [&](const Tensor& t, int64_t first) {  // rank-4 (1, n, heads, dim) view
    Tensor v = t;
    const int64_t es = dtype_size(t.dtype);
    if (t.rank == 3) {
      v.data = static_cast<uint8_t*>(t.data) + first * t.stride[0] * es;
      v.rank = 4;
      v.shape[3] = t.shape[2], v.stride[3] = t.stride[2];
      v.shape[2] = t.shape[1], v.stride[2] = t.stride[1];
      v.shape[1] = n, v.stride[1] = t.stride[0];
      v.shape[0] = 1, v.stride[0] = n * t.stride[0];
    } else {
      v.data = static_cast<uint8_t*>(t.data) + b * t.stride[0] * es;
      v.shape[0] = 1, v.shape[1] = n;
    }
    return v;
  };
  o.q = rows_view(a.q, s.q_start);
  o.out = rows_view(a.out, s.q_start);
  // Per-batch K/V metadata restricted to entry b.
  auto entry = [&](const Tensor& t, int64_t first, int64_t len) {
    Tensor v = t;
    if (!t.present()) return v;
    v.data = static_cast<uint8_t*>(t.data) + first * t.stride[0] * dtype_size(t.dtype);
    v.shape[0] = len;
    return v;
  };
  if (p.kv == detail::KvLayout::ragged) {  // sequence b's rows as a dense (1, cap, heads, dim) view
    const int64_t first = get(a.cu_seqlens_k, {b}), cap = get(a.cu_seqlens_k, {b + 1}) - first;
    o.cu_seqlens_k = Tensor{};
    for (Tensor* t : {&o.k, &o.v}) {
      const Tensor src = *t;
      *t = src;
      t->data = static_cast<uint8_t*>(src.data) + first * src.stride[0] * dtype_size(src.dtype);
      t->rank = 4;
      t->shape[3] = src.shape[2], t->stride[3] = src.stride[2];
      t->shape[2] = src.shape[1], t->stride[2] = src.stride[1];
      t->shape[1] = cap, t->stride[1] = src.stride[0];
      t->shape[0] = 1, t->stride[0] = cap * src.stride[0];
    }
    o.max_seqlen_k = 0;
  }
  if (p.kv == detail::KvLayout::dense) {
    o.k = entry(a.k, b, 1), o.v = entry(a.v, b, 1);
  }
  o.page_table = entry(a.page_table, b, 1);
  o.seqused_k = entry(a.seqused_k, b, 1);
  o.q_descale = entry(a.q_descale, b, 1);
  o.k_descale = entry(a.k_descale, b, 1);
  o.v_descale = entry(a.v_descale, b, 1);
  return o;
}

// Every row computed with seqused_q equals, bitwise, the same row of the truncated problem.
void expect_equals_truncated(const CaseSpec& spec) {
  Case c = make_case(spec);
  OracleResult r = run_and_check(c.args);  // also: rows past seqused_q keep their poison
  ASSERT_TRUE(r.failure.empty()) << describe(spec) << ": " << r.failure;
  detail::Problem p;
  ASSERT_TRUE(detail::build_problem(c.args, &p).ok());
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t n = int64_t(get(c.seqused_q.t, {b}));  // read here, not through seq_info
    if (n == 0) continue;
    const Args o = one_sequence(c.args, b, n);
    detail::Problem po;
    const Status st = detail::build_problem(o, &po);
    ASSERT_TRUE(st.ok()) << st.message();
    for (int64_t h = 0; h < p.heads_q; ++h) {
      std::vector<double> out(size_t(n * p.dim_v)), lse(static_cast<size_t>(n));
      detail::reference_rows(o, po, 0, h, 0, n, out.data(), lse.data());
      const detail::SeqInfo s = detail::seq_info(c.args, p, b);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t oo = detail::out_offset(c.args, p, b, s, i, h);
        for (int64_t d = 0; d < p.dim_v; ++d)
          ASSERT_EQ(detail::load_as_double(c.args.out.data, DType::f32, oo + d), float(out[size_t(i * p.dim_v + d)]))
              << describe(spec) << " b " << b << " h " << h << " row " << i;
        ASSERT_EQ(detail::load_as_double(c.args.lse.data, DType::f32, detail::lse_offset(c.args, p, b, s, i, h)),
                  float(lse[size_t(i)]))
            << describe(spec) << " b " << b << " h " << h << " row " << i;
      }
    }
  }
}

CaseSpec seqused_base(uint64_t seed) {
  CaseSpec s;
  s.batch = 4, s.seq_q = 11, s.seq_k = 16, s.heads_q = 4, s.heads_kv = 2, s.dim_qk = 16, s.dim_v = 8;
  s.out_dtype = DType::f32, s.seed = seed;
  s.used_q = {11, 0, 4, 9};
  return s;
}

TEST(SeqUsedQ, DenseEqualsTruncatedQueries) {
  for (int mask = 0; mask < 4; ++mask) {
    CaseSpec s = seqused_base(40 + uint64_t(mask));
    s.mask.causal = mask >= 1;                    // bottom-right: aligned to the used rows
    if (mask == 2) s.mask.window_left = 3;
    if (mask == 3) s.mask.chunk_size = 5, s.mask.window_left = 2, s.sinks = true;
    expect_equals_truncated(s);
  }
}

TEST(SeqUsedQ, RaggedAndPagedEqualTruncatedQueries) {
  CaseSpec s = seqused_base(50);
  s.ragged_q = s.ragged_k = true;
  s.seqlens_q = {11, 3, 0, 10};
  s.used_q = {7, 3, 0, 1};
  s.mask.causal = true;
  expect_equals_truncated(s);
  CaseSpec p = seqused_base(51);
  p.page_size = 3, p.seqused_k = true, p.mask.causal = true, p.mask.window_left = 4;
  expect_equals_truncated(p);
  CaseSpec t = seqused_base(52);
  t.mask.causal = true, t.mask.align = CausalAlign::top_left;
  expect_equals_truncated(t);
}

// Chunk + window: the rows of one chunk equal a separate problem over that chunk alone with
// the same window (every visible key lies in the query's chunk).
TEST(ChunkAndWindow, EqualsWindowWithinEachChunk) {
  struct M { int64_t wl, wr; bool causal; };
  for (const M m : {M{2, -1, true}, M{0, 0, false}, M{1, 2, false}, M{-1, 1, false}, M{7, -1, true}}) {
    CaseSpec s;
    s.batch = 1, s.seq_q = s.seq_k = 14, s.heads_q = 2, s.heads_kv = 1, s.dim_qk = s.dim_v = 8;
    s.dtype = s.out_dtype = DType::f32, s.seed = 60 + uint64_t(m.wl + 3 * m.wr);
    s.mask.chunk_size = 5, s.mask.window_left = m.wl, s.mask.window_right = m.wr, s.mask.causal = m.causal;
    Case c = make_case(s);
    ASSERT_TRUE(run_and_check(c.args).failure.empty());
    for (int64_t start = 0; start < 14; start += 5) {
      const int64_t len = std::min<int64_t>(5, 14 - start);
      CaseSpec cs = s;
      cs.seq_q = cs.seq_k = len, cs.mask.chunk_size = 0;
      Case part = make_case(cs);
      for (auto [dst, src] : {std::pair{&part.q, &c.q}, std::pair{&part.k, &c.k}, std::pair{&part.v, &c.v}}) {
        const int64_t row = src->t.stride[1];
        std::copy_n(static_cast<float*>(src->t.data) + start * row, len * row, static_cast<float*>(dst->t.data));
      }
      ASSERT_TRUE(forward(part.args).ok());
      for (int64_t i = 0; i < len; ++i)
        for (int64_t h = 0; h < 2; ++h) {
          for (int64_t d = 0; d < 8; ++d)
            ASSERT_EQ(get(c.out.t, {0, start + i, h, d}), get(part.out.t, {0, i, h, d}))
                << m.wl << "," << m.wr << " causal " << m.causal << " row " << start + i;
          ASSERT_EQ(get(c.lse.t, {0, h, start + i}), get(part.lse.t, {0, h, i}));
        }
    }
  }
}

// Every key sequence empty (ragged k with no rows, dense k of length 0): zeros and LSE -inf,
// or the sink logit with sinks (FA3: zeros and -inf).
TEST(EmptyKeys, ZerosAndMinusInf) {
  for (bool sinks : {false, true})
    for (bool ragged : {false, true}) {
      CaseSpec s;
      s.batch = 3, s.seq_q = 6, s.seq_k = 0, s.sinks = sinks, s.mask.causal = true, s.seed = 70;
      if (ragged) s.ragged_q = s.ragged_k = true, s.seqlens_q = {6, 0, 2}, s.seqlens_k = {0, 0, 0};
      Case c = make_case(s);
      ASSERT_TRUE(run_and_check(c.args).failure.empty());
      detail::Problem p;
      ASSERT_TRUE(detail::build_problem(c.args, &p).ok());
      EXPECT_EQ(p.max_seq_k, 0);
      for (int64_t b = 0; b < p.batch; ++b) {
        const detail::SeqInfo si = detail::seq_info(c.args, p, b);
        for (int64_t h = 0; h < p.heads_q; ++h)
          for (int64_t i = 0; i < si.q_len; ++i) {
            const int64_t oo = detail::out_offset(c.args, p, b, si, i, h);
            for (int64_t d = 0; d < p.dim_v; ++d)
              ASSERT_EQ(detail::load_as_double(c.args.out.data, p.out_dtype, oo + d), 0.0);
            ASSERT_EQ(detail::load_as_double(c.args.lse.data, DType::f32, detail::lse_offset(c.args, p, b, si, i, h)),
                      sinks ? get(c.sinks.t, {h}) : -kInf);
          }
      }
    }
}

// A batch of no sequences is valid and writes nothing.
TEST(EmptyKeys, NoSequences) {
  CaseSpec s;
  s.batch = 0, s.ragged_q = s.ragged_k = true;
  Case c = make_case(s);
  ASSERT_EQ(c.args.cu_seqlens_q.shape[0], 1);
  EXPECT_TRUE(forward(c.args).ok());
}

}  // namespace
}  // namespace longattn::testing
