// Args::cp_world / cp_rank (zigzag context parallelism) on the CPU backend and the float64
// reference: each rank's call over the gathered, rank-major K/V must equal the rows of one
// call on the whole sequence in sequence order (built here independently: the test's own
// zigzag shard and gather). Odd head counts, GQA, causal and full, sinks, softcap, f32 and
// bf16 inputs; chunk sizes that straddle the CPU kernel's 64-key tiles and work items.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "longattn/longattn.h"
#include "support/random.h"

namespace longattn::testing {
namespace {

struct CpSpec {
  int64_t world, chunk, heads_q, heads_kv, dim;
  bool causal;
  bool sinks = false;
  float softcap = 0.f;
  DType dtype = DType::f32;
};

// Element storage of `dtype` from float values (bf16: round to nearest even).
std::vector<uint16_t> to_bf16(const std::vector<float>& x) {
  std::vector<uint16_t> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    uint32_t u;
    std::memcpy(&u, &x[i], 4);
    y[i] = uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
  return y;
}

struct Buf {
  std::vector<float> f;
  std::vector<uint16_t> h;
  void* data(DType t) { return t == DType::f32 ? static_cast<void*>(f.data()) : static_cast<void*>(h.data()); }
};

Buf make_buf(std::vector<float> v, DType t) {
  Buf b;
  if (t == DType::bf16) b.h = to_bf16(v);
  b.f = std::move(v);
  return b;
}

// Rank r's tokens of a sequence of 2 W c rows of `row` elements: chunks r and 2W - 1 - r.
std::vector<float> shard(const std::vector<float>& x, int64_t w, int64_t c, int64_t r, int64_t row) {
  std::vector<float> y;
  for (int64_t ch : {r, 2 * w - 1 - r})
    y.insert(y.end(), x.begin() + ch * c * row, x.begin() + (ch + 1) * c * row);
  return y;
}

// Max |a - b| over the rank's rows of the whole call's output (sequence order) and LSE.
std::string run(const CpSpec& s, Backend backend, uint64_t seed) {
  const int64_t w = s.world, c = s.chunk, n = 2 * w * c, hq = s.heads_q, hk = s.heads_kv, d = s.dim;
  Rng rng(seed);
  auto rnd = [&](int64_t count) {
    std::vector<float> v(static_cast<size_t>(count), 0.f);
    for (float& x : v) x = rng.uniform(-2.f, 2.f);
    return v;
  };
  const std::vector<float> q = rnd(n * hq * d), k = rnd(n * hk * d), v = rnd(n * hk * d);
  std::vector<float> sinks = std::vector<float>(size_t(hq));
  for (float& x : sinks) x = rng.uniform(-1.f, 2.f);
  auto common = [&](Args& a) {
    a.backend = backend;
    a.mask.causal = s.causal;
    a.softcap = s.softcap;
    if (s.sinks) a.sinks = make_tensor(sinks.data(), DType::f32, {hq});
  };
  // The whole sequence in one call.
  Buf qa = make_buf(q, s.dtype), ka = make_buf(k, s.dtype), va = make_buf(v, s.dtype);
  std::vector<float> out_all(size_t(n * hq * d)), lse_all(size_t(hq * n));
  Args all;
  all.q = make_tensor(qa.data(s.dtype), s.dtype, {1, n, hq, d});
  all.k = make_tensor(ka.data(s.dtype), s.dtype, {1, n, hk, d});
  all.v = make_tensor(va.data(s.dtype), s.dtype, {1, n, hk, d});
  all.out = make_tensor(out_all.data(), DType::f32, {1, n, hq, d});
  all.lse = make_tensor(lse_all.data(), DType::f32, {1, hq, n});
  common(all);
  if (Status st = forward(all); !st.ok()) return "whole call: " + st.message();
  // The gathered K / V: every rank's shard, rank-major, as an all-gather leaves them.
  std::vector<float> kg, vg;
  for (int64_t r = 0; r < w; ++r) {
    const std::vector<float> ks = shard(k, w, c, r, hk * d), vs = shard(v, w, c, r, hk * d);
    kg.insert(kg.end(), ks.begin(), ks.end());
    vg.insert(vg.end(), vs.begin(), vs.end());
  }
  Buf kb = make_buf(kg, s.dtype), vb = make_buf(vg, s.dtype);
  double err = 0, lerr = 0;
  for (int64_t r = 0; r < w; ++r) {
    Buf qb = make_buf(shard(q, w, c, r, hq * d), s.dtype);
    std::vector<float> out(size_t(2 * c * hq * d), NAN), lse(size_t(hq * 2 * c), NAN);  // poisoned
    Args a;
    a.q = make_tensor(qb.data(s.dtype), s.dtype, {1, 2 * c, hq, d});
    a.k = make_tensor(kb.data(s.dtype), s.dtype, {w, 2 * c, hk, d});
    a.v = make_tensor(vb.data(s.dtype), s.dtype, {w, 2 * c, hk, d});
    a.out = make_tensor(out.data(), DType::f32, {1, 2 * c, hq, d});
    a.lse = make_tensor(lse.data(), DType::f32, {1, hq, 2 * c});
    a.cp_world = int(w);
    a.cp_rank = int(r);
    common(a);
    if (Status st = forward(a); !st.ok()) return "rank " + std::to_string(r) + ": " + st.message();
    for (int64_t i = 0; i < 2 * c; ++i) {
      const int64_t g = i < c ? r * c + i : (2 * w - 1 - r) * c + i - c;  // its sequence row
      for (int64_t h = 0; h < hq; ++h) {
        for (int64_t e = 0; e < d; ++e) {
          const double x = out[size_t((i * hq + h) * d + e)], y = out_all[size_t((g * hq + h) * d + e)];
          err = std::isnan(x) ? INFINITY : std::max(err, std::abs(x - y));
        }
        const double x = lse[size_t(h * 2 * c + i)], y = lse_all[size_t(h * n + g)];
        lerr = std::isnan(x) ? INFINITY : std::max(lerr, std::abs(x - y));
        if (std::isinf(err) || std::isinf(lerr)) return "rank " + std::to_string(r) + ": a row was not written";
      }
    }
  }
  const double tol = 2e-5;  // the same keys in the same order per row: rounding only
  if (err > tol || lerr > tol)
    return "max |out - whole| " + std::to_string(err) + ", |lse - whole| " + std::to_string(lerr);
  return "";
}

class CpZigzag : public ::testing::TestWithParam<Backend> {};

TEST_P(CpZigzag, MatchesTheWholeSequence) {
  const CpSpec specs[] = {
      {1, 40, 3, 3, 32, true},                          // world 1: the plain call
      {2, 37, 4, 2, 64, true},                          // odd chunk, GQA 2
      {3, 70, 6, 2, 40, true, true, 0.f, DType::bf16},  // chunks across 64-key tiles, sinks
      {4, 33, 3, 1, 16, false},                         // full attention
      {4, 65, 5, 5, 24, true, false, 7.f},              // softcap
      {5, 16, 2, 1, 8, true, true, 3.f, DType::bf16},
  };
  uint64_t seed = 7;
  for (const CpSpec& s : specs) {
    EXPECT_EQ(run(s, GetParam(), seed++), "")
        << "world " << s.world << " chunk " << s.chunk << " heads " << s.heads_q << "/" << s.heads_kv << " causal "
        << s.causal;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, CpZigzag, ::testing::Values(Backend::cpu, Backend::reference),
                         [](const auto& info) { return std::string(backend_name(info.param)); });

// Bad cp arguments: a clear error naming the argument, nothing written.
TEST(CpZigzagArgs, Invalid) {
  std::vector<float> q(1 * 8 * 2 * 8, 1.f), k(2 * 8 * 2 * 8, 1.f), out(q.size(), 5.f);
  auto base = [&] {
    Args a;
    a.backend = Backend::cpu;
    a.q = make_tensor(q.data(), DType::f32, {1, 8, 2, 8});
    a.k = make_tensor(k.data(), DType::f32, {2, 8, 2, 8});
    a.v = make_tensor(k.data(), DType::f32, {2, 8, 2, 8});
    a.out = make_tensor(out.data(), DType::f32, {1, 8, 2, 8});
    a.cp_world = 2;
    a.cp_rank = 1;
    return a;
  };
  ASSERT_TRUE(validate(base()).ok());
  auto expect = [&](Args a, const char* what) {
    const Status st = forward(a);
    EXPECT_FALSE(st.ok()) << what;
    EXPECT_NE(st.message().find(what), std::string::npos) << st.message();
    for (float x : out) ASSERT_EQ(x, 5.f) << what;
  };
  Args a = base();
  a.cp_rank = 2;
  expect(a, "cp_rank");
  a = base();
  a.cp_world = -1;
  expect(a, "cp_world");
  a = base();
  a.cp_world = 0;
  expect(a, "cp_rank");
  a = base();
  a.k = make_tensor(k.data(), DType::f32, {1, 16, 2, 8});
  a.v = a.k;
  expect(a, "k: shape");
  a = base();
  a.q = make_tensor(q.data(), DType::f32, {2, 4, 2, 8});
  a.out = make_tensor(out.data(), DType::f32, {2, 4, 2, 8});
  expect(a, "q: batch");
  a = base();
  a.mask.window_left = 4;
  expect(a, "mask");
  std::vector<int32_t> cu = {0, 8};  // ragged q: refused before its shape is read as (batch, seq)
  a = base();
  a.q = make_tensor(q.data(), DType::f32, {8, 2, 8});
  a.out = make_tensor(out.data(), DType::f32, {8, 2, 8});
  a.cu_seqlens_q = make_tensor(cu.data(), DType::i32, {2});
  expect(a, "cp_world: needs dense");
}

}  // namespace
}  // namespace longattn::testing
