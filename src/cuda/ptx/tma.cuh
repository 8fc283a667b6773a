// TMA loads and mbarrier waits, through CCCL's cuda::ptx (one wrapper each).
#pragma once

#include <cuda.h>  // CUtensorMap (type only; no -lcuda)
#include <cuda/ptx>
#include <cstdint>

namespace longattn::cuda::ptx {

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  ::cuda::ptx::mbarrier_init(bar, count);
}
// Make mbarrier.init visible to the async proxy (TMA) before first use.
__device__ __forceinline__ void mbar_fence_init() { ::cuda::ptx::fence_mbarrier_init(::cuda::ptx::sem_release, ::cuda::ptx::scope_cluster); }

__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  ::cuda::ptx::mbarrier_arrive_expect_tx(::cuda::ptx::sem_release, ::cuda::ptx::scope_cta,
                                         ::cuda::ptx::space_shared, bar, bytes);
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  (void)::cuda::ptx::mbarrier_arrive(bar);
}
// Spin until the phase with parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  while (!::cuda::ptx::mbarrier_try_wait_parity(bar, parity)) {
  }
}

// 5-D tiled TMA load into shared memory, completing `bytes` on `bar`.
__device__ __forceinline__ void tma_load_5d(void* smem, const CUtensorMap* map, uint64_t* bar,
                                            int32_t c0, int32_t c1, int32_t c2, int32_t c3,
                                            int32_t c4) {
  const int32_t coords[5] = {c0, c1, c2, c3, c4};
  ::cuda::ptx::cp_async_bulk_tensor(::cuda::ptx::space_shared, ::cuda::ptx::space_global,
                                    smem, map, coords, bar);
}

// 5-D tiled TMA store from shared memory (a bulk async-group of the issuing thread: commit
// with bulk_commit, then wait for its reads of shared memory / its completion).
__device__ __forceinline__ void tma_store_5d(const CUtensorMap* map, const void* smem, int32_t c0, int32_t c1,
                                             int32_t c2, int32_t c3, int32_t c4) {
  const int32_t coords[5] = {c0, c1, c2, c3, c4};
  ::cuda::ptx::cp_async_bulk_tensor(::cuda::ptx::space_global, ::cuda::ptx::space_shared, map, coords, smem);
}
__device__ __forceinline__ void bulk_commit() { ::cuda::ptx::cp_async_bulk_commit_group(); }
// At most N of this thread's committed groups still read shared memory / are incomplete.
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
  ::cuda::ptx::cp_async_bulk_wait_group_read(::cuda::ptx::n32_t<N>{});
}
template <int N>
__device__ __forceinline__ void bulk_wait() {
  ::cuda::ptx::cp_async_bulk_wait_group(::cuda::ptx::n32_t<N>{});
}

__device__ __forceinline__ void prefetch_tensor_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// Generic-proxy writes to shared memory -> visible to the async proxy (TMA store / wgmma).
__device__ __forceinline__ void fence_proxy_async_smem() {
  ::cuda::ptx::fence_proxy_async(::cuda::ptx::space_shared);
}

}  // namespace longattn::cuda::ptx
