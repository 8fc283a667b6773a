// The CUDA forward kernel against the float64 reference under the oracle rule, on random
// shapes: odd and tail lengths, seq_q != seq_k, GQA/MQA, the three head dims, causal
// (bottom-right and top-left) and not, batch > 1, bf16/fp16 inputs, bf16/fp16/f32 outputs.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "gpu_case.h"

namespace longattn::gputest {
namespace {

bool have_gpu() { return cuda_available(); }

class GpuForward : public ::testing::TestWithParam<Shape> {};

TEST_P(GpuForward, MatchesReference) {
  if (!have_gpu()) GTEST_SKIP() << "no sm_90 device";
  const Shape& s = GetParam();
  CheckResult r = run_case(s);
  printf("%-48s err %.2e naive %.2e lse %.2e (naive %.2e) rows %lld\n", s.name().c_str(), r.max_err,
         r.naive_err, r.lse_err, r.lse_naive, (long long)r.rows_checked);
  EXPECT_TRUE(r.failure.empty()) << s.name() << ": " << r.failure;
}

Shape S(int64_t b, int64_t sq, int64_t sk, int64_t hq, int64_t hkv, int64_t d, bool causal,
        DType in = DType::bf16, DType out = DType::bf16) {
  Shape s;
  s.batch = b;
  s.seq_q = sq;
  s.seq_k = sk;
  s.heads_q = hq;
  s.heads_kv = hkv;
  s.dim = d;
  s.causal = causal;
  s.in = in;
  s.out = out;
  s.seed = uint64_t(b * 131 + sq * 7 + sk * 3 + hq + d + causal);
  // The float64 reference is single-threaded: check every row of short sequences and a
  // sample (edges, tile boundaries, random) of long ones.
  s.rows_per_head = sq * sk > 4096LL * 4096 ? 24 : 64;
  return s;
}

std::vector<Shape> core_cases() {
  std::vector<Shape> v;
  for (bool c : {false, true}) {
    v.push_back(S(1, 1, 1, 2, 2, 128, c));
    v.push_back(S(2, 17, 17, 4, 4, 128, c));
    v.push_back(S(1, 128, 128, 8, 1, 128, c));    // MQA
    v.push_back(S(3, 1000, 1000, 8, 2, 128, c));  // GQA 4, batch 3
    v.push_back(S(1, 4097, 4097, 8, 1, 128, c));  // GQA 8, tails
    v.push_back(S(1, 300, 1000, 4, 4, 128, c));   // seq_q < seq_k (KV prefix)
    v.push_back(S(1, 1000, 300, 4, 2, 128, c));   // seq_q > seq_k: causal rows with no key
    v.push_back(S(2, 777, 513, 4, 4, 64, c));
    v.push_back(S(1, 1000, 1000, 6, 2, 64, c));
    v.push_back(S(2, 333, 1111, 4, 1, 256, c));
    v.push_back(S(1, 1000, 1000, 4, 4, 256, c));
    v.push_back(S(2, 500, 700, 4, 2, 128, c, DType::f16, DType::f16));
    v.push_back(S(1, 600, 600, 4, 4, 64, c, DType::f16, DType::f32));
    v.push_back(S(1, 600, 650, 4, 4, 256, c, DType::bf16, DType::f32));
  }
  Shape tl = S(1, 300, 1000, 4, 4, 128, true);
  tl.top_left = true;
  v.push_back(tl);
  Shape hot = S(1, 2000, 2000, 2, 2, 128, false);  // large logits: peaked softmax, many max jumps
  hot.scale = 1.0f;
  hot.q_range = 2.f;
  v.push_back(hot);
  Shape nolse = S(1, 129, 257, 2, 2, 128, true);
  nolse.lse = false;
  v.push_back(nolse);
  // Strided layout: token rows padded by 8 elements (16 bytes: TMA-legal); also through
  // backend automatic, which must pick CUDA for device tensors.
  for (int64_t d : {64, 128, 256}) {
    Shape pad = S(2, 300, 333, 4, 2, d, d == 128);
    pad.pad = 8;
    pad.automatic = d == 64;
    v.push_back(pad);
  }
  return v;
}

std::vector<Shape> long_cases() {
  std::vector<Shape> v;
  for (bool c : {false, true}) {
    Shape s = S(1, 16384, 16384, 2, 1, 128, c);
    s.rows_per_head = 20;
    v.push_back(s);
  }
  return v;
}

std::string case_name(const ::testing::TestParamInfo<Shape>& i) { return i.param.name(); }

INSTANTIATE_TEST_SUITE_P(Core, GpuForward, ::testing::ValuesIn(core_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Long, GpuForward, ::testing::ValuesIn(long_cases()), case_name);

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

// Causal tiles are ordered in L2 sections of (batch, head) pairs; a section size that does
// not divide the pair count must still cover every tile exactly once (poisoned outputs).
TEST(GpuForwardSchedule, CausalSectionsCoverEveryTile) {
  if (!have_gpu()) GTEST_SKIP() << "no sm_90 device";
  for (const char* n : {"3", "1", "0"}) {
    setenv("LONGATTN_SECTIONS", n, 1);
    Shape s = S(3, 700, 900, 5, 1, 128, true);
    s.rows_per_head = 16;
    CheckResult r = run_case(s);
    EXPECT_TRUE(r.failure.empty()) << "sections " << n << ": " << r.failure;
  }
  unsetenv("LONGATTN_SECTIONS");
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
  Args a = base(96);
  Status st = forward(a);
  EXPECT_EQ(st.code(), Status::Code::not_supported) << st.message();
  a = base(128);
  a.softcap = 30.f;
  st = forward(a);
  EXPECT_EQ(st.code(), Status::Code::not_supported);
  EXPECT_NE(st.message().find("softcap"), std::string::npos) << st.message();
  a = base(128);
  a.mask.window_left = 4;
  st = forward(a);
  EXPECT_EQ(st.code(), Status::Code::not_supported) << st.message();
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
  cudaFree(q);
  cudaFree(o);
  cudaFree(l);
}

}  // namespace
}  // namespace longattn::gputest
