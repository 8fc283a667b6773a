// wgmma (sm_90a warpgroup matrix multiply-accumulate): the SS and RS forms for every
// N we use, plus fence / commit_group / wait_group. Each PTX instruction is written once.
//
// Fragment facts (64 x N fp32 accumulator, warpgroup of 128 threads): thread t, warp
// w = t/32, lane l; element d[4c + e] of n8-chunk c sits at row 16w + l/4 + 8*(e/2),
// column 8c + 2*(l%4) + (e%2). The RS A fragment of a k16 step holds rows 16w + l/4
// (+8) and k = 2*(l%4) (+1, +8, +9): the same map, which is why P stays in registers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cstdint>

namespace longattn::cuda::ptx {

template <class T, int N>
struct WgmmaOp;  // specialized in wgmma_ops.inc for T in {bf16, half, e4m3}, N in gen_wgmma.py

#include "cuda/ptx/wgmma_ops.inc"

// wgmma.fence: orders register writes by ordinary code before a following wgmma that
// reads them (A fragment, accumulators). Required before the first wgmma of each batch.
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Wait until at most kPending committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

// Register pinning: an empty asm that "reads and writes" each accumulator keeps the
// compiler from moving ordinary accesses to these registers across async wgmma issue /
// wait points (otherwise ptxas serializes wgmma: warnings C7510-C7515).
template <int R>
__device__ __forceinline__ void pin(float (&r)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int R>
__device__ __forceinline__ void pin(uint32_t (&r)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

// D(64xN) (+)= A(64x16, smem desc) * B(16xN, smem desc). kTransB=1: B is MN-major.
template <class T, int N, int kTransB = 0>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 2], uint64_t da, uint64_t db,
                                         bool accumulate) {
  WgmmaOp<T, N>::template ss<0, kTransB>(d, da, db, accumulate ? 1 : 0);
}
// D(64xN) (+)= A(64x16, registers: 4 x packed pairs) * B(16xN, smem desc).
template <class T, int N, int kTransB = 0>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 2], const uint32_t (&a)[4],
                                         uint64_t db, bool accumulate) {
  WgmmaOp<T, N>::template rs<kTransB>(d, a, db, accumulate ? 1 : 0);
}

// e4m3 (k32): D(64xN) (+)= A(64x32, smem desc, K-major) * B(32xN, smem desc, K-major).
template <int N>
__device__ __forceinline__ void wgmma_ss_fp8(float (&d)[N / 2], uint64_t da, uint64_t db, bool accumulate) {
  WgmmaOp<__nv_fp8_e4m3, N>::ss(d, da, db, accumulate ? 1 : 0);
}
// e4m3 (k32): A from registers (4 x 4 e4m3 per thread), B K-major from shared memory. A
// fragment of a k32 step: register 0 = row r, k 4 (l%4) .. +3; 1 = row r + 8, same k; 2 =
// row r, k 16 + 4 (l%4) .. +3; 3 = row r + 8, same (r = 16w + l/4); byte i = k + i.
template <int N>
__device__ __forceinline__ void wgmma_rs_fp8(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t db, bool accumulate) {
  WgmmaOp<__nv_fp8_e4m3, N>::rs(d, a, db, accumulate ? 1 : 0);
}

// Four fp32 to four e4m3 in one b32 (round to nearest even, saturating at +-448), byte i = x_i.
__device__ __forceinline__ uint32_t pack4_e4m3(float x0, float x1, float x2, float x3) {
  uint16_t lo, hi;
  // cvt ... e4m3x2 d, a, b: a goes to the upper byte, b to the lower.
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(lo) : "f"(x1), "f"(x0));
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(hi) : "f"(x3), "f"(x2));
  return uint32_t(lo) | (uint32_t(hi) << 16);
}

// Pack two fp32 into one b32 of two 16-bit values (round to nearest even), low = x.
template <class T>
__device__ __forceinline__ uint32_t pack2(float x, float y);
template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float x, float y) {
  __nv_bfloat162 v = __floats2bfloat162_rn(x, y);
  return *reinterpret_cast<uint32_t*>(&v);
}
template <>
__device__ __forceinline__ uint32_t pack2<__half>(float x, float y) {
  __half2 v = __floats2half2_rn(x, y);
  return *reinterpret_cast<uint32_t*>(&v);
}

// S -> P fragment conversion: the accumulator of n8-chunks 2kk, 2kk+1 becomes the RS A
// fragment of k16 step kk (pairwise cvt, no data movement).
template <class T, int NACC>
__device__ __forceinline__ void acc_to_a_frag(const float (&s)[NACC],
                                              uint32_t (&p)[NACC / 2]) {
#pragma unroll
  for (int i = 0; i < NACC / 2; ++i) p[i] = pack2<T>(s[2 * i], s[2 * i + 1]);
}

}  // namespace longattn::cuda::ptx
