// fp8 (e4m3) building blocks of the sm90 kernel, against the host, on one warpgroup:
//  - S = Q K^T with k32 SS wgmmas from TMA-loaded 128B-swizzled e4m3 tiles (UINT8 maps),
//  - P (fp32 accumulator layout) -> e4m3 A fragments (acc_to_a_frag_fp8: the key permutation),
//    V transposed in shared memory (transpose_v, keys past n_valid zeroed), O = P V with k32
//    RS wgmmas reading Vt K-major: O must equal round_e4m3(P) V over the valid keys.
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "cuda/ptx/sync.cuh"
#include "cuda/ptx/tensor_map.h"
#include "cuda/ptx/tma.cuh"
#include "cuda/sm90/fp8.cuh"
#include "cuda/sm90/gemm.cuh"

namespace longattn::cuda {
namespace {

constexpr int kRows = 64, kKeys = 128, kDim = 128;  // Q rows, keys, head dim (bytes)
constexpr int kNValid = 101;                          // keys of V that exist; the rest must read as 0

struct Fp8Cfg {
  using Element = __nv_fp8_e4m3;
  static constexpr int kHeadDim = kDim, kHeadDimV = kDim, kBlockM = kRows, kBlockN = kKeys;
  static constexpr bool kPaged = false, kFp8 = true;
  static constexpr int kChunks = 1, kChunksV = 1;
};

__device__ int frag_row(int tid, int e) { return (tid / 32) * 16 + (tid % 32) / 4 + 8 * (e / 2); }
__device__ int frag_col(int tid, int c, int e) { return 8 * c + 2 * (tid % 4) + (e % 2); }
// A deterministic P value (an integer in [0, 12]) at (row, key), known to the host.
__host__ __device__ float p_value(int r, int k) { return float((r * 37 + k * 11) % 13); }

__global__ void __launch_bounds__(128) fp8_kernel(const __grid_constant__ CUtensorMap tm_q,
                                                  const __grid_constant__ CUtensorMap tm_k,
                                                  const __grid_constant__ CUtensorMap tm_v, float* s_out, float* o_out) {
  extern __shared__ uint8_t raw[];
  uint8_t* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
  uint8_t *sq = base, *sk = sq + kRows * kDim, *sv = sk + kKeys * kDim, *svt = sv + kKeys * kDim;
  uint64_t* bar = reinterpret_cast<uint64_t*>(svt + kKeys * kDim);
  const int tid = threadIdx.x;
  if (tid == 0) {
    ptx::mbar_init(bar, 1);
    ptx::mbar_fence_init();
  }
  __syncthreads();
  if (tid == 0) {
    ptx::mbar_arrive_expect_tx(bar, kRows * kDim + 2 * kKeys * kDim);
    ptx::tma_load_5d(sq, &tm_q, bar, 0, 0, 0, 0, 0);
    ptx::tma_load_5d(sk, &tm_k, bar, 0, 0, 0, 0, 0);
    ptx::tma_load_5d(sv, &tm_v, bar, 0, 0, 0, 0, 0);
  }
  ptx::mbar_wait(bar, 0);

  float s[kKeys / 2];
  sm90::gemm_qk<Fp8Cfg>(s, sq, sk);
  ptx::wgmma_wait<0>();
  ptx::pin(s);
  for (int c = 0; c < kKeys / 8; ++c)
    for (int e = 0; e < 4; ++e) s_out[frag_row(tid, e) * kKeys + frag_col(tid, c, e)] = s[4 * c + e];

  // The transposer as the kernel runs it, here by all 4 warps.
  sm90::transpose_v<Fp8Cfg, 4>(sv, svt, tid / 32, tid % 32, kNValid);
  ptx::fence_proxy_async_smem();
  __syncthreads();

  float pacc[kKeys / 2];
  for (int c = 0; c < kKeys / 8; ++c)
    for (int e = 0; e < 4; ++e) pacc[4 * c + e] = p_value(frag_row(tid, e), frag_col(tid, c, e));
  uint32_t pf[kKeys / 8];
  sm90::acc_to_a_frag_fp8(pacc, pf);
  float o[kDim / 2];
  for (int i = 0; i < kDim / 2; ++i) o[i] = 0.f;
  sm90::gemm_pv_fp8<Fp8Cfg>(o, pf, svt);
  ptx::wgmma_wait<0>();
  ptx::pin(o);
  for (int c = 0; c < kDim / 8; ++c)
    for (int e = 0; e < 4; ++e) o_out[frag_row(tid, e) * kDim + frag_col(tid, c, e)] = o[4 * c + e];
}

float e4m3(float x) { return float(__nv_fp8_e4m3(x)); }

#define CK(x) ASSERT_EQ((x), cudaSuccess) << #x

TEST(GpuPrimitives, Fp8WgmmaTransposeAndPermutedP) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(99);
  // Small integers: every product and partial sum is exact whatever the tensor core's
  // accumulation precision, so any difference from the host is a layout error.
  std::uniform_int_distribution<int> I(-2, 2);
  std::vector<__nv_fp8_e4m3> hq(kRows * kDim), hk(kKeys * kDim), hv(kKeys * kDim);
  for (auto* h : {&hq, &hk, &hv})
    for (auto& x : *h) x = __nv_fp8_e4m3(float(I(rng)));
  // Keys past kNValid hold NaN (0x7f): the transposer must zero them, or O is NaN.
  for (int k = kNValid; k < kKeys; ++k)
    for (int d = 0; d < kDim; ++d) hv[k * kDim + d].__x = 0x7f;

