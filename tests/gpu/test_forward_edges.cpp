// The GPU forward beyond the shape suites: bitwise determinism, the causal L2 sections
// coverage, both softcap modes, refusals with a named status, and inputs with no keys.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "forward_cases.h"
#include "gpu_case.h"
#include "common/problem.h"
#include "cuda/chunk_batch.h"
#include "cuda/launch_args.h"
#include "cuda/plan.h"

namespace longattn::gputest {
namespace {

bool have_gpu() { return cuda_available(); }

// A moving result is a race: the same inputs must give bitwise the same output.
TEST(GpuForwardDeterminism, SameInputsSameBits) {
  if (!have_gpu()) GTEST_SKIP() << "no sm_90 device";
  for (bool c : {false, true}) {
    Shape s = S(2, 1500, 1500, 4, 2, 128, c);
    s.rows_per_head = 4;
    CheckResult a = run_case(s), b = run_case(s);
    ASSERT_TRUE(a.failure.empty()) << a.failure;
    EXPECT_TRUE(a.out_bytes == b.out_bytes) << s.name() << ": outputs differ between runs";
  }
}

// Chunked attention as a batch of its chunks (cuda/chunk_batch.h: seq_q = seq_k a multiple of
// the chunk, no window, batches that follow each other) and on the feature kind's chunk mask
// (Overrides::chunk_batch off), both against the reference, LSE included (it comes back
// through scratch): causal and full, both alignments, GQA, padded rows, sinks and softcap,
// head dims 64 / 128 / 256, a chunk past the sequence (one chunk); then calls the rule leaves
// to the mask (a partial last chunk, a window with the chunk).
TEST(GpuForwardChunkBatch, BothPathsMatchTheReference) {
  if (!have_gpu()) GTEST_SKIP() << "no sm_90 device";
  std::vector<Shape> cases = {chunk(S(2, 1024, 1024, 4, 2, 128, true), 256),
                              chunk(S(1, 1000, 1000, 4, 4, 64, false, DType::f16), 200),
                              cap(sinks(chunk(S(3, 768, 768, 4, 1, 256, true), 256)), 20.f),
                              chunk(tl(S(2, 640, 640, 2, 2, 128, true)), 128),
                              chunk(S(2, 512, 512, 4, 2, 128, true), 4096),
                              chunk(S(2, 1000, 1000, 4, 2, 128, true), 256),
                              win(chunk(S(1, 1024, 1024, 2, 2, 128, true), 256), 100, -1)};
  {
    Shape s = chunk(S(2, 768, 768, 4, 2, 128, false), 384);
    s.pad = 24;
    cases.push_back(s);
  }
  for (Shape s : cases) {
    s.seed += 53;
    s.rows_per_head = 48;
    for (detail::Force f : {detail::Force::rule, detail::Force::off}) {
      Shape c = s;
      c.ov.chunk_batch = f;
      CheckResult r = run_case(c, atol_for(c));
      EXPECT_TRUE(r.failure.empty()) << c.name() << (f == detail::Force::off ? " (chunk mask)" : " (rule)") << ": "
                                     << r.failure;
    }
  }
}

// Causal tiles are ordered in L2 sections of (batch, head) pairs; a section size that does
// not divide the pair count must still cover every tile exactly once (poisoned outputs).
TEST(GpuForwardSchedule, CausalSectionsCoverEveryTile) {
  if (!have_gpu()) GTEST_SKIP() << "no sm_90 device";
  for (int64_t n : {3, 1, 0}) {
    Shape s = S(3, 700, 900, 5, 1, 128, true);
    s.rows_per_head = 16;
    s.ov.sections = n;
    CheckResult r = run_case(s);
    EXPECT_TRUE(r.failure.empty()) << "sections " << n << ": " << r.failure;
  }
}

// Both softcap modes (cuda/sm90/softcap_mode.h: fixed max by default, forced off = the running
// max) against the reference. Both cap inside the softmax on blocks without an element mask
// and before the mask on masked ones, so the cases mix both: causal and windowed tiles, rows
// that see no key (top-left window; output 0, LSE = -inf or the sink), sinks, a saturated tanh
// (scale 1: raw logits of tens), f16 -> f32 and cap > 52 (fixed falls back to fused), sinks
// far above every logit (fixed: m0 = the sink), the three head dims (fixed runs as fused on the
// three-warpgroup hdim-64 tile), and the hdim-64 cases again through the ragged kernel's
// two-warpgroup tile (seqused_k set), where the fixed max compiles.
TEST(GpuForwardSoftcap, EveryMode) {
  if (!have_gpu()) GTEST_SKIP() << "no sm_90 device";
  std::vector<Shape> cases;
  {
    Shape s = S(1, 700, 900, 4, 2, 128, true);
    s.softcap = 10.f;
    s.sinks = true;
    cases.push_back(s);
  }
  {
    Shape s = S(2, 513, 1000, 4, 4, 128, false);
    s.softcap = 5.f;
    s.scale = 1.f;
    cases.push_back(s);
  }
  cases.push_back(cap(tl(win(F(1, 1000, 300, 4, 2, 128, false), 5, 0)), 20.f));
  cases.push_back(cap(sinks(tl(win(F(1, 900, 300, 2, 2, 128, false), 9, 0))), 7.f));
  {
    Shape s = cap(sinks(F(1, 600, 777, 4, 2, 128, true)), 50.f);
    s.scale = 1.f;
    s.in = DType::f16;
    s.out = DType::f32;
    cases.push_back(s);
  }
  {
    Shape s = cap(sinks(F(1, 640, 700, 4, 2, 128, true), 6.f, 12.f), 50.f);  // bf16: fixed max applies
    s.scale = 1.f;
    cases.push_back(s);
  }
  cases.push_back(cap(sinks(F(1, 300, 500, 2, 2, 128, false), 30.f, 80.f), 50.f));  // sink above every logit
  cases.push_back(cap(F(1, 400, 500, 2, 2, 128, false), 60.f));  // cap > 52: fixed falls back
  cases.push_back(cap(F(1, 500, 600, 6, 2, 64, true), 8.f));
  cases.push_back(cap(sinks(F(1, 333, 555, 4, 1, 256, false)), 10.f));
  // hdim 64 non-causal with sinks, cap 30 (the bench's shape kind): odd lengths, two batches.
  cases.push_back(cap(sinks(F(2, 449, 647, 4, 2, 64, false)), 30.f));
  // The hdim-64 cases again on the ragged kernel's two-warpgroup tile (seqused_k = every
  // sequence's full length: the same keys), where the fixed max compiles at hdim 64.
  const size_t n_plain = cases.size();
  for (size_t i = 0; i < n_plain; ++i)
    if (cases[i].dim == 64) {
      Shape s = cases[i];
      s.used_k.assign(size_t(s.batch), int32_t(s.seq_k));
      cases.push_back(s);
    }
  for (bool fixed : {true, false}) {
    for (size_t i = 0; i < cases.size(); ++i) {
      Shape s = cases[i];
      s.ov.softcap_fixed = fixed ? detail::Force::rule : detail::Force::off;
      s.seed += 77;
      s.rows_per_head = 24;
      CheckResult r = run_case(s, atol_for(s));
      const char* mode = fixed ? "fixed" : "fused";
      printf("%-7s %-48s err %.2e naive %.2e lse %.2e (naive %.2e)\n", mode, s.name().c_str(), r.max_err,
             r.naive_err, r.lse_err, r.lse_naive);
      EXPECT_TRUE(r.failure.empty()) << mode << " " << s.name() << ": " << r.failure;
    }
  }
}

// What the kernel cannot serve yet is refused by name, and nothing is written.
TEST(GpuForwardUnsupported, RefusedWithNamedStatus) {
  if (!have_gpu()) GTEST_SKIP() << "no sm_90 device";
  void *q, *o;
  ASSERT_EQ(cudaMalloc(&q, 1 << 20), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&o, 1 << 20), cudaSuccess);
  ASSERT_EQ(cudaMemset(o, 0xFF, 1 << 20), cudaSuccess);
  Device g{DeviceKind::cuda, 0};
  auto base = [&](int64_t d) {
    Args a;
    a.q = make_tensor(q, DType::bf16, {1, 16, 2, d}, g);
    a.k = make_tensor(q, DType::bf16, {1, 16, 2, d}, g);
    a.v = make_tensor(q, DType::bf16, {1, 16, 2, d}, g);
    a.out = make_tensor(o, DType::bf16, {1, 16, 2, d}, g);
    a.backend = Backend::cuda;
    return a;
  };
  Args a = base(100);  // not a multiple of 8 (TMA rows of 16-byte multiples)
  Status st = forward(a);
  EXPECT_EQ(st.code(), Status::Code::not_supported) << st.message();
  EXPECT_NE(st.message().find("head dims"), std::string::npos) << st.message();
  a = base(128);  // v not a multiple of 8
  a.v = make_tensor(q, DType::bf16, {1, 16, 2, 36}, g);
  a.out = make_tensor(o, DType::bf16, {1, 16, 2, 36}, g);
  st = forward(a);
  EXPECT_EQ(st.code(), Status::Code::not_supported) << st.message();
  EXPECT_NE(st.message().find("head dims"), std::string::npos) << st.message();
  a = base(128);
  a.q.data = static_cast<char*>(q) + 2;  // misaligned for TMA
  st = forward(a);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("q"), std::string::npos) << st.message();
  cudaDeviceSynchronize();
  std::vector<uint16_t> h(1 << 19);
  cudaMemcpy(h.data(), o, 1 << 20, cudaMemcpyDeviceToHost);
  int64_t touched = 0;
  for (uint16_t x : h) touched += x != 0xFFFF;
  EXPECT_EQ(touched, 0) << "a refused call wrote to out";
  cudaFree(q);
  cudaFree(o);
}

