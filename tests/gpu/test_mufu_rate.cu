// Issue 5 (softcap): how many MUFU tanh and ex2 results an SM delivers per clock, alone and
// interleaved, against an FFMA chain. The softcapped softmax needs one of each per logit; the
// budget in docs/PERFORMANCE.md assumes 16 per clock per SM for both (tanh's rate is not in
// the CUDA guide). Prints the measured rates; checks the chains' values against double.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "cuda/ptx/sync.cuh"

namespace longattn::cuda {
namespace {

#define CK(x) ASSERT_EQ((x), cudaSuccess)

constexpr int kChains = 8;   // independent chains per thread (latency hidden by ILP + warps)
constexpr int kIters = 2048;

enum Op { kTanh = 0, kEx2 = 1, kBoth = 2, kFfma = 3 };

// x <- op(x) kIters times on kChains chains; one clock64 span per block (thread 0 writes it).
template <int kOp>
__global__ void mufu_rate_kernel(const float* x0, float* out, long long* cycles) {
  float x[kChains];
#pragma unroll
  for (int c = 0; c < kChains; ++c) x[c] = x0[c];
  __syncthreads();
  const long long t0 = clock64();
  for (int i = 0; i < kIters; ++i) {
#pragma unroll
    for (int c = 0; c < kChains; ++c) {
      if constexpr (kOp == kTanh) x[c] = ptx::tanh_approx(x[c]);
      if constexpr (kOp == kEx2) x[c] = ptx::exp2_approx(-x[c]);
      if constexpr (kOp == kBoth) x[c] = ptx::exp2_approx(-ptx::tanh_approx(x[c]));
      if constexpr (kOp == kFfma) x[c] = fmaf(x[c], 0.75f, 0.125f);
    }
  }
  __syncthreads();
  const long long t1 = clock64();
  if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
  if (blockIdx.x == 0 && threadIdx.x == 0)
    for (int c = 0; c < kChains; ++c) out[c] = x[c];
}

double host_chain(int op, double x) {
  for (int i = 0; i < kIters; ++i) {
    if (op == kTanh) x = std::tanh(x);
    if (op == kEx2) x = std::exp2(-x);
    if (op == kBoth) x = std::exp2(-std::tanh(x));
    if (op == kFfma) x = x * 0.75 + 0.125;
  }
  return x;
}

TEST(GpuPrimitives, MufuRates) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) GTEST_SKIP() << "no CUDA device";
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  std::vector<float> h0(kChains);
  for (int c = 0; c < kChains; ++c) h0[c] = 0.3f + 0.07f * c;
  float *x0, *out;
  long long* cyc;
  CK(cudaMalloc(&x0, kChains * 4));
  CK(cudaMalloc(&out, kChains * 4));
  CK(cudaMalloc(&cyc, sms * 8));
  CK(cudaMemcpy(x0, h0.data(), kChains * 4, cudaMemcpyHostToDevice));
  const char* names[] = {"tanh.approx.f32", "ex2.approx.ftz.f32", "ex2(-tanh) (2 ops)", "ffma"};
  for (int op = 0; op < 4; ++op) {
    for (int warps : {4, 8, 16}) {  // per SM: 1, 2, 4 per SM sub-partition
      auto launch = [&] {
        const dim3 g(sms), b(32 * warps);
        if (op == kTanh) mufu_rate_kernel<kTanh><<<g, b>>>(x0, out, cyc);
        if (op == kEx2) mufu_rate_kernel<kEx2><<<g, b>>>(x0, out, cyc);
        if (op == kBoth) mufu_rate_kernel<kBoth><<<g, b>>>(x0, out, cyc);
        if (op == kFfma) mufu_rate_kernel<kFfma><<<g, b>>>(x0, out, cyc);
      };
      launch();  // warm-up
      launch();
      CK(cudaDeviceSynchronize());
      std::vector<long long> hc(sms);
      std::vector<float> ho(kChains);
      CK(cudaMemcpy(hc.data(), cyc, sms * 8, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(ho.data(), out, kChains * 4, cudaMemcpyDeviceToHost));
      double mean = 0;
      for (long long c : hc) mean += double(c) / sms;
      const double ops = double(32 * warps) * kIters * kChains * (op == kBoth ? 2 : 1);
      printf("mufu_rate: %-20s %2d warps/SM: %7.2f results/clk/SM (%.0f cycles)\n", names[op], warps,
             ops / mean, mean);
      for (int c = 0; c < kChains; ++c) {
        const double want = host_chain(op, h0[c]);
        EXPECT_NEAR(ho[c], want, 2e-3 * std::fabs(want) + 1e-3) << names[op] << " chain " << c;
      }
    }
  }
  cudaFree(x0);
  cudaFree(out);
  cudaFree(cyc);
}

}  // namespace
}  // namespace longattn::cuda
