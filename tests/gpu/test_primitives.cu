// Unit tests of the sm90 primitives on the device, each against a CPU computation:
//  - TMA 128B-swizzle round trip (tensor map -> shared memory -> the swizzle formula),
//  - wgmma SS with K-major A and B (S = A B^T over two 64-column chunks, the kernel's gemm_qk),
//  - the S -> P fragment conversion + wgmma RS with MN-major B (O = P V, the kernel's gemm_pv),
//  - wgmma SS with MN-major B (D = A[:, :64] V).
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "cuda/ptx/tensor_map.h"
#include "cuda/ptx/sync.cuh"
#include "cuda/ptx/tma.cuh"
#include "cuda/sm90/gemm.cuh"

namespace longattn::cuda {
namespace {

constexpr int kRows = 64, kDim = 128, kTileBytes = kRows * kDim * 2;

struct TestCfg {
  using Element = __nv_bfloat16;
  static constexpr int kHeadDim = kDim, kHeadDimV = kDim, kBlockM = kRows, kBlockN = kRows;
  static constexpr bool kPaged = false, kFp8 = false;
  static constexpr int kChunks = kDim / 64, kChunksV = kDim / 64;
};

__device__ int frag_row(int tid, int e) { return (tid / 32) * 16 + (tid % 32) / 4 + 8 * (e / 2); }
__device__ int frag_col(int tid, int c, int e) { return 8 * c + 2 * (tid % 4) + (e % 2); }

template <int N>
__device__ void store_frag(float* out, const float (&d)[N / 2], int tid) {
  for (int c = 0; c < N / 8; ++c)
    for (int e = 0; e < 4; ++e) out[frag_row(tid, e) * N + frag_col(tid, c, e)] = d[4 * c + e];
}

__global__ void __launch_bounds__(128) primitives_kernel(
    const __grid_constant__ CUtensorMap tm_a, const __grid_constant__ CUtensorMap tm_b,
    const __grid_constant__ CUtensorMap tm_v, __nv_bfloat16* a_rt, float* s_out, float* o_out,
    float* d2_out) {
  extern __shared__ uint8_t raw[];
  uint8_t* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
  uint8_t *sa = base, *sb = base + kTileBytes, *sv = base + 2 * kTileBytes;
  uint64_t* bar = reinterpret_cast<uint64_t*>(base + 3 * kTileBytes);
  const int tid = threadIdx.x;
  if (tid == 0) {
    ptx::mbar_init(bar, 1);
    ptx::mbar_fence_init();
  }
  __syncthreads();
  if (tid == 0) {
    ptx::mbar_arrive_expect_tx(bar, 3 * kTileBytes);
    ptx::tma_load_5d(sa, &tm_a, bar, 0, 0, 0, 0, 0);
    ptx::tma_load_5d(sb, &tm_b, bar, 0, 0, 0, 0, 0);
    ptx::tma_load_5d(sv, &tm_v, bar, 0, 0, 0, 0, 0);
  }
  ptx::mbar_wait(bar, 0);

  // Round trip: 16-byte unit u of row r sits at unit u ^ (r % 8) (128B swizzle).
  for (int i = tid; i < kRows * kDim; i += 128) {
    int r = i / kDim, c = i % kDim, ch = c / 64, cc = c % 64;
    int byte = ch * kRows * 128 + r * 128 + ((((cc * 2) / 16) ^ (r % 8)) * 16) + (cc * 2) % 16;
    a_rt[i] = *reinterpret_cast<const __nv_bfloat16*>(sa + byte);
  }

  float s[kRows / 2];
  sm90::gemm_qk<TestCfg>(s, sa, sb);
  ptx::wgmma_wait<0>();
  ptx::pin(s);
  store_frag<kRows>(s_out, s, tid);

  uint32_t p[kRows / 4];
  ptx::acc_to_a_frag<__nv_bfloat16>(s, p);
  float o[kDim / 2];
  for (int i = 0; i < kDim / 2; ++i) o[i] = 0.f;
  sm90::gemm_pv<TestCfg>(o, p, sv);
  ptx::wgmma_wait<0>();
  ptx::pin(o);
  store_frag<kDim>(o_out, o, tid);

  float d2[kDim / 2];
  ptx::wgmma_fence();
  const ptx::TileDesc ad = ptx::TileDesc::k_major(ptx::smem_u32(sa));
  const ptx::TileDesc vd = ptx::TileDesc::mn_major(ptx::smem_u32(sv), kRows * 128);
  for (int kk = 0; kk < 4; ++kk) {
    const uint64_t da = ad.at(kk * 32), db = vd.at(kk * 2048);
    ptx::wgmma_ss<__nv_bfloat16, kDim, 1>(d2, da, db, kk > 0);
  }
  ptx::wgmma_commit();
  ptx::wgmma_wait<0>();
  ptx::pin(d2);
  store_frag<kDim>(d2_out, d2, tid);
}

float bf(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }

#define CK(x) ASSERT_EQ((x), cudaSuccess) << #x

TEST(GpuPrimitives, TmaSwizzleWgmmaSsRsAndFragmentConversion) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> U(-1.f, 1.f);
  std::vector<__nv_bfloat16> ha(kRows * kDim), hb(kRows * kDim), hv(kRows * kDim);
  for (auto* h : {&ha, &hb, &hv})
    for (auto& x : *h) x = __float2bfloat16_rn(U(rng));