  uint8_t *dq, *dk, *dv;
  float *ds, *dO;
  CK(cudaMalloc(&dq, kRows * kDim));
  CK(cudaMalloc(&dk, kKeys * kDim));
  CK(cudaMalloc(&dv, kKeys * kDim));
  CK(cudaMalloc(&ds, kRows * kKeys * 4));
  CK(cudaMalloc(&dO, kRows * kDim * 4));
  CK(cudaMemcpy(dq, hq.data(), kRows * kDim, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dk, hk.data(), kKeys * kDim, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dv, hv.data(), kKeys * kDim, cudaMemcpyHostToDevice));
  CK(cudaMemset(ds, 0xFF, kRows * kKeys * 4));
  CK(cudaMemset(dO, 0xFF, kRows * kDim * 4));
  CUtensorMap maps[3];
  void* ptrs[3] = {dq, dk, dv};
  const int rows[3] = {kRows, kKeys, kKeys};
  for (int i = 0; i < 3; ++i) {
    TileMapSpec s;
    s.base = ptrs[i];
    s.dtype = CU_TENSOR_MAP_DATA_TYPE_UINT8;
    s.batch = 1;
    s.heads = 1;
    s.rows = rows[i];
    s.dim = kDim;
    s.stride_batch = rows[i] * kDim;
    s.stride_row = kDim;
    s.stride_head = kDim;
    s.box_rows = rows[i];
    ASSERT_EQ(encode_tile_map(s, &maps[i]), "");
  }
  const int smem = kRows * kDim + 3 * kKeys * kDim + 64 + 1024;
  CK(cudaFuncSetAttribute(fp8_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  fp8_kernel<<<1, 128, smem>>>(maps[0], maps[1], maps[2], ds, dO);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<float> s(kRows * kKeys), o(kRows * kDim);
  CK(cudaMemcpy(s.data(), ds, s.size() * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(o.data(), dO, o.size() * 4, cudaMemcpyDeviceToHost));

  double es = 0, eo = 0;
  int shown = 0;
  for (int r = 0; r < kRows; ++r)
    for (int k = 0; k < kKeys; ++k) {
      double ref = 0;
      for (int d = 0; d < kDim; ++d) ref += double(float(hq[r * kDim + d])) * double(float(hk[k * kDim + d]));
      es = std::max(es, std::fabs(ref - s[r * kKeys + k]) / (1.0 + std::fabs(ref)));
      if (ref != s[r * kKeys + k] && shown++ < 8) printf("S[%d][%d] = %g, host %g\n", r, k, s[r * kKeys + k], ref);
    }
  for (int r = 0; r < kRows; ++r)
    for (int d = 0; d < kDim; ++d) {
      double ref = 0;
      for (int k = 0; k < kNValid; ++k) ref += double(e4m3(p_value(r, k))) * double(float(hv[k * kDim + d]));
      const double got = o[r * kDim + d];
      eo = std::isnan(got) ? INFINITY : std::max(eo, std::fabs(ref - got) / (1.0 + std::fabs(ref)));
      if (ref != got && shown++ < 16) printf("O[%d][%d] = %g, host %g\n", r, d, got, ref);
    }
  printf("fp8 primitives: max rel err S %.2e, PV %.2e\n", es, eo);
  EXPECT_EQ(es, 0.0) << "S = Q K^T (k32 SS wgmma, UINT8 TMA maps)";
  EXPECT_EQ(eo, 0.0) << "O = P V (permuted P fragments, transposed V, k32 RS wgmma)";
  cudaFree(dq);
  cudaFree(dk);
  cudaFree(dv);
  cudaFree(ds);
  cudaFree(dO);
}

}  // namespace
}  // namespace longattn::cuda