// seq_k == 0: every row has no visible key -> out 0, LSE -inf.
TEST(GpuForwardEmpty, NoKeys) {
  if (!have_gpu()) GTEST_SKIP() << "no sm_90 device";
  void *q, *o, *l;
  ASSERT_EQ(cudaMalloc(&q, 1 << 16), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&o, 1 << 16), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&l, 1 << 12), cudaSuccess);
  cudaMemset(o, 0xFF, 1 << 16);
  Device g{DeviceKind::cuda, 0};
  Args a;
  a.q = make_tensor(q, DType::bf16, {1, 5, 2, 64}, g);
  a.k = make_tensor(q, DType::bf16, {1, 0, 2, 64}, g);
  a.v = make_tensor(q, DType::bf16, {1, 0, 2, 64}, g);
  a.out = make_tensor(o, DType::bf16, {1, 5, 2, 64}, g);
  a.lse = make_tensor(l, DType::f32, {1, 2, 5}, g);
  a.backend = Backend::cuda;
  Status st = forward(a);
  ASSERT_TRUE(st.ok()) << st.message();
  std::vector<uint16_t> h(5 * 2 * 64);
  std::vector<float> hl(10);
  cudaMemcpy(h.data(), o, h.size() * 2, cudaMemcpyDeviceToHost);
  cudaMemcpy(hl.data(), l, 40, cudaMemcpyDeviceToHost);
  for (uint16_t x : h) EXPECT_EQ(x, 0);
  for (float x : hl) EXPECT_TRUE(std::isinf(x) && x < 0);
  // With sinks, a row without keys has LSE = its head's sink (out still 0).
  const float hs[2] = {0.75f, -2.5f};
  void* sk;
  ASSERT_EQ(cudaMalloc(&sk, 8), cudaSuccess);
  cudaMemcpy(sk, hs, 8, cudaMemcpyHostToDevice);
  a.sinks = make_tensor(sk, DType::f32, {2}, g);
  cudaMemset(o, 0xFF, 1 << 16);
  cudaMemset(l, 0xFF, 1 << 12);
  st = forward(a);
  ASSERT_TRUE(st.ok()) << st.message();
  cudaMemcpy(h.data(), o, h.size() * 2, cudaMemcpyDeviceToHost);
  cudaMemcpy(hl.data(), l, 40, cudaMemcpyDeviceToHost);
  for (uint16_t x : h) EXPECT_EQ(x, 0);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(hl[size_t(i)], hs[i / 5]) << "lse " << i;
  cudaFree(sk);
  cudaFree(q);
  cudaFree(o);
  cudaFree(l);
}

