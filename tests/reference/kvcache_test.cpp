// The kvcache serving path (issue 17) on the reference backend against its definition
// (longattn.h KvCacheArgs), built here independently: for each sequence the keys it must see
// are gathered by hand into a plain dense problem -- the cached slots [leftpad, end) of its
// cache row, then the new keys rotated at r0 + i -- with q rotated by hand at r0 + i (per
// row) or r0, and that plain problem's reference result must equal the kvcache call's.
// float32 inputs keep the hand rotation and the library's within float32 rounding.
#include <gtest/gtest.h>

#include <cmath>

#include "common/problem.h"
#include "support/kvcache_case.h"

namespace longattn::testing {
namespace {

using detail::load_as_double;
using detail::store_from_float;

// Rotates row `x` (dim elements) in place at position pos, by the textbook formulas:
// GPT-J rotates (x[2i], x[2i+1]) by angle i, GPT-NeoX (x[i], x[i + r/2]).
void rotate(std::vector<double>& x, const Tensor& cos, const Tensor& sin, int64_t pos, int64_t r, bool gptj) {
  for (int64_t i = 0; i < r / 2; ++i) {
    const double c = load_as_double(cos.data, cos.dtype, pos * cos.stride[0] + i);
    const double s = load_as_double(sin.data, sin.dtype, pos * sin.stride[0] + i);
    const int64_t a = gptj ? 2 * i : i, b = gptj ? 2 * i + 1 : i + r / 2;
    const double xa = x[size_t(a)], xb = x[size_t(b)];
    x[size_t(a)] = xa * c - xb * s;
    x[size_t(b)] = xa * s + xb * c;
  }
}

int32_t at(const HostTensor& t, int64_t i) { return static_cast<const int32_t*>(t.t.data)[i]; }

// The kvcache call on the reference backend vs one plain dense call per sequence.
std::string against_definition(const KvCaseSpec& spec) {
  KvCase c = make_kv_case(spec);
  const KvSnapshot before = snapshot(c);
  const Status st = forward(c.args);
  if (!st.ok()) return "forward: " + st.message();
  const KvCaseSpec& s = c.spec;
  const DType t = s.dtype;
  const int64_t ps = s.page_size;
  for (int64_t b = 0; b < s.batch; ++b) {
    const int64_t row = s.batch_idx ? at(c.cache_batch_idx, b) : b;
    const int64_t end = at(c.seqused_k, b), lp = s.leftpad ? at(c.cache_leftpad, b) : 0;
    const int64_t n0 = s.ragged_new ? at(c.cu_seqlens_k_new, b) : 0;
    const int64_t n = !s.append ? 0 : s.ragged_new ? at(c.cu_seqlens_k_new, b + 1) - n0 : s.seqlen_new;
    const int64_t q0 = s.ragged_q ? at(c.cu_seqlens_q, b) : 0;
    const int64_t sq = s.ragged_q ? at(c.cu_seqlens_q, b + 1) - q0 : s.seq_q;
    const int64_t r0 = s.rotary_seqlens ? at(c.rotary_seqlens, b) : end;
    const bool per_row = s.mask.causal || s.mask.window_left >= 0 || s.mask.window_right >= 0 || s.mask.chunk_size > 0;
    const int64_t sk = end - lp + n;
    // The plain problem of this sequence, batch 1.
    HostTensor q = empty_tensor(t, {1, sq, s.heads_q, s.dim_qk});
    HostTensor k = empty_tensor(t, {1, sk, s.heads_kv, s.dim_qk});
    HostTensor v = empty_tensor(t, {1, sk, s.heads_kv, s.dim_v});
    HostTensor o = empty_tensor(t, {1, sq, s.heads_q, s.dim_v});
    std::vector<double> x;
    auto slot = [&](const HostTensor& cache, int64_t tt, int64_t hk) {  // before's layout = the case's
      const Tensor& ct = cache.t;
      if (ps > 0) {
        const int64_t page = at(c.page_table, row * c.page_table.t.stride[0] + tt / ps);
        return page * ct.stride[0] + (tt % ps) * ct.stride[1] + hk * ct.stride[2];
      }
      return row * ct.stride[0] + tt * ct.stride[1] + hk * ct.stride[2];
    };
    for (int64_t j = 0; j < sk; ++j)
      for (int64_t hk = 0; hk < s.heads_kv; ++hk) {
        const int64_t kd = (j * s.heads_kv + hk) * s.dim_qk, vd = (j * s.heads_kv + hk) * s.dim_v;
        if (j < end - lp) {  // a cached key, as it was before the call
          for (int64_t d = 0; d < s.dim_qk; ++d)
            store_from_float(k.t.data, t, kd + d, float(load_as_double(before.k.t.data, t, slot(before.k, lp + j, hk) + d)));
          for (int64_t d = 0; d < s.dim_v; ++d)
            store_from_float(v.t.data, t, vd + d, float(load_as_double(before.v.t.data, t, slot(before.v, lp + j, hk) + d)));
          continue;
        }
        const int64_t i = j - (end - lp);  // new key i
        const Tensor& kn = c.k_new.t;
        const Tensor& vn = c.v_new.t;
        const int64_t ko = s.ragged_new ? (n0 + i) * kn.stride[0] + hk * kn.stride[1]
                                        : b * kn.stride[0] + i * kn.stride[1] + hk * kn.stride[2];
        const int64_t vo = s.ragged_new ? (n0 + i) * vn.stride[0] + hk * vn.stride[1]
                                        : b * vn.stride[0] + i * vn.stride[1] + hk * vn.stride[2];
        x.assign(size_t(s.dim_qk), 0.0);
        for (int64_t d = 0; d < s.dim_qk; ++d) x[size_t(d)] = load_as_double(kn.data, t, ko + d);
        if (s.rotary_dim > 0) rotate(x, c.rotary_cos.t, c.rotary_sin.t, r0 + i, s.rotary_dim, s.interleaved);
        for (int64_t d = 0; d < s.dim_qk; ++d) store_from_float(k.t.data, t, kd + d, float(x[size_t(d)]));
        for (int64_t d = 0; d < s.dim_v; ++d) store_from_float(v.t.data, t, vd + d, float(load_as_double(vn.data, t, vo + d)));
      }
    const Tensor& qt = c.q.t;
    for (int64_t i = 0; i < sq; ++i)
      for (int64_t h = 0; h < s.heads_q; ++h) {
        const int64_t qo = s.ragged_q ? (q0 + i) * qt.stride[0] + h * qt.stride[1]
                                      : b * qt.stride[0] + i * qt.stride[1] + h * qt.stride[2];
        x.assign(size_t(s.dim_qk), 0.0);
        for (int64_t d = 0; d < s.dim_qk; ++d) x[size_t(d)] = load_as_double(qt.data, t, qo + d);
        if (s.rotary_dim > 0) rotate(x, c.rotary_cos.t, c.rotary_sin.t, r0 + (per_row ? i : 0), s.rotary_dim, s.interleaved);
        for (int64_t d = 0; d < s.dim_qk; ++d)
          store_from_float(q.t.data, t, (i * s.heads_q + h) * s.dim_qk + d, float(x[size_t(d)]));
      }
    Args a;
    a.q = q.t, a.k = k.t, a.v = v.t, a.out = o.t;
    a.mask = s.mask;
    a.softcap = s.softcap;
    a.sinks = c.sinks.t;
    a.backend = Backend::reference;
    const Status ps_ = forward(a);
    if (!ps_.ok()) return "plain forward: " + ps_.message();
    const Tensor& ot = c.out.t;
    for (int64_t i = 0; i < sq; ++i)
      for (int64_t h = 0; h < s.heads_q; ++h)
        for (int64_t d = 0; d < s.dim_v; ++d) {
          const int64_t oo = s.ragged_q ? (q0 + i) * ot.stride[0] + h * ot.stride[1] + d
                                        : b * ot.stride[0] + i * ot.stride[1] + h * ot.stride[2] + d;
          const double got = load_as_double(ot.data, ot.dtype, oo);
          const double want = load_as_double(o.t.data, t, (i * s.heads_q + h) * s.dim_v + d);
          if (!(std::fabs(got - want) <= 1e-5))
            return "sequence " + std::to_string(b) + " row " + std::to_string(i) + " head " + std::to_string(h) +
                   " d " + std::to_string(d) + ": " + std::to_string(got) + " vs the definition's " + std::to_string(want);
        }
  }
  return check_kv_call(c.args, before);
}

KvCaseSpec base(uint64_t seed) {
  KvCaseSpec s;
  s.batch = 3, s.seq_q = 6, s.heads_q = 4, s.heads_kv = 2, s.dim_qk = 24, s.dim_v = 20;
  s.capacity = 29, s.seqlen_new = 5, s.dtype = DType::f32, s.seed = seed;
  return s;
}

TEST(KvcacheReference, AppendDense) {
  for (bool causal : {false, true}) {
    KvCaseSpec s = base(1);
    s.mask.causal = causal;
    EXPECT_EQ(against_definition(s), "") << describe(s);
  }
}

TEST(KvcacheReference, AppendPagedAnyPageSize) {
  for (int64_t ps : {1, 3, 8, 32}) {
    KvCaseSpec s = base(2 + uint64_t(ps));
    s.page_size = ps, s.mask.causal = true;
    EXPECT_EQ(against_definition(s), "") << describe(s);
  }
}

TEST(KvcacheReference, RotaryInterleavedAndNeoxEveryRotaryDim) {
  for (bool gptj : {true, false})
    for (int64_t rd : {2, 8, 24}) {
      for (bool causal : {false, true}) {  // per-row positions vs every row at r0
        KvCaseSpec s = base(10 + uint64_t(rd));
        s.rotary_dim = rd, s.interleaved = gptj, s.mask.causal = causal;
        EXPECT_EQ(against_definition(s), "") << describe(s);
      }
    }
}

TEST(KvcacheReference, RotaryPerRowUnderWindowAndChunk) {
  KvCaseSpec s = base(20);
  s.rotary_dim = 16, s.mask.window_left = 7;
  EXPECT_EQ(against_definition(s), "") << describe(s);
  s.mask = Mask{};
  s.mask.chunk_size = 9;
  EXPECT_EQ(against_definition(s), "") << describe(s);
}

TEST(KvcacheReference, RotarySeqlensAndTables) {
  for (bool f32_tables : {false, true}) {
    KvCaseSpec s = base(30);
    s.dtype = DType::bf16, s.rotary_dim = 16, s.rotary_seqlens = true, s.rotary_f32 = f32_tables;
    s.mask.causal = true, s.page_size = 4;
    EXPECT_EQ(against_definition(s), "") << describe(s);
  }
}

TEST(KvcacheReference, RaggedNewKeysAndQueries) {
  KvCaseSpec s = base(40);
  s.batch = 4, s.ragged_new = true, s.ragged_q = true, s.rotary_dim = 12, s.mask.causal = true;
  EXPECT_EQ(against_definition(s), "") << describe(s);
  s.page_size = 5, s.seed = 41;
  EXPECT_EQ(against_definition(s), "") << describe(s);
}

TEST(KvcacheReference, BatchIdxAndLeftpad) {
  for (int64_t ps : {0, 4}) {
    KvCaseSpec s = base(50 + uint64_t(ps));
    s.batch_idx = true, s.leftpad = true, s.page_size = ps, s.rotary_dim = 8, s.mask.causal = true;
    EXPECT_EQ(against_definition(s), "") << describe(s);
  }
}

TEST(KvcacheReference, BatchIdxAndLeftpadWithoutAppend) {
  KvCaseSpec s = base(60);
  s.append = false, s.batch_idx = true, s.leftpad = true, s.mask.causal = true;
  EXPECT_EQ(against_definition(s), "") << describe(s);
}

TEST(KvcacheReference, NoNewKeysStillRotatesQ) {
  KvCaseSpec s = base(70);
  s.seqlen_new = 0, s.rotary_dim = 24, s.mask.causal = true;
  EXPECT_EQ(against_definition(s), "") << describe(s);
}

TEST(KvcacheReference, SoftcapSinksGqa) {
  KvCaseSpec s = base(80);
  s.heads_q = 6, s.heads_kv = 1, s.softcap = 5.0f, s.sinks = true, s.rotary_dim = 24, s.mask.causal = true;
  EXPECT_EQ(against_definition(s), "") << describe(s);
}

// The appended keys land where the definition puts them, rotated by the closed form: a unit
// key e0 at position t becomes (cos t theta0, sin t theta0, 0, ...) under GPT-J and
// e0 cos + e_{r/2} sin under GPT-NeoX.
TEST(KvcacheReference, RotatedUnitKeyInTheCache) {
  for (bool gptj : {true, false}) {
    KvCaseSpec s = base(90);
    s.batch = 1, s.seqlen_new = 1, s.rotary_dim = 8, s.interleaved = gptj, s.heads_kv = 1, s.heads_q = 1;
    KvCase c = make_kv_case(s);
    float* kn = static_cast<float*>(c.k_new.t.data);
    for (int64_t d = 0; d < s.dim_qk; ++d) kn[d] = d == 0 ? 1.0f : 0.0f;
    ASSERT_TRUE(forward(c.args).ok());
    const int64_t end = at(c.seqused_k, 0);
    const float* cos = static_cast<const float*>(c.rotary_cos.t.data);
    const float* sin = static_cast<const float*>(c.rotary_sin.t.data);
    const float* k = static_cast<const float*>(c.k.t.data) + end * c.k.t.stride[1];
    EXPECT_EQ(k[0], cos[end * 4]);
    EXPECT_EQ(k[gptj ? 1 : 4], sin[end * 4]);
    for (int64_t d = 1; d < s.dim_qk; ++d)
      if (d != (gptj ? 1 : 4)) EXPECT_EQ(k[d], 0.0f) << d;
  }
}

}  // namespace
}  // namespace longattn::testing
