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

// A descriptor as its two 32-bit words, for the many wgmmas that read one tile at constant
// offsets: lo = start address >> 4 (bits 0-13) | LBO >> 4 (bits 16-29), hi = SBO >> 4 | the
// 128B-swizzle layout (bit 62 of the whole). An offset inside the tile is then one 32-bit add
// to lo: shared-space addresses stay below 2^18 bytes, so the start field (address >> 4) stays
// below 2^14 and never carries into the LBO field. (Building each wgmma's 64-bit descriptor
// from its address costs a mask, a shift and ors per operand, dozens per key block.)
// NOTES: `smem_addr` is a shared-space byte address; chunk bases must be 1024-aligned;
// offsets passed to at() are multiples of 16 bytes.
struct TileDesc {
  uint32_t lo, hi;
  __host__ __device__ __forceinline__ static TileDesc make(uint32_t smem_addr, uint32_t lbo_bytes, uint32_t sbo_bytes) {
    return TileDesc{((smem_addr & 0x3FFFF) >> 4) | (((lbo_bytes & 0x3FFFF) >> 4) << 16),
                    ((sbo_bytes & 0x3FFFF) >> 4) | (1u << 30)};
  }
  // K-major operand (LBO unused): SBO = bytes between 8-row groups.
  __host__ __device__ __forceinline__ static TileDesc k_major(uint32_t smem_addr, uint32_t sbo_bytes = 1024) {
    return make(smem_addr, 16, sbo_bytes);
  }
  // MN-major operand: LBO = bytes between 64-column chunks, SBO = 1024 (next 8 K rows).
  __host__ __device__ __forceinline__ static TileDesc mn_major(uint32_t smem_addr, uint32_t chunk_bytes) {
    return make(smem_addr, chunk_bytes, 1024);
  }
  __host__ __device__ __forceinline__ uint64_t at(uint32_t byte_off) const {
    return (uint64_t(hi) << 32) | uint64_t(lo + (byte_off >> 4));
  }
};

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

}  // namespace longattn::cuda::ptx