// Issue 16: every key sequence empty (FA3's max_seqlen_k = 0), said with k / v of no rows,
// whose pointer may be anything (the Python binding passes a one-byte sentinel for an empty
// tensor: never 16-byte aligned; here a misaligned device address, never read). The call
// must still reach the fill: out 0 and LSE -inf on the used rows, and with seqused_q the rows
// past it keep their poison. Ragged q (device cu_seqlens) and dense q.
TEST(GpuForwardEmpty, NoKeyRowsWithSeqUsedQ) {
  if (!have_gpu()) GTEST_SKIP() << "no sm_90 device";
  constexpr int64_t H = 2, D = 64, kTotal = 13, kSeq = 7;
  const std::vector<int32_t> cu_q = {0, 4, 6, 13}, cu_k = {0, 0, 0, 0}, used = {3, 0, 7};
  void *q, *o, *l;
  int32_t* meta;
  ASSERT_EQ(cudaMalloc(&q, 1 << 16), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&o, 1 << 16), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&l, 1 << 12), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&meta, 256), cudaSuccess);
  cudaMemcpy(meta, cu_q.data(), 16, cudaMemcpyHostToDevice);
  cudaMemcpy(meta + 16, cu_k.data(), 16, cudaMemcpyHostToDevice);
  cudaMemcpy(meta + 32, used.data(), 12, cudaMemcpyHostToDevice);
  const Device g{DeviceKind::cuda, 0};
  void* odd = static_cast<char*>(q) + 1;
  for (bool ragged : {true, false}) {
    for (bool with_used : {true, false}) {
      Args a;
      if (ragged) {
        a.q = make_tensor(q, DType::bf16, {kTotal, H, D}, g);
        a.k = make_tensor(odd, DType::bf16, {0, H, D}, g);
        a.v = make_tensor(odd, DType::bf16, {0, H, D}, g);
        a.out = make_tensor(o, DType::bf16, {kTotal, H, D}, g);
        a.lse = make_tensor(l, DType::f32, {H, kTotal}, g);
        a.cu_seqlens_q = make_tensor(meta, DType::i32, {4}, g);
        a.cu_seqlens_k = make_tensor(meta + 16, DType::i32, {4}, g);
        a.max_seqlen_q = kSeq;
        a.max_seqlen_k = 0;
      } else {
        a.q = make_tensor(q, DType::bf16, {3, kSeq, H, D}, g);
        a.k = make_tensor(odd, DType::bf16, {3, 0, H, D}, g);
        a.v = make_tensor(odd, DType::bf16, {3, 0, H, D}, g);
        a.out = make_tensor(o, DType::bf16, {3, kSeq, H, D}, g);
        a.lse = make_tensor(l, DType::f32, {3, H, kSeq}, g);
      }
      if (with_used) a.seqused_q = make_tensor(meta + 32, DType::i32, {3}, g);
      a.mask.causal = true;
      a.backend = Backend::cuda;
      cudaMemset(o, 0xFF, 1 << 16);
      cudaMemset(l, 0xFF, 1 << 12);
      const Status st = forward(a);
      ASSERT_TRUE(st.ok()) << "ragged " << ragged << ": " << st.message();
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const int64_t rows = ragged ? kTotal : 3 * kSeq;
      std::vector<uint16_t> ho(size_t(rows * H * D));
      std::vector<float> hl(size_t(rows * H));
      cudaMemcpy(ho.data(), o, ho.size() * 2, cudaMemcpyDeviceToHost);
      cudaMemcpy(hl.data(), l, hl.size() * 4, cudaMemcpyDeviceToHost);
      // Row r (ragged: token r; dense: b = r / kSeq, i = r % kSeq) is used when i < used[b].
      auto row_used = [&](int64_t r) {
        int64_t b = r / kSeq, i = r % kSeq;
        if (ragged) {
          b = 0;
          while (r >= cu_q[size_t(b + 1)]) ++b;
          i = r - cu_q[size_t(b)];
        }
        return !with_used || i < used[size_t(b)];
      };
      int64_t bad_out = 0, bad_lse = 0;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t h = 0; h < H; ++h) {
          const bool u = row_used(r);
          for (int64_t d = 0; d < D; ++d) bad_out += ho[size_t((r * H + h) * D + d)] != (u ? 0 : 0xFFFF);
          // LSE: ragged (heads, total); dense (batch, heads, seq).
          const float x = ragged ? hl[size_t(h * kTotal + r)] : hl[size_t(((r / kSeq) * H + h) * kSeq + r % kSeq)];
          bad_lse += u ? !(std::isinf(x) && x < 0) : !std::isnan(x);
        }
      EXPECT_EQ(bad_out, 0) << "ragged " << ragged << " seqused_q " << with_used;
      EXPECT_EQ(bad_lse, 0) << "ragged " << ragged << " seqused_q " << with_used;
    }
  }
  cudaFree(q);
  cudaFree(o);
  cudaFree(l);
  cudaFree(meta);
}

}  // namespace
}  // namespace longattn::gputest

