// The softmax's exp2 pass on one SM sub-partition (SMSP): how fast a warp runs ex2.approx with
// the work around it (the logit FFMA, the row-sum FADD, the pack of P to e4m3 or bf16), alone
// on its SMSP or beside 1-2 others doing the same. Standalone (tests/gpu/run.sh stage `mufu`):
//   nvcc -O3 -gencode arch=compute_90a,code=sm_90a bench/gpu/mufu_probe.cu -o mufu_probe && ./mufu_probe
// 132 CTAs of 128 x W threads put W warps on every SMSP. Each thread runs 64 independent values
// per iteration (a softmax row block's worth), each value feeding the next iteration, so
// nothing is hoisted; clock64 around the loop, averaged over the warps. Figures and what they
// showed: docs/PERFORMANCE.md, "The exp2 pass on the MUFU: a probe".
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <vector>

namespace {

__device__ __forceinline__ float ex2(float x) {
  float y;
  asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
// Four values to e4m3 in one word, as the fp8 softmax does (ptx/wgmma.cuh pack4_e4m3).
__device__ __forceinline__ uint32_t pack_e4m3(float a, float b, float c, float d) {
  uint16_t lo, hi;
  asm volatile("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(lo) : "f"(b), "f"(a));
  asm volatile("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(hi) : "f"(d), "f"(c));
  return uint32_t(lo) | (uint32_t(hi) << 16);
}
__device__ __forceinline__ uint32_t pack_bf16(float a, float b) {
  uint32_t r;
  asm volatile("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(b), "f"(a));
  return r;
}

enum Mode { kEx2, kPackE4m3, kEx2PackE4m3, kSoftmaxNoPack, kSoftmaxE4m3, kSoftmaxBf16, kModes };
const char* const kNames[kModes] = {"ex2",
                                    "e4m3 pack",
                                    "ex2 + e4m3 pack",
                                    "ffma + ex2 + fadd",
                                    "ffma + ex2 + fadd + e4m3 pack (fp8 softmax)",
                                    "ffma + ex2 + fadd + bf16 pack (16-bit softmax)"};

template <int kMode>
__global__ void probe(float* sink, long long* cycles, int iters, float scale, float neg_max) {
  constexpr bool kExp = kMode != kPackE4m3;
  constexpr bool kSum = kMode == kSoftmaxNoPack || kMode == kSoftmaxE4m3 || kMode == kSoftmaxBf16;
  float s[64];
  for (int i = 0; i < 64; ++i) s[i] = 1.0f + 0.01f * float((threadIdx.x + i) & 31);
  float sum = 0.f;
  uint32_t acc[4] = {0, 0, 0, 0};  // the packs, kept live (four chains: no serial XOR)
  __syncthreads();
  const long long t0 = clock64();
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int i = 0; i < 64; i += 4) {
      float p[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float x = s[i + j];
        if (kSum) x = fmaf(x, scale, neg_max);
        p[j] = kExp ? ex2(x) : x;
        if (kSum) sum += p[j];
      }
      if (kMode == kPackE4m3 || kMode == kEx2PackE4m3 || kMode == kSoftmaxE4m3)
        acc[(i / 4) & 3] ^= pack_e4m3(p[0], p[1], p[2], p[3]);
      if (kMode == kSoftmaxBf16) acc[(i / 4) & 3] ^= pack_bf16(p[0], p[1]) ^ pack_bf16(p[2], p[3]);
#pragma unroll
      for (int j = 0; j < 4; ++j)  // the next iteration's inputs (the pack alone: one ulp up)
        s[i + j] = kExp ? p[j] + 0.5f : __uint_as_float(__float_as_uint(p[j]) + 1u);
    }
  }
  const long long t1 = clock64();
  float r = sum + float(acc[0] ^ acc[1] ^ acc[2] ^ acc[3]);
  for (int i = 0; i < 64; ++i) r += s[i];
  sink[blockIdx.x * blockDim.x + threadIdx.x] = r;
  if (threadIdx.x % 32 == 0) cycles[blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32] = t1 - t0;
}

template <int kMode>
bool run(int warps_per_smsp, int sms) {
  const int threads = 128 * warps_per_smsp, iters = 2000, warps = sms * threads / 32;
  float* sink = nullptr;
  long long* cycles = nullptr;
  const bool allocated = cudaMalloc(&sink, size_t(sms) * threads * sizeof(float)) == cudaSuccess &&
                         cudaMalloc(&cycles, size_t(warps) * sizeof(long long)) == cudaSuccess;
  if (!allocated) {
    cudaFree(sink);
    return false;
  }
  probe<kMode><<<sms, threads>>>(sink, cycles, 10, 1.4f, -3.f);  // warm-up
  probe<kMode><<<sms, threads>>>(sink, cycles, iters, 1.4f, -3.f);
  std::vector<long long> h(warps);
  const bool ok = cudaMemcpy(h.data(), cycles, h.size() * sizeof(long long), cudaMemcpyDeviceToHost) == cudaSuccess;
  double mean = 0;
  for (long long c : h) mean += double(c) / warps;
  const double per_value = mean / (iters * 64.0);
  // Values per clock per SM: 4 SMSPs x W warps x 32 lanes, each lane one value per `per_value`
  // (from the warps' mean time: a few % above the MUFU's 16 where the warps end apart).
  std::printf("%-48s %d warp(s)/SMSP: %6.2f cycles per value per warp, %5.2f values/clk/SM\n", kNames[kMode],
              warps_per_smsp, per_value, 4.0 * warps_per_smsp * 32.0 / per_value);
  cudaFree(sink);
  cudaFree(cycles);
  return ok;
}

}  // namespace

int main() {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess || prop.major < 9) {
    std::printf("mufu_probe: needs an sm_90 device\n");
    return 1;
  }
  std::printf("%s, %d SMs; MUFU.EX2 peak 16 values/clk/SM (one warp instruction per 8 cycles per SMSP)\n",
              prop.name, prop.multiProcessorCount);
  bool ok = true;
  for (int w = 1; w <= 3; ++w) {
    ok &= run<kEx2>(w, prop.multiProcessorCount);
    ok &= run<kPackE4m3>(w, prop.multiProcessorCount);
    ok &= run<kEx2PackE4m3>(w, prop.multiProcessorCount);
    ok &= run<kSoftmaxNoPack>(w, prop.multiProcessorCount);
    ok &= run<kSoftmaxE4m3>(w, prop.multiProcessorCount);
    ok &= run<kSoftmaxBf16>(w, prop.multiProcessorCount);
  }
  return ok ? 0 : 1;
}