  __nv_bfloat16 *da, *db, *dv, *drt;
  float *ds, *dO, *dd2;
  CK(cudaMalloc(&da, kTileBytes));
  CK(cudaMalloc(&db, kTileBytes));
  CK(cudaMalloc(&dv, kTileBytes));
  CK(cudaMalloc(&drt, kTileBytes));
  CK(cudaMalloc(&ds, kRows * kRows * 4));
  CK(cudaMalloc(&dO, kRows * kDim * 4));
  CK(cudaMalloc(&dd2, kRows * kDim * 4));
  CK(cudaMemcpy(da, ha.data(), kTileBytes, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(db, hb.data(), kTileBytes, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dv, hv.data(), kTileBytes, cudaMemcpyHostToDevice));
  CK(cudaMemset(drt, 0xFF, kTileBytes));
  CK(cudaMemset(ds, 0xFF, kRows * kRows * 4));
  CK(cudaMemset(dO, 0xFF, kRows * kDim * 4));
  CK(cudaMemset(dd2, 0xFF, kRows * kDim * 4));

  CUtensorMap maps[3];
  void* ptrs[3] = {da, db, dv};
  for (int i = 0; i < 3; ++i) {
    TileMapSpec s;
    s.base = ptrs[i];
    s.batch = 1;
    s.heads = 1;
    s.rows = kRows;
    s.dim = kDim;
    s.stride_batch = kRows * kDim;
    s.stride_row = kDim;
    s.stride_head = kDim;
    s.box_rows = kRows;
    ASSERT_EQ(encode_tile_map(s, &maps[i]), "");
  }
  const int smem = 3 * kTileBytes + 1024 + 64;
  CK(cudaFuncSetAttribute(primitives_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  primitives_kernel<<<1, 128, smem>>>(maps[0], maps[1], maps[2], drt, ds, dO, dd2);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());

  std::vector<__nv_bfloat16> rt(kRows * kDim);
  std::vector<float> s(kRows * kRows), o(kRows * kDim), d2(kRows * kDim);
  CK(cudaMemcpy(rt.data(), drt, kTileBytes, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(s.data(), ds, s.size() * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(o.data(), dO, o.size() * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(d2.data(), dd2, d2.size() * 4, cudaMemcpyDeviceToHost));

  auto f = [](const std::vector<__nv_bfloat16>& x, int i) { return double(__bfloat162float(x[i])); };
  int bad_rt = 0;
  for (int i = 0; i < kRows * kDim; ++i) bad_rt += __bfloat162float(rt[i]) != __bfloat162float(ha[i]);
  EXPECT_EQ(bad_rt, 0) << "TMA 128B-swizzle round trip";

  double es = 0, eo = 0, ed = 0;
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < kRows; ++c) {
      double acc = 0;
      for (int k = 0; k < kDim; ++k) acc += f(ha, r * kDim + k) * f(hb, c * kDim + k);
      es = std::max(es, std::fabs(acc - s[r * kRows + c]));  // also catches NaN (unwritten)
      if (std::isnan(s[r * kRows + c])) es = INFINITY;
    }
  EXPECT_LT(es, 1e-3) << "wgmma SS, K-major A and B (S = A B^T)";
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < kDim; ++c) {
      double acc = 0, acc2 = 0;
      for (int k = 0; k < kRows; ++k) {
        acc += double(bf(s[r * kRows + k])) * f(hv, k * kDim + c);
        acc2 += f(ha, r * kDim + k) * f(hv, k * kDim + c);
      }
      double x = o[r * kDim + c], y = d2[r * kDim + c];
      eo = std::isnan(x) ? INFINITY : std::max(eo, std::fabs(acc - x));
      ed = std::isnan(y) ? INFINITY : std::max(ed, std::fabs(acc2 - y));
    }
  EXPECT_LT(eo, 1e-3) << "S->P conversion + wgmma RS, MN-major B (O = P V)";
  EXPECT_LT(ed, 1e-3) << "wgmma SS, MN-major B (D = A V)";
  printf("primitives: max err S %.2e, PV %.2e, A.V %.2e\n", es, eo, ed);
  for (void* p : {(void*)da, (void*)db, (void*)dv, (void*)drt, (void*)ds, (void*)dO, (void*)dd2}) cudaFree(p);
}

// Paged K/V loads a K/V tile as boxes of r rows with one 64-column chunk each (mainloop.cuh
// load_paged), box i at row i r of each chunk. 128B swizzle follows the shared-memory
// address, so every r must give bitwise the tile one whole-tile box writes (including r < 8,
// where a box covers part of a 1024-byte swizzle atom). Boxes are issued last to first;
// shared memory is poisoned first.
__global__ void __launch_bounds__(128) box_rows_kernel(const __grid_constant__ CUtensorMap tm_full,
                                                       const __grid_constant__ CUtensorMap tm_box, int r,
                                                       uint8_t* out_full, uint8_t* out_box) {
  extern __shared__ uint8_t raw[];
  uint8_t* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
  uint8_t *t_full = base, *t_box = base + kTileBytes;
  uint64_t* bar = reinterpret_cast<uint64_t*>(base + 2 * kTileBytes);
  const int tid = threadIdx.x;
  for (int i = tid; i < 2 * kTileBytes / 16; i += 128) reinterpret_cast<uint4*>(base)[i] = make_uint4(~0u, ~0u, ~0u, ~0u);
  ptx::fence_proxy_async_smem();
  if (tid == 0) {
    ptx::mbar_init(bar, 1);
    ptx::mbar_init(bar + 1, 1);
    ptx::mbar_fence_init();
  }
  __syncthreads();
  if (tid == 0) {
    ptx::mbar_arrive_expect_tx(bar, kTileBytes);
    ptx::tma_load_5d(t_full, &tm_full, bar, 0, 0, 0, 0, 0);
    ptx::mbar_arrive_expect_tx(bar + 1, kTileBytes);
    for (int i = kRows / r - 1; i >= 0; --i)
      for (int c = 0; c < kDim / 64; ++c)
        ptx::tma_load_5d(t_box + c * kRows * 128 + i * r * 128, &tm_box, bar + 1, 0, i * r, c, 0, 0);
  }
  ptx::mbar_wait(bar, 0);
  ptx::mbar_wait(bar + 1, 0);
  for (int i = tid; i < kTileBytes / 16; i += 128) {
    reinterpret_cast<uint4*>(out_full)[i] = reinterpret_cast<const uint4*>(t_full)[i];
    reinterpret_cast<uint4*>(out_box)[i] = reinterpret_cast<const uint4*>(t_box)[i];
  }
}

TEST(GpuPrimitives, TmaBoxRowsGiveTheOneBoxTile) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(4321);
  std::uniform_real_distribution<float> U(-1.f, 1.f);
  std::vector<__nv_bfloat16> h(kRows * kDim);
  for (auto& x : h) x = __float2bfloat16_rn(U(rng));
  __nv_bfloat16* src;
  uint8_t *of, *ob;
  CK(cudaMalloc(&src, kTileBytes));
  CK(cudaMalloc(&of, kTileBytes));
  CK(cudaMalloc(&ob, kTileBytes));
  CK(cudaMemcpy(src, h.data(), kTileBytes, cudaMemcpyHostToDevice));
  auto spec = [&](int rows, int chunks) {
    TileMapSpec s;
    s.base = src;
    s.batch = 1;
    s.heads = 1;
    s.rows = kRows;
    s.dim = kDim;
    s.stride_batch = kRows * kDim;
    s.stride_row = kDim;
    s.stride_head = kDim;
    s.box_rows = rows;
    s.box_chunks = chunks;
    return s;
  };
  CUtensorMap full;
  ASSERT_EQ(encode_tile_map(spec(kRows, 0), &full), "");
  const int smem = 2 * kTileBytes + 1024 + 64;
  CK(cudaFuncSetAttribute(box_rows_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  for (int r : {1, 2, 4, 8, 16, 32, 64}) {
    CUtensorMap box;
    ASSERT_EQ(encode_tile_map(spec(r, 1), &box), "") << "r = " << r;
    CK(cudaMemset(of, 0, kTileBytes));
    CK(cudaMemset(ob, 0, kTileBytes));
    box_rows_kernel<<<1, 128, smem>>>(full, box, r, of, ob);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    std::vector<uint8_t> a(kTileBytes), b(kTileBytes);
    CK(cudaMemcpy(a.data(), of, kTileBytes, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(b.data(), ob, kTileBytes, cudaMemcpyDeviceToHost));
    int64_t diff = 0;
    for (int i = 0; i < kTileBytes; ++i) diff += a[i] != b[i];
    EXPECT_EQ(diff, 0) << "boxes of " << r << " rows: " << diff << " bytes differ from the one-box tile";
    // The one-box tile itself is the swizzled layout (checked element-wise in the test above).
    int64_t bad = 0;
    for (int i = 0; i < kRows * kDim; ++i) {
      const int row = i / kDim, c = i % kDim, ch = c / 64, cc = c % 64;
      const int byte = ch * kRows * 128 + row * 128 + ((((cc * 2) / 16) ^ (row % 8)) * 16) + (cc * 2) % 16;
      bad += std::memcmp(&a[size_t(byte)], &h[size_t(i)], 2) != 0;
    }
    EXPECT_EQ(bad, 0) << "one-box tile layout";
  }
  for (void* p : {(void*)src, (void*)of, (void*)ob}) cudaFree(p);
}

// Packed GQA (sm90/pack_gqa.h): the Q map viewing Q as (dim, g heads, tokens, kv heads, batch)
// with box (64, g, kRows / g) lands one 64-column chunk as kRows rows in packed order, row r =
// (token row + r / g, head hk g + r % g), 128B-swizzled like any tile; tokens past the end
// are zero-filled. Checked element by element against the host tensor (smem poisoned first).
__global__ void __launch_bounds__(128) packed_q_kernel(const __grid_constant__ CUtensorMap tm, int row, int hk, int b,
                                                       uint8_t* out) {
  extern __shared__ uint8_t raw[];
  uint8_t* t = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
  uint64_t* bar = reinterpret_cast<uint64_t*>(t + kTileBytes);
  const int tid = threadIdx.x;
  for (int i = tid; i < kTileBytes / 16; i += 128) reinterpret_cast<uint4*>(t)[i] = make_uint4(~0u, ~0u, ~0u, ~0u);
  ptx::fence_proxy_async_smem();
  if (tid == 0) {
    ptx::mbar_init(bar, 1);
    ptx::mbar_fence_init();
  }
  __syncthreads();
  if (tid == 0) {
    ptx::mbar_arrive_expect_tx(bar, kTileBytes);
    for (int c = 0; c < kDim / 64; ++c) ptx::tma_load_5d(t + c * kRows * 128, &tm, bar, c * 64, 0, row, hk, b);
  }
  ptx::mbar_wait(bar, 0);
  for (int i = tid; i < kTileBytes / 16; i += 128) reinterpret_cast<uint4*>(out)[i] = reinterpret_cast<const uint4*>(t)[i];
}

TEST(GpuPrimitives, PackedQBoxLayout) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) GTEST_SKIP() << "no CUDA device";
  constexpr int kB = 2, kS = 9, kH = 8;  // (batch, seq, heads, kDim), token rows padded by 8
  constexpr int kRowStride = kH * kDim + 8;
  std::mt19937 rng(99);
  std::uniform_real_distribution<float> U(-1.f, 1.f);
  std::vector<__nv_bfloat16> h(size_t(kB) * kS * kRowStride);
  for (auto& x : h) x = __float2bfloat16_rn(U(rng));
  __nv_bfloat16* src;
  uint8_t* out;
  CK(cudaMalloc(&src, h.size() * 2));
  CK(cudaMalloc(&out, kTileBytes));
  CK(cudaMemcpy(src, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
  const int smem = kTileBytes + 1024 + 64;
  CK(cudaFuncSetAttribute(packed_q_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  for (int g : {2, 4, 8}) {
    TileMapSpec s;
    s.base = src;
    s.batch = kB;
    s.rows = kS;
    s.heads = kH;
    s.dim = kDim;
    s.stride_batch = int64_t(kS) * kRowStride;
    s.stride_row = kRowStride;
    s.stride_head = kDim;
    s.box_rows = kRows;
    s.pack_group = g;
    CUtensorMap tm;
    ASSERT_EQ(encode_tile_map(s, &tm), "") << "g " << g;
    const int row = 3, hk = kH / g - 1, b = 1;
    packed_q_kernel<<<1, 128, smem>>>(tm, row, hk, b, out);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    std::vector<uint8_t> a(kTileBytes);
    CK(cudaMemcpy(a.data(), out, kTileBytes, cudaMemcpyDeviceToHost));
    int64_t bad = 0;
    for (int r = 0; r < kRows; ++r)
      for (int c = 0; c < kDim; ++c) {
        const int tok = row + r / g, head = hk * g + r % g, ch = c / 64, cc = c % 64;
        const int byte = ch * kRows * 128 + r * 128 + ((((cc * 2) / 16) ^ (r % 8)) * 16) + (cc * 2) % 16;
        __nv_bfloat16 want = __float2bfloat16_rn(0.f);
        if (tok < kS) want = h[size_t(b) * kS * kRowStride + size_t(tok) * kRowStride + head * kDim + c];
        bad += std::memcmp(&a[size_t(byte)], &want, 2) != 0;
      }
    EXPECT_EQ(bad, 0) << "packed Q tile, g " << g << ": " << bad << " elements differ";
  }
  for (void* p : {(void*)src, (void*)out}) cudaFree(p);
}

}  // namespace
}  // namespace longattn::cuda

// TileDesc against the descriptor's bit layout (PTX ISA, "matrix descriptor"): start address
// >> 4 in bits 0-13, LBO >> 4 in 16-29, SBO >> 4 in 32-45, base offset 0, 128B swizzle (1) in
// 62-63; at(off) must equal the descriptor of the address plus off for every offset a tile of
// ours uses, anywhere in the 228 KiB of shared memory (host-side: no GPU needed).
TEST(GpuPrimitives, TileDescOffsetsEqualTheDescriptorOfTheOffsetAddress) {
  using longattn::cuda::ptx::TileDesc;
  auto spec = [](uint32_t addr, uint32_t lbo, uint32_t sbo) {
    return uint64_t((addr >> 4) & 0x3FFF) | uint64_t((lbo >> 4) & 0x3FFF) << 16 |
           uint64_t((sbo >> 4) & 0x3FFF) << 32 | uint64_t(1) << 62;
  };
  std::mt19937 rng(7);
  const uint32_t kSmem = 228 * 1024;
  for (int i = 0; i < 200000; ++i) {
    const uint32_t base = (rng() % (kSmem / 1024)) * 1024;
    const uint32_t off = (rng() % ((kSmem - base) / 16)) * 16;
    const uint32_t lbo = (1u + rng() % 1023) * 16, sbo = (1u + rng() % 1023) * 16;
    ASSERT_EQ(TileDesc::make(base, lbo, sbo).at(off), spec(base + off, lbo, sbo)) << base << " + " << off;
    ASSERT_EQ(TileDesc::k_major(base, sbo).at(off), spec(base + off, 16, sbo));
    ASSERT_EQ(TileDesc::mn_major(base, lbo).at(off), spec(base + off, lbo, 1024));
  }
}
