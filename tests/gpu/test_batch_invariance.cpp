// Batch invariance (issue 6): a sequence's output rows and LSE are bitwise identical whatever
// else is in the batch and wherever it sits, and whatever order the scheduler deals the tiles
// in (L2 sections, ragged tile list on / off). Each sequence's inputs come from its own seed,
// so "sequence X" holds the same values in every batch; X's rows are compared bit for bit
// between calls. Outputs are poisoned (NaN) first and X's rows must be finite, so rows that
// were never written cannot compare equal.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/overrides.h"
#include "common/problem.h"
#include "gpu_case.h"
#include "longattn/longattn.h"

namespace longattn {
namespace {

struct Seq {
  int32_t lq, lk;
  uint64_t seed;
};

struct Config {
  int64_t heads_q = 4, heads_kv = 2, dim = 128;
  bool causal = false, dense = false;  // dense: every sequence the same lengths, rank-4 tensors
  int64_t window_left = -1;
  int64_t l2_budget = 0;  // Args::l2_budget_bytes
  int sm_margin = 0;      // Args::sm_margin (fewer CTAs, the same tiles)
  detail::Overrides ov;   // schedule overrides (sections, tile list, dynamic counter)
};

// X's rows of one call: output bytes (lq x heads_q x dim, bf16) and LSE (heads_q x lq).
struct Rows {
  std::vector<uint16_t> out;
  std::vector<float> lse;
  std::string failure;
};

struct Dev {
  void* p = nullptr;
  explicit Dev(size_t n) {
    if (cudaMalloc(&p, n ? n : 16) != cudaSuccess) p = nullptr;
  }
  ~Dev() { cudaFree(p); }
};

Tensor view(void* data, DType t, std::vector<int64_t> shape) {
  Tensor x;
  x.data = data;
  x.dtype = t;
  x.device = Device{DeviceKind::cuda, 0};
  x.rank = int(shape.size());
  int64_t st = 1;
  for (int i = x.rank - 1; i >= 0; --i) {
    x.shape[i] = shape[i];
    x.stride[i] = st;
    st *= shape[i];
  }
  return x;
}

void fill(std::vector<uint16_t>& dst, int64_t n, float range, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> U(-range, range);
  const size_t at = dst.size();
  dst.resize(at + size_t(n));
  for (int64_t i = 0; i < n; ++i) detail::store_from_float(dst.data() + at, DType::bf16, i, U(rng));
}

// Runs the batch and returns the rows of sequence `which`.
Rows run_batch(const Config& c, const std::vector<Seq>& seqs, size_t which) {
  Rows r;
  std::vector<uint16_t> q, k, v;
  std::vector<int32_t> cq(1, 0), ck(1, 0);
  int32_t max_q = 0, max_k = 0;
  for (const Seq& s : seqs) {
    std::mt19937_64 rng(s.seed * 1000003 + 11);
    fill(q, int64_t(s.lq) * c.heads_q * c.dim, 3.f, rng);
    fill(k, int64_t(s.lk) * c.heads_kv * c.dim, 1.f, rng);
    fill(v, int64_t(s.lk) * c.heads_kv * c.dim, 1.f, rng);
    cq.push_back(cq.back() + s.lq);
    ck.push_back(ck.back() + s.lk);
    max_q = std::max(max_q, s.lq);
    max_k = std::max(max_k, s.lk);
  }
  const int64_t B = int64_t(seqs.size()), tq = cq.back(), tk = ck.back();
  Dev dq(q.size() * 2), dk(k.size() * 2), dv(v.size() * 2), dout(size_t(tq * c.heads_q * c.dim * 2)),
      dlse(size_t(tq * c.heads_q * 4)), dcq(cq.size() * 4), dck(ck.size() * 4);
  if (!dq.p || !dk.p || !dv.p || !dout.p || !dlse.p || !dcq.p || !dck.p) {
    r.failure = "cudaMalloc failed";
    return r;
  }
  cudaMemcpy(dq.p, q.data(), q.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(dk.p, k.data(), k.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(dv.p, v.data(), v.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(dcq.p, cq.data(), cq.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dck.p, ck.data(), ck.size() * 4, cudaMemcpyHostToDevice);
  cudaMemset(dout.p, 0xFF, size_t(tq * c.heads_q * c.dim * 2));  // NaN
  cudaMemset(dlse.p, 0xFF, size_t(tq * c.heads_q * 4));

  Args a;
  if (c.dense) {
    const int64_t L = seqs[0].lq, Lk = seqs[0].lk;
    a.q = view(dq.p, DType::bf16, {B, L, c.heads_q, c.dim});
    a.k = view(dk.p, DType::bf16, {B, Lk, c.heads_kv, c.dim});
    a.v = view(dv.p, DType::bf16, {B, Lk, c.heads_kv, c.dim});
    a.out = view(dout.p, DType::bf16, {B, L, c.heads_q, c.dim});
    a.lse = view(dlse.p, DType::f32, {B, c.heads_q, L});
  } else {
    a.q = view(dq.p, DType::bf16, {tq, c.heads_q, c.dim});
    a.k = view(dk.p, DType::bf16, {tk, c.heads_kv, c.dim});
    a.v = view(dv.p, DType::bf16, {tk, c.heads_kv, c.dim});
    a.out = view(dout.p, DType::bf16, {tq, c.heads_q, c.dim});
    a.lse = view(dlse.p, DType::f32, {c.heads_q, tq});
    a.cu_seqlens_q = view(dcq.p, DType::i32, {B + 1});
    a.cu_seqlens_k = view(dck.p, DType::i32, {B + 1});
    a.max_seqlen_q = max_q;
    a.max_seqlen_k = max_k;
  }
  a.mask.causal = c.causal;
  a.mask.window_left = c.window_left;
  a.l2_budget_bytes = c.l2_budget;
  a.sm_margin = c.sm_margin;
  a.backend = Backend::cuda;
  const Status st = detail::forward_with(a, c.ov);
  if (!st.ok()) {
    r.failure = "forward: " + st.message();
    return r;
  }
  if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) {
    r.failure = std::string("kernel: ") + cudaGetErrorString(e);
    return r;
  }
  const Seq& x = seqs[which];
  const int64_t row_elems = c.heads_q * c.dim;
  r.out.resize(size_t(int64_t(x.lq) * row_elems));
  cudaMemcpy(r.out.data(), static_cast<uint16_t*>(dout.p) + int64_t(cq[which]) * row_elems, r.out.size() * 2,
             cudaMemcpyDeviceToHost);
  std::vector<float> lse(size_t(tq * c.heads_q));
  cudaMemcpy(lse.data(), dlse.p, lse.size() * 4, cudaMemcpyDeviceToHost);
  for (int64_t h = 0; h < c.heads_q; ++h)
    for (int64_t i = 0; i < x.lq; ++i)
      r.lse.push_back(c.dense ? lse[size_t((int64_t(which) * c.heads_q + h) * x.lq + i)]
                              : lse[size_t(h * tq + cq[which] + i)]);
  for (uint16_t u : r.out)
    if (std::isnan(detail::load_as_float(&u, DType::bf16, 0))) {
      r.failure = "NaN in the sequence's output (unwritten row?)";
      break;
    }
  for (float l : r.lse)
    if (std::isnan(l)) r.failure = "NaN in the sequence's LSE (unwritten row?)";
  return r;
}

void expect_same(const Rows& a, const Rows& b, const std::string& what) {
  ASSERT_TRUE(a.failure.empty()) << what << ": " << a.failure;
  ASSERT_TRUE(b.failure.empty()) << what << ": " << b.failure;
  ASSERT_EQ(a.out.size(), b.out.size());
  int64_t diff = 0;
  for (size_t i = 0; i < a.out.size(); ++i) diff += a.out[i] != b.out[i];
  EXPECT_EQ(diff, 0) << what << ": " << diff << " of " << a.out.size() << " output elements differ";
  EXPECT_EQ(0, std::memcmp(a.lse.data(), b.lse.data(), a.lse.size() * 4)) << what << ": LSE differs";
}

class GpuBatchInvariance : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no sm_90 device";
  }
};

// Sequence X alone, then among other sequences (shorter, longer, empty, at the front, middle
// and end), causal (bottom-right with a KV prefix) and not, with a window, GQA.
TEST_F(GpuBatchInvariance, RaggedRowsIndependentOfTheBatch) {
  const Seq X{777, 1029, 42};
  std::mt19937_64 rng(2026);
  for (int variant = 0; variant < 4; ++variant) {
    Config c;
    c.causal = variant != 1;
    if (variant == 2) c.window_left = 300;
    if (variant == 3) {
      c.heads_q = 6;
      c.heads_kv = 1;
      c.dim = 64;
    }
    const Rows alone = run_batch(c, {X}, 0);
    for (int trial = 0; trial < 4; ++trial) {
      std::vector<Seq> batch;
      const int n = 1 + int(rng() % 6);
      for (int i = 0; i < n; ++i) {
        const int32_t lq = rng() % 5 == 0 ? 0 : int32_t(1 + rng() % 3000);
        batch.push_back({lq, lq + int32_t(rng() % 200), 100 + rng() % 100000});
      }
      const size_t at = size_t(rng() % (batch.size() + 1));
      batch.insert(batch.begin() + ptrdiff_t(at), X);
      expect_same(alone, run_batch(c, batch, at),
                  "variant " + std::to_string(variant) + " trial " + std::to_string(trial) + " (" +
                      std::to_string(batch.size()) + " sequences, X at " + std::to_string(at) + ")");
    }
  }
}

// Dense batches: X alone and as one of several sequences of the same lengths.
TEST_F(GpuBatchInvariance, DenseRowsIndependentOfTheBatch) {
  for (bool causal : {false, true}) {
    Config c;
    c.dense = true;
    c.causal = causal;
    const Seq X{1500, 1733, 7};
    const Rows alone = run_batch(c, {X}, 0);
    std::vector<Seq> batch = {{1500, 1733, 8}, {1500, 1733, 9}, X, {1500, 1733, 10}};
    expect_same(alone, run_batch(c, batch, 2), std::string("dense ") + (causal ? "causal" : "full"));
  }
}

// The order the scheduler deals tiles in changes nothing: forced section sizes, sections off,
// a tiny L2 budget, the ragged tile list off (the padded grid), the dynamic counter instead
// of the static snake (the default below 1536 key blocks), fewer CTAs (Args::sm_margin: 100
// SMs left free, and every SM but one).
TEST_F(GpuBatchInvariance, ScheduleOrderChangesNoBits) {
  Config dense;  // 384 tiles (> 2 rounds of 132 CTAs: the dynamic counter is used)
  dense.dense = true;
  dense.causal = true;
  dense.heads_q = 8;
  const std::vector<Seq> db = {{2000, 2000, 1}, {2000, 2000, 2}, {2000, 2000, 3}};
  Config ragged;
  ragged.causal = true;
  const std::vector<Seq> rb = {{100, 100, 4}, {3001, 3001, 5}, {0, 5, 6}, {1, 1, 7}, {900, 1300, 8}};
  for (bool is_dense : {true, false}) {
    const Config& c = is_dense ? dense : ragged;
    const auto& b = is_dense ? db : rb;
    const size_t which = 1;
    const Rows base = run_batch(c, b, which);
    struct Variant {
      const char* name;
      Config c;
    };
    std::vector<Variant> variants;
    for (int64_t n : {0, 1, 5}) {
      Config v = c;
      v.ov.sections = n;
      variants.push_back({n == 0 ? "sections=0" : n == 1 ? "sections=1" : "sections=5", v});
    }
    {
      Config v = c;
      v.l2_budget = 65536;
      variants.push_back({"l2_budget_bytes=65536", v});
      v = c;
      v.ov.tile_list = detail::Force::off;
      variants.push_back({"tile_list=off", v});
      v = c;
      v.ov.dynamic = detail::Force::on;
      variants.push_back({"dynamic=on", v});
      v = c;
      v.sm_margin = 100;
      variants.push_back({"sm_margin=100", v});
      v.sm_margin = 100000;
      variants.push_back({"sm_margin=100000", v});
    }
    for (const Variant& v : variants)
      expect_same(base, run_batch(v.c, b, which), std::string(is_dense ? "dense " : "ragged ") + v.name);
    Config small = c;  // the Args budget: a tiny one gives the smallest sections
    small.l2_budget = 1 << 16;
    expect_same(base, run_batch(small, b, which), std::string(is_dense ? "dense" : "ragged") + " l2_budget_bytes");
  }
  // Non-causal dense: sections off (heads fastest) vs the default (q-blocks fastest).
  Config full;
  full.dense = true;
  const Rows base = run_batch(full, db, 2);
  full.ov.sections = 0;
  expect_same(base, run_batch(full, db, 2), "dense full sections=0");
}

// Both assignment paths against the float64 reference (oracle rule, poisoned outputs): the
// dynamic counter (Overrides::dynamic on; compiled into hdim-64 ragged, hdim-128 causal /
// features / ragged; used with more than two rounds of tiles) and the static snake, on causal, windowed and
// ragged shapes, GQA, and a tiny L2 budget (many small sections); hdim 64 dense and 256 run
// the static snake either way.
TEST_F(GpuBatchInvariance, StaticAndDynamicAssignmentMatchReference) {
  using gputest::Shape;
  std::vector<Shape> shapes;
  auto S = [](int64_t b, int64_t sq, int64_t sk, int64_t hq, int64_t hkv, int64_t d, bool causal) {
    Shape s = gputest::dense_shape(b, sq, sk, hq, hkv, d, causal);
    s.rows_per_head = 24;
    return s;
  };
  shapes.push_back(S(3, 2100, 2333, 8, 2, 128, true));
  shapes.push_back(S(2, 1500, 1500, 6, 3, 64, true));
  shapes.push_back(S(2, 1100, 1100, 4, 2, 256, true));
  {
    Shape s = S(2, 3000, 3000, 8, 2, 128, true);
    s.window_left = 500;
    shapes.push_back(s);
    s = S(2, 2900, 3100, 8, 2, 128, false);  // both-sided: the counter without LPT
    s.window_left = 300;
    s.window_right = 170;
    shapes.push_back(s);
  }
  for (int64_t d : {64, 128}) {
    Shape s = S(1, 1, 1, 4, 2, d, true);
    s.lens_q = {1700, 0, 33, 900, 1, 2500};
    s.lens_k = {1700, 5, 40, 1000, 1, 2500};
    s.seed = 31 + uint64_t(d);
    shapes.push_back(s);
  }
  for (bool dyn : {true, false})
    for (int64_t l2 : {0, 65536}) {
      for (Shape s : shapes) {
        s.ov.dynamic = dyn ? detail::Force::on : detail::Force::off;
        s.l2_budget = l2;
        const gputest::CheckResult r = gputest::run_case(s);
        EXPECT_TRUE(r.failure.empty()) << s.name() << " dynamic=" << dyn << " l2_budget_bytes=" << l2 << ": "
                                       << r.failure;
      }
    }
}

// Many short tiles (more than two rounds of the grid, so the dynamic counter runs) on small
// data: the case for the sanitizers (memcheck / racecheck on the shared-memory id slots and
// the ragged tile-list pre-kernel), dynamic and static, dense and ragged, vs the reference.
TEST_F(GpuBatchInvariance, ManySmallTiles) {
  using gputest::Shape;
  Shape dense;
  dense.batch = 10;
  dense.seq_q = 200;
  dense.seq_k = 231;
  dense.heads_q = 32;
  dense.heads_kv = 8;
  dense.causal = true;
  dense.rows_per_head = 6;
  Shape ragged = dense;
  ragged.heads_q = 4;
  ragged.heads_kv = 2;
  std::mt19937_64 rng(77);
  for (int i = 0; i < 100; ++i) {
    const int32_t n = int32_t(rng() % 300);
    ragged.lens_q.push_back(n);
    ragged.lens_k.push_back(n + int32_t(rng() % 50));
  }
  ragged.seed = 9;
  Shape ragged64 = ragged;  // the hdim-64 ragged kernel (128 x 128, dynamic compiled in)
  ragged64.dim = 64;
  ragged64.seed = 10;
  Shape windowed = dense;  // both-sided window, no causal mask: the counter without LPT
  windowed.causal = false;
  windowed.window_left = 40;
  windowed.window_right = 25;
  windowed.seed = 11;
  for (bool dyn : {true, false}) {
    for (Shape s : {dense, ragged, ragged64, windowed}) {
      s.ov.dynamic = dyn ? detail::Force::on : detail::Force::off;
      const gputest::CheckResult r = gputest::run_case(s);
      EXPECT_TRUE(r.failure.empty()) << s.name() << " dynamic=" << dyn << ": " << r.failure;
    }
  }
}

// One long sequence among 1999 of 0..3 tokens: the tile list holds ~2200 live items where
// the padded grid had 2000 x 157 (the list's capacity is bounded by total_q / block_m +
// batch); causal, against the reference, list on and off.
TEST_F(GpuBatchInvariance, OneLongAmongManyTiny) {
  gputest::Shape s;
  s.heads_q = 4;
  s.heads_kv = 1;
  s.causal = true;
  s.rows_per_head = 8;
  s.seed = 12;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 2000; ++i) {
    const int32_t n = i == 777 ? 20000 : int32_t(rng() % 4);
    s.lens_q.push_back(n);
    s.lens_k.push_back(n);
  }
  for (bool list : {true, false}) {
    s.ov.tile_list = list ? detail::Force::on : detail::Force::off;
    const gputest::CheckResult r = gputest::run_case(s);
    EXPECT_TRUE(r.failure.empty()) << s.name() << " tile_list=" << list << ": " << r.failure;
  }
}

}  // namespace
}  // namespace longattn
