// wgmma shared-memory matrix descriptors for 128-byte-swizzled tiles.
//
// Bits: start address >> 4 in 0-13, leading byte offset (LBO) >> 4 in 16-29, stride byte
// offset (SBO) >> 4 in 32-45, base offset 49-51 (0: tiles are 1024-byte aligned), layout
// in 62-63 (1 = 128B swizzle).
//
// Our tiles are what a TMA box of 64 16-bit columns (128 bytes) x R rows writes with
// CU_TENSOR_MAP_SWIZZLE_128B: row r at byte 128*r, 8-row groups of 1024 bytes. Wider
// tiles are several such boxes ("chunks") placed one after another.
//  - K-major operand (Q, K: the contraction dim is contiguous): SBO = 1024 (next 8 rows);
//    LBO unused. A k16 step inside a chunk advances the start by 32 bytes.
//  - MN-major operand (V as B of P.V: the N dim is contiguous): LBO = bytes between
//    64-column chunks (next 64 N), SBO = 1024 (next 8 K rows). A k16 step advances the
//    start by 16 rows = 2048 bytes.
#pragma once

#include <cstdint>

namespace longattn::cuda::ptx {

// NOTES: `smem_addr` is a shared-space byte address; chunk bases must be 1024-aligned.
__device__ __forceinline__ uint64_t make_desc_sw128(uint32_t smem_addr, uint32_t lbo_bytes,
                                                    uint32_t sbo_bytes) {
  uint64_t d = 0;
  d |= uint64_t((smem_addr & 0x3FFFF) >> 4);
  d |= uint64_t((lbo_bytes & 0x3FFFF) >> 4) << 16;
  d |= uint64_t((sbo_bytes & 0x3FFFF) >> 4) << 32;
  d |= uint64_t(1) << 62;
  return d;
}

__device__ __forceinline__ uint64_t desc_k_major(uint32_t smem_addr, uint32_t sbo_bytes = 1024) {
  return make_desc_sw128(smem_addr, 16, sbo_bytes);
}
__device__ __forceinline__ uint64_t desc_mn_major(uint32_t smem_addr, uint32_t chunk_bytes) {
  return make_desc_sw128(smem_addr, chunk_bytes, 1024);
}

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

}  // namespace longattn::cuda::ptx
