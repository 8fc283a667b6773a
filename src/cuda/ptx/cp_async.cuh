// cp.async (16-byte global -> shared copies by threads) and its mbarrier completion: the
// paged producer's gather path (paged_kv.cuh team_load). One wrapper per instruction.
#pragma once

#include <cstdint>

#include "cuda/ptx/smem_desc.cuh"  // smem_u32

namespace longattn::cuda::ptx {

// 16 bytes from global (16-byte aligned) to shared (16-byte aligned); .cg: cached in L2 only
// (a K/V row is read once per CTA; L1 would only hold it in the way of the page table).
__device__ __forceinline__ void cp_async_16(uint32_t smem_addr, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr), "l"(gmem) : "memory");
}

// The same copy with `src_bytes` (0 or 16) read from global and the rest of the 16 bytes
// zero-filled: 0 writes zeros and reads nothing.
__device__ __forceinline__ void cp_async_16_zfill(uint32_t smem_addr, const void* gmem, uint32_t src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr), "l"(gmem), "r"(src_bytes) : "memory");
}

// One arrival on `bar` once every cp.async this thread issued before has landed. .noinc: the
// arrival counts toward the barrier's expected count (init with one per copying thread).
__device__ __forceinline__ void cp_async_mbar_arrive_noinc(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}

// Wait until every cp.async this thread issued has completed.
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

}  // namespace longattn::cuda::ptx