namespace longattn {
namespace {

// Distinct, never dereferenced device addresses for the host-only plan tests (plan_forward
// and fill_params read shapes and strides, never the data).
void* fake(int i) { return reinterpret_cast<void*>((uintptr_t(1) << 40) * uintptr_t(i + 1)); }

// build_problem and plan_forward as forward_sm90.cpp runs them, on an H100-like device (132
// SMs unless `sms`, 50 MB L2). Call through ASSERT_NO_FATAL_FAILURE.
void plan_on_host(const Args& a, const detail::Overrides& ov, detail::Problem* p, cuda::ForwardPlan* plan,
                  int sms = 132) {
  const Status st = detail::build_problem(a, p);
  ASSERT_TRUE(st.ok()) << st.message();
  const Status ps = cuda::plan_forward(a, *p, ov, sms, int64_t(50) << 20, plan);
  ASSERT_TRUE(ps.ok()) << ps.message();
}

// plan.cpp's tile-list rule for varying lengths, on the host (no GPU): a ragged call takes the
// device-built list only past one wave of padded tiles (132 SMs here); within one, the padded
// grid (no pre-kernel, no allocation).
TEST(GpuPlanRule, RaggedTileListOnlyPastOneWave) {
  struct C {
    int64_t batch, max_seq, heads;
    bool list;
  };
  // Padded tiles = batch x ceil(max_seq / 128) x heads.
  const C cases[] = {{1, 4, 1, false}, {4, 1000, 4, false}, {2, 4096, 2, false}, {3, 4096, 2, true},
                     {8, 1000, 16, true}};
  const Device gpu{DeviceKind::cuda, 0};
  for (const C& c : cases) {
    const int64_t total = c.batch * c.max_seq;
    Args a;
    a.q = make_tensor(fake(0), DType::bf16, {total, c.heads, 128}, gpu);
    a.k = make_tensor(fake(1), DType::bf16, {total, c.heads, 128}, gpu);
    a.v = make_tensor(fake(2), DType::bf16, {total, c.heads, 128}, gpu);
    a.out = make_tensor(fake(3), DType::bf16, {total, c.heads, 128}, gpu);
    a.cu_seqlens_q = make_tensor(fake(4), DType::i32, {c.batch + 1}, gpu);
    a.cu_seqlens_k = make_tensor(fake(5), DType::i32, {c.batch + 1}, gpu);
    a.max_seqlen_q = a.max_seqlen_k = c.max_seq;
    a.mask.causal = true;
    detail::Problem p;
    cuda::ForwardPlan plan;
    ASSERT_NO_FATAL_FAILURE(plan_on_host(a, {}, &p, &plan));
    EXPECT_EQ(plan.kernel, cuda::sm90::Kernel::ragged);
    EXPECT_EQ(plan.tile_list, c.list) << "b" << c.batch << " max_seq " << c.max_seq << " h" << c.heads;
  }
}

// Args::sm_margin: the SMs a call's kernels may fill, at least one.
TEST(GpuPlanRule, SmMarginLeavesAtLeastOneSm) {
  EXPECT_EQ(cuda::usable_sms(132, 0), 132);
  EXPECT_EQ(cuda::usable_sms(132, 8), 124);
  EXPECT_EQ(cuda::usable_sms(132, 131), 1);
  EXPECT_EQ(cuda::usable_sms(132, 132), 1);
  EXPECT_EQ(cuda::usable_sms(132, 1 << 30), 1);
}

// plan.cpp's dynamic-counter rule on a shared GPU (Args::sm_margin > 0): causal calls from
// 128 key blocks on take the counter; without a margin or on shorter keys, the static snake.
TEST(GpuPlanRule, SmMarginLongTilesTakeTheCounter) {
  const Device gpu{DeviceKind::cuda, 0};
  struct C {
    int64_t seq_q, seq_k;
    int margin;
    bool dynamic;
  };
  for (const C& c : {C{32768, 32768, 8, true}, C{32768, 32768, 0, false}, C{8192, 8192, 8, false},
                     C{8192, 131072, 16, true}, C{16384, 16384, 100000, true}}) {
    Args a;
    a.q = make_tensor(fake(0), DType::bf16, {1, c.seq_q, 16, 128}, gpu);
    a.k = make_tensor(fake(1), DType::bf16, {1, c.seq_k, 4, 128}, gpu);
    a.v = make_tensor(fake(2), DType::bf16, {1, c.seq_k, 4, 128}, gpu);
    a.out = make_tensor(fake(3), DType::bf16, {1, c.seq_q, 16, 128}, gpu);
    a.mask.causal = true;
    a.sm_margin = c.margin;
    detail::Problem p;
    cuda::ForwardPlan plan;
    ASSERT_NO_FATAL_FAILURE(plan_on_host(a, {}, &p, &plan, cuda::usable_sms(132, c.margin)));
    EXPECT_EQ(plan.kernel, cuda::sm90::Kernel::dense);
    EXPECT_EQ(plan.dynamic, c.dynamic) << c.seq_q << " x " << c.seq_k << " sm_margin " << c.margin;
  }
}

// plan.cpp's dynamic-counter rule for masks whose tile cost is not the causal ramp: causal
// sliding windows and chunks take the counter; both-sided windows where the static deal is
// unbalanced in the scheduler's model (schedule_rule.h deal_unbalanced: the rows measured
// faster with the counter, batch 16 x 1k, 1 x 8k, 1 x 16k) and not where it is balanced
// (the rows measured slower: 8 x 2k, 4 x 4k, 16 x 4k x 32 heads) or within two rounds of
// tiles, and one-sided windows without a causal mask keep the deal; plain calls of the same
// length keep the static order, causal or not (a non-causal call past dynamic_worth's length
// too: its tiles cost the same).
TEST(GpuPlanRule, WindowsAndChunksTakeTheCounter) {
  const Device gpu{DeviceKind::cuda, 0};
  struct C {
    int64_t seq;
    bool causal;
    int64_t left, right, chunk;
    bool dynamic;
    int64_t batch = 1, heads = 16;
  };
  for (const C& c : {C{65536, true, 4096, -1, 0, true}, C{32768, true, 1024, -1, 0, true},
                     C{16384, false, 2048, 2048, 0, true}, C{8192, false, 1024, 1024, 0, true},
                     C{1024, false, 256, 256, 0, true, 16}, C{2048, false, 256, 256, 0, false, 8},
                     C{4096, false, 1024, 1024, 0, false, 4}, C{4096, false, 128, 128, 0, false, 16, 32},
                     C{1024, false, 256, 256, 0, false},  // 128 tiles: within two rounds
                     C{16384, false, 2048, -1, 0, false},  // one-sided, not causal: not measured
                     C{16384, false, -1, 2048, 0, false}, C{4096, false, 1024, -1, 0, false, 4},
                     C{8192, true, -1, -1, 2048, true}, C{8192, true, -1, -1, 0, false},
                     C{8192, false, -1, -1, 0, false}, C{262144, false, -1, -1, 0, false},
                     C{262144, true, -1, -1, 0, true}}) {
    Args a;
    a.q = make_tensor(fake(0), DType::bf16, {c.batch, c.seq, c.heads, 128}, gpu);
    a.k = make_tensor(fake(1), DType::bf16, {c.batch, c.seq, c.heads, 128}, gpu);
    a.v = make_tensor(fake(2), DType::bf16, {c.batch, c.seq, c.heads, 128}, gpu);
    a.out = make_tensor(fake(3), DType::bf16, {c.batch, c.seq, c.heads, 128}, gpu);
    a.mask.causal = c.causal;
    a.mask.window_left = c.left;
    a.mask.window_right = c.right;
    a.mask.chunk_size = c.chunk;
    detail::Problem p;
    cuda::ForwardPlan plan;
    ASSERT_NO_FATAL_FAILURE(plan_on_host(a, {}, &p, &plan));
    const bool masked = c.left >= 0 || c.right >= 0 || c.chunk > 0;
    EXPECT_EQ(plan.kernel, masked ? cuda::sm90::Kernel::feature : cuda::sm90::Kernel::dense);
    EXPECT_EQ(plan.dynamic, c.dynamic) << c.seq << " window " << c.left << " / " << c.right << " chunk " << c.chunk;
  }
}

// plan.cpp: windows (causal or not) and chunks on a kernel without the counter (the
// three-warpgroup hdim-64 tile, the fp8 kinds) run one snake over every (batch, head) pair
// where the running tiles share pairs or their windows' K / V stay within twice the L2
// (host tests plan for 50 MB): 8 x 8k x 32 heads, window 4096 (132 x (4096 + 192) keys x 256
// bytes = 145 MB) keeps the sections, 16 x 4k x 32 heads, window (1024, 1024) (76 MB) takes the
// one snake; fp8 takes it past the bound too; the same calls at hdim 128 bf16 (the counter
// compiled) and plain causal calls keep the L2 rule's sections.
TEST(GpuPlanRule, WindowsAndChunksWithoutTheCounterRunOneSnake) {
  const Device gpu{DeviceKind::cuda, 0};
  struct C {
    int64_t batch, seq, heads, dim, left, chunk;
    bool one_snake;
    bool fp8 = false;
    bool causal = true;
  };
  for (const C& c : {C{16, 1024, 16, 64, -1, 256, true}, C{8, 2048, 16, 64, -1, 512, true},
                     C{1, 32768, 16, 64, 1024, 0, true}, C{16, 4096, 32, 64, 1024, 0, true},
                     C{8, 8192, 32, 64, 4096, 0, false}, C{8, 2048, 16, 64, -1, 0, false},
                     C{8, 2048, 16, 128, -1, 512, false}, C{2, 32768, 16, 128, 1024, 0, false},
                     C{8, 2048, 16, 128, -1, 512, true, true}, C{2, 32768, 16, 128, 1024, 0, true, true},
                     C{4, 4096, 16, 128, 1024, 0, true, true},
                     C{16, 4096, 32, 128, 1024, 0, true, true}, C{8, 8192, 32, 128, 4096, 0, true, true},
                     C{16, 1024, 16, 128, 256, 0, true, true, false}, C{4, 4096, 16, 64, 1024, 0, true, false, false},
                     C{16, 4096, 32, 64, 1024, 0, true, false, false}, C{8, 8192, 32, 64, 2048, 0, false, false, false},
                     C{16, 4096, 32, 128, 1024, 0, false, false, false},
                     C{8, 2048, 16, 128, -1, 0, false, true},
                     // pairs <= grid with windows past twice the L2 (16 x (32768 + 192) keys x
                     // 256 bytes = 135 MB): the one snake; a window that hides no key (fp8,
                     // 4096 keys) and a non-causal fp8 window past the bound keep the sections.
                     C{1, 65536, 16, 64, 32768, 0, true}, C{16, 4096, 32, 128, 4096, 0, false, true},
                     C{8, 8192, 32, 128, 2048, 0, false, true, false}}) {
    const DType t = c.fp8 ? DType::e4m3 : DType::bf16;
    Args a;
    a.q = make_tensor(fake(0), t, {c.batch, c.seq, c.heads, c.dim}, gpu);
    a.k = make_tensor(fake(1), t, {c.batch, c.seq, c.heads, c.dim}, gpu);
    a.v = make_tensor(fake(2), t, {c.batch, c.seq, c.heads, c.dim}, gpu);
    a.out = make_tensor(fake(3), DType::bf16, {c.batch, c.seq, c.heads, c.dim}, gpu);
    if (c.fp8) {
      a.q_descale = make_tensor(fake(4), DType::f32, {c.batch, c.heads}, gpu);
      a.k_descale = make_tensor(fake(5), DType::f32, {c.batch, c.heads}, gpu);
      a.v_descale = make_tensor(fake(6), DType::f32, {c.batch, c.heads}, gpu);
    }
    a.mask.causal = c.causal;
    a.mask.window_left = c.left;
    a.mask.window_right = c.causal || c.left < 0 ? -1 : c.left;
    a.mask.chunk_size = c.chunk;
    detail::Problem p;
    cuda::ForwardPlan plan;
    ASSERT_NO_FATAL_FAILURE(plan_on_host(a, {}, &p, &plan));
    const std::string what = std::to_string(c.batch) + " x " + std::to_string(c.seq) + " x " +
                             std::to_string(c.heads) + " dim " + std::to_string(c.dim) + " window " +
                             std::to_string(c.left) + " chunk " + std::to_string(c.chunk) +
                             (c.fp8 ? " fp8" : "");
    if (c.one_snake) {
      EXPECT_EQ(plan.section_bh, c.batch * c.heads) << what;
    } else {
      EXPECT_LT(plan.section_bh, c.batch * c.heads) << what;
    }
  }
}

// plan.cpp's q-tile anchor (plan.h q_shift), on the host: causal calls on the 192-row dense and
// feature tiles (hdim 64) whose seq_q is not a multiple of 192 end their q-tiles at the last
// row; full masks, 128-row tiles, exact multiples, the ragged kind, windows, chunks and
// split-KV keep q_shift 0. The kernel's parameters count the virtual rows (fill_params), and
// shifted calls store O directly (encode_out_map).
TEST(GpuPlanRule, CausalQTilesEndAtTheLastRow) {
  struct C {
    int64_t batch, seq, heads, dim;
    bool causal, ragged;
    int64_t shift;
    int64_t splits = -1;  // Overrides::kv_splits (-1: the rule)
    float softcap = 0.f;
    int64_t chunk = 0;
    int64_t window = -1;  // left, causal
  };
  const C cases[] = {
      {16, 1024, 16, 64, true, false, 128},  // 1024 = 5 x 192 + 64
      {2, 8192, 16, 64, true, false, 64},    // 8192 = 42 x 192 + 128
      {4, 4608, 16, 64, true, false, 0},     // 24 x 192
      {16, 1024, 16, 64, false, false, 0},   // full mask
      {4, 1750, 16, 128, true, false, 0},    // 128-row tile
      {4, 1000, 4, 64, true, true, 0},       // ragged kind
      {4, 1000, 4, 64, true, false, 152, -1, 30.f},    // feature kind (softcap)
      {2, 700, 6, 64, true, false, 0, -1, 0.f, 77},    // feature kind, chunks: a cost sawtooth
      {2, 700, 6, 64, true, false, 0, -1, 0.f, 0, 100},  // feature kind, sliding window: flat tile cost
      {2, 700, 6, 64, true, false, 68, -1, 5.f},         // feature kind (softcap 5)
      {2, 100, 4, 64, true, false, 92},      // one q-tile
      {1, 1000, 1, 64, true, false, 0, 4},   // split-KV (forced)
  };
  const Device gpu{DeviceKind::cuda, 0};
  for (const C& c : cases) {
    Args a;
    if (c.ragged) {
      const int64_t total = c.batch * c.seq;
      a.q = make_tensor(fake(0), DType::bf16, {total, c.heads, c.dim}, gpu);
      a.k = make_tensor(fake(1), DType::bf16, {total, c.heads, c.dim}, gpu);
      a.v = make_tensor(fake(2), DType::bf16, {total, c.heads, c.dim}, gpu);
      a.out = make_tensor(fake(3), DType::bf16, {total, c.heads, c.dim}, gpu);
      a.cu_seqlens_q = make_tensor(fake(4), DType::i32, {c.batch + 1}, gpu);
      a.cu_seqlens_k = make_tensor(fake(5), DType::i32, {c.batch + 1}, gpu);
      a.max_seqlen_q = a.max_seqlen_k = c.seq;
    } else {
      a.q = make_tensor(fake(0), DType::bf16, {c.batch, c.seq, c.heads, c.dim}, gpu);
      a.k = make_tensor(fake(1), DType::bf16, {c.batch, c.seq, c.heads, c.dim}, gpu);
      a.v = make_tensor(fake(2), DType::bf16, {c.batch, c.seq, c.heads, c.dim}, gpu);
      a.out = make_tensor(fake(3), DType::bf16, {c.batch, c.seq, c.heads, c.dim}, gpu);
    }
    a.mask.causal = c.causal;
    a.softcap = c.softcap;
    a.mask.chunk_size = c.chunk;
    a.mask.window_left = c.window;
    detail::Problem p;
    cuda::ForwardPlan plan;
    detail::Overrides ov;
    ov.kv_splits = c.splits;
    ASSERT_NO_FATAL_FAILURE(plan_on_host(a, ov, &p, &plan));
    EXPECT_EQ(plan.kv_splits > 1, c.splits > 1);
    const std::string what = std::to_string(c.batch) + " x " + std::to_string(c.seq) + " hdim " +
                             std::to_string(c.dim) + (c.causal ? " causal" : " full");
    EXPECT_EQ(plan.q_shift, c.shift) << what;
    if (plan.q_shift == 0) continue;
    const bool features = c.softcap > 0.f;
    EXPECT_EQ(plan.kernel, features ? cuda::sm90::Kernel::feature : cuda::sm90::Kernel::dense) << what;
    cuda::sm90::FwdParams fp{};
    cuda::fill_params(a, p, plan, &fp);
    EXPECT_EQ(fp.q_shift, c.shift) << what;
    EXPECT_EQ(fp.seq_q, c.seq + c.shift) << what;
    EXPECT_EQ(fp.seq_q % plan.tile.block_m, 0) << what;
    EXPECT_EQ(fp.causal_offset, -c.shift) << what;  // bottom-right, seq_q = seq_k
    cuda::sm90::LaunchArgs la{};
    EXPECT_FALSE(cuda::encode_out_map(a, p, plan, &la)) << what;
  }
}

// plan.cpp's tile-order rules for the hdim-256 kinds, on the host (no GPU, no memory touched):
// causal calls on the hdim-256 dense kinds (bf16 / f16, e4m3) take the section list (built at
// launch where the L2 rule cuts sections), short ones (at most 16 q-blocks) included, not the
// ragged kind's tile list; non-causal, hdim 128 and context-parallel calls take neither.
TEST(GpuPlanRule, Hdim256CausalTileOrder) {
  enum Order { snake, ragged_list, section_list };
  struct C {
    int64_t batch, seq, heads, dim;
    bool causal;
    DType dt;
    Order order;
    int cp_world = 0;
  };
  const C cases[] = {
      {8, 2048, 16, 256, true, DType::bf16, section_list},  {16, 1024, 16, 256, true, DType::f16, section_list},
      {4, 4096, 16, 256, true, DType::bf16, section_list},  {4, 4096, 32, 256, true, DType::f16, section_list},
      {2, 8192, 16, 256, true, DType::bf16, section_list},  {1, 8192, 16, 256, true, DType::bf16, section_list},
      {4, 4096, 16, 256, true, DType::e4m3, section_list},  {8, 2048, 16, 256, true, DType::e4m3, section_list},
      {4, 4096, 16, 256, false, DType::bf16, snake},        {4, 4096, 16, 128, true, DType::bf16, snake},
      {4, 384, 12, 256, true, DType::bf16, section_list},   // 48 pairs within the L2 budget: the launch keeps the snake
      {1, 5120, 16, 256, true, DType::bf16, snake, 2},      // context parallelism (c = 2560): the snake
  };
  const Device gpu{DeviceKind::cuda, 0};
  // Distinct, never dereferenced addresses (the checks refuse overlapping outputs).
  for (const C& c : cases) {
    const int64_t world = c.cp_world > 0 ? c.cp_world : 1;
    Args a;
    a.q = make_tensor(fake(0), c.dt, {c.batch, c.seq, c.heads, c.dim}, gpu);
    a.k = make_tensor(fake(1), c.dt, {world * c.batch, c.seq, c.heads, c.dim}, gpu);
    a.v = make_tensor(fake(2), c.dt, {world * c.batch, c.seq, c.heads, c.dim}, gpu);
    a.out = make_tensor(fake(3), c.dt == DType::e4m3 ? DType::bf16 : c.dt, {c.batch, c.seq, c.heads, c.dim}, gpu);
    if (c.dt == DType::e4m3) {
      a.q_descale = make_tensor(fake(4), DType::f32, {c.batch, c.heads}, gpu);
      a.k_descale = make_tensor(fake(5), DType::f32, {c.batch, c.heads}, gpu);
      a.v_descale = make_tensor(fake(6), DType::f32, {c.batch, c.heads}, gpu);
    }
    a.mask.causal = c.causal;
    if (c.cp_world > 0) {
      a.cp_world = c.cp_world;
      a.cp_rank = 0;
    }
    const std::string what = "b" + std::to_string(c.batch) + " s" + std::to_string(c.seq) + " h" +
                             std::to_string(c.heads) + " d" + std::to_string(c.dim) + (c.causal ? " causal" : "") +
                             " dtype " + std::to_string(int(c.dt)) + " cp " + std::to_string(c.cp_world);
    detail::Problem p;
    cuda::ForwardPlan plan;
    ASSERT_NO_FATAL_FAILURE(plan_on_host(a, {}, &p, &plan)) << what;
    const Order got = plan.kernel == cuda::sm90::Kernel::ragged && plan.tile_list ? ragged_list
                      : plan.section_list                                          ? section_list
                                                                                   : snake;
    EXPECT_EQ(got, c.order) << what;
    EXPECT_EQ(plan.kernel, c.dt == DType::e4m3 ? cuda::sm90::Kernel::dense_vt : cuda::sm90::Kernel::dense) << what;
  }
}

// chunk_batch.h's rule, on the host: the chunk's rows where seq_q = seq_k is a multiple of it
// (a chunk past the sequence: the sequence), dense tensors (fp8 too) whose batches follow each
// other (or one batch, any batch stride), no window; else 0.
TEST(GpuPlanRule, ChunkBatchRows) {
  struct C {
    int64_t batch, seq_q, seq_k, chunk;
    DType dt;
    int64_t window_left = -1;
    int64_t k_batch_stride_factor = 1;  // k's batch stride = factor x seq_k x its seq stride
    int64_t rows;
  };
  const C cases[] = {
      {2, 1024, 1024, 256, DType::bf16, -1, 1, 256}, {2, 1024, 1024, 4096, DType::f16, -1, 1, 1024},
      {2, 1000, 1000, 256, DType::bf16, -1, 1, 0},   {2, 512, 1024, 256, DType::bf16, -1, 1, 0},
      {2, 1024, 1024, 256, DType::bf16, 100, 1, 0},  {2, 1024, 1024, 256, DType::e4m3, -1, 1, 256},
      {2, 1024, 1024, 256, DType::bf16, -1, 2, 0},   {1, 1024, 1024, 256, DType::bf16, -1, 2, 256},
      {2, 1024, 1024, 0, DType::bf16, -1, 1, 0},
  };
  const Device gpu{DeviceKind::cuda, 0};
  for (const C& c : cases) {
    const int64_t h = 4, d = 128;
    Args a;
    a.q = make_tensor(fake(0), c.dt, {c.batch, c.seq_q, h, d}, gpu);
    a.k = make_tensor(fake(1), c.dt, {c.batch, c.seq_k, h, d}, gpu);
    a.k.stride[0] *= c.k_batch_stride_factor;
    a.v = make_tensor(fake(2), c.dt, {c.batch, c.seq_k, h, d}, gpu);
    a.out = make_tensor(fake(3), c.dt == DType::e4m3 ? DType::bf16 : c.dt, {c.batch, c.seq_q, h, d}, gpu);
    a.lse = make_tensor(fake(7), DType::f32, {c.batch, h, c.seq_q}, gpu);
    if (c.dt == DType::e4m3) {
      a.q_descale = make_tensor(fake(4), DType::f32, {c.batch, h}, gpu);
      a.k_descale = make_tensor(fake(5), DType::f32, {c.batch, h}, gpu);
      a.v_descale = make_tensor(fake(6), DType::f32, {c.batch, h}, gpu);
    }
    a.mask.causal = true;
    a.mask.chunk_size = c.chunk;
    a.mask.window_left = c.window_left;
    detail::Problem p;
    const Status st = detail::build_problem(a, &p);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(cuda::chunk_batch_rows(a, p), c.rows)
        << "b" << c.batch << " sq" << c.seq_q << " sk" << c.seq_k << " chunk " << c.chunk << " dtype " << int(c.dt)
        << " window " << c.window_left << " k stride x" << c.k_batch_stride_factor;
  }
}

// plan.cpp's kind for fp8 plain attention, on the host: at head dim 128 dense_vt (V transposed
// in global memory) where a row sees at least kFp8VtMinKeys keys on average over the rows that
// see any (causal: bottom-right seq_k - seq_q / 2 for seq_q <= seq_k, top-left about seq_q / 2;
// context parallelism W c), the dense kind below; Overrides::fp8_vt_global forces either; a
// window (a feature) takes the ragged kind; head dim 256 dense_vt whatever the length; the
// transpose's grid beyond CUDA's limits keeps the dense kind.
TEST(GpuPlanRule, Fp8DenseVtFromManyKeys) {
  using cuda::sm90::Kernel;
  struct C {
    int64_t batch, seq, heads_q, heads_kv;
    bool causal;
    detail::Force force;
    Kernel kernel;
    int cp_world = 0;
    int64_t window = -1;
    int64_t dim = 128;
    int64_t seq_k = 0;  // 0: seq
    bool top_left = false;
  };
  const int64_t r = cuda::sm90::kFp8VtMinKeys;
  const detail::Force rule = detail::Force::rule;
  const C cases[] = {
      {16, r / 4, 16, 16, false, rule, Kernel::dense},
      {4, r, 16, 16, false, rule, Kernel::dense_vt},
      {4, r - 16, 16, 16, false, rule, Kernel::dense},
      {4, r, 16, 16, true, rule, Kernel::dense},
      {2, 2 * r, 16, 16, true, rule, Kernel::dense_vt},
      {2, 2 * r - 32, 16, 16, true, rule, Kernel::dense},
      {8, r / 2, 32, 8, true, rule, Kernel::dense},  // GQA: the same rule
      {2, r / 4, 16, 16, false, detail::Force::on, Kernel::dense_vt},
      {1, 4 * r, 16, 16, true, detail::Force::off, Kernel::dense},
      {1, 2560, 16, 16, true, detail::Force::on, Kernel::dense_vt, 2},  // context parallelism (c = 1280)
      {1, 2560, 16, 16, true, rule, Kernel::dense, 2},                   // W c = 2560 keys per row
      {1, 2560, 16, 16, true, rule, Kernel::dense_vt, 4},                // W c = 5120
      {1, 2560, 16, 16, false, rule, Kernel::dense_vt, 2},               // full: 2 W c
      {4, 1024, 16, 16, true, rule, Kernel::dense_vt, 0, -1, 128, 4 * r},  // a KV prefix: 4r - 512
      {4, 1024, 16, 16, true, rule, Kernel::dense, 0, -1, 128, 4 * r, true},  // top-left: about 512
      {4, 4 * r, 16, 16, true, rule, Kernel::dense, 0, -1, 128, 2 * r - 64},  // rows past the keys: r - 32
      {4, 4 * r, 16, 16, true, rule, Kernel::dense_vt, 0, -1, 128, 2 * r, true},  // top-left: above r
      {1, 4 * r, 16, 16, true, rule, Kernel::ragged, 0, 512},
      {8, 1024, 16, 16, true, rule, Kernel::dense_vt, 0, -1, 256},
      {1, 2 * r, 65536, 65536, false, detail::Force::on, Kernel::dense},  // the transpose's grid: 65535 heads
  };
  const Device gpu{DeviceKind::cuda, 0};
  for (const C& c : cases) {
    const int64_t world = c.cp_world > 0 ? c.cp_world : 1;
    Args a;
    a.q = make_tensor(fake(0), DType::e4m3, {c.batch, c.seq, c.heads_q, c.dim}, gpu);
    const int64_t sk = c.seq_k > 0 ? c.seq_k : c.seq;
    a.k = make_tensor(fake(1), DType::e4m3, {world * c.batch, sk, c.heads_kv, c.dim}, gpu);
    a.v = make_tensor(fake(2), DType::e4m3, {world * c.batch, sk, c.heads_kv, c.dim}, gpu);
    a.out = make_tensor(fake(3), DType::bf16, {c.batch, c.seq, c.heads_q, c.dim}, gpu);
    a.q_descale = make_tensor(fake(4), DType::f32, {c.batch, c.heads_kv}, gpu);
    a.k_descale = make_tensor(fake(5), DType::f32, {c.batch, c.heads_kv}, gpu);
    a.v_descale = make_tensor(fake(6), DType::f32, {c.batch, c.heads_kv}, gpu);
    a.mask.causal = c.causal;
    a.mask.window_left = c.window;
    if (c.top_left) a.mask.align = CausalAlign::top_left;
    if (c.cp_world > 0) {
      a.cp_world = c.cp_world;
      a.cp_rank = 1;
    }
    const std::string what = "b" + std::to_string(c.batch) + " s" + std::to_string(c.seq) + "/" + std::to_string(sk) +
                             (c.top_left ? " top-left" : "") + " h" +
                             std::to_string(c.heads_q) + "/" + std::to_string(c.heads_kv) + " d" +
                             std::to_string(c.dim) + (c.causal ? " causal" : "") + " force " +
                             std::to_string(int(c.force)) + " cp " + std::to_string(c.cp_world) + " window " +
                             std::to_string(c.window);
    detail::Overrides ov;
    ov.fp8_vt_global = c.force;
    detail::Problem p;
    cuda::ForwardPlan plan;
    ASSERT_NO_FATAL_FAILURE(plan_on_host(a, ov, &p, &plan)) << what;
    EXPECT_EQ(int(plan.kernel), int(c.kernel)) << what;
  }
}

}  // namespace
}  // namespace longattn
