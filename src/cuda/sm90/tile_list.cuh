// Ragged batches: the cost-ordered tile list the scheduler deals (scheduler.cuh, kList).
//
// The host does not know the sequence lengths (cu_seqlens / seqused_k are device pointers),
// so a one-CTA pre-kernel on the caller's stream builds, before the forward kernel, the list
// of every (sequence, q-block) item that has query rows, sorted by its real cost (key blocks
// the tile visits: TileMask::block_range, every mask included), heaviest first, and pads the
// rest of the batch x num_m_blocks slots with b = -1. Before it, ragged tiles were (batch x
// q-blocks of the longest sequence) with empty tiles and an order by q-block index, not cost:
// causal ragged ran at 0.58x of dense (H200; docs/PERFORMANCE.md).
// Sort: counting sort over 4096 cost buckets in shared memory (costs above 4095 key blocks,
// i.e. > 256k keys at block_n 64, share the last bucket). Items of equal cost land in an
// order that may differ between launches (atomics): results do not, since a tile's arithmetic
// does not depend on when it runs (batch invariance, tests/gpu/test_batch_invariance.cpp).
// Scratch: batch x num_m_blocks x 8 bytes from cudaMallocAsync on the caller's stream, freed
// stream-ordered after the forward kernel (launch_impl.cuh); no library-held state.
#pragma once

#include <cstdint>

#include "cuda/sm90/mask.cuh"
#include "cuda/sm90/params.h"

namespace longattn::cuda::sm90 {

constexpr int kTileListThreads = 1024;
constexpr int kTileListBuckets = 4096;  // 4 per thread (the scan below)

// Cost bucket of item i (b = i / num_m_blocks, m = i % num_m_blocks): 0 = most expensive,
// -1 = no query rows (not listed).
// Host and device (tests/gpu/test_scheduler.cpp builds the same list on the host).
template <int kBlockM, int kBlockN>
LONGATTN_MASK_FN int32_t tile_list_bucket(const FwdParams& p, int32_t i, int32_t* b, int32_t* m) {
  const int32_t nm = int32_t(p.num_m_blocks);
  *b = i / nm;
  *m = i - *b * nm;
  const SeqCoord sc = seq_coord(p, *b);
  if (int64_t(*m) * kBlockM >= sc.q_len) return -1;
  const TileMask<kBlockM, kBlockN, true> mask(p, *m, sc);
  int64_t lo, hi;
  mask.block_range(sc.q_len, &lo, &hi);
  const int64_t cost = hi > lo ? hi - lo : 0;
  return kTileListBuckets - 1 - int32_t(cost < kTileListBuckets - 1 ? cost : kTileListBuckets - 1);
}

#if defined(__CUDACC__)
// One CTA of kTileListThreads. list: 2 x n_items int32 (b, m_block), n_items = batch x
// num_m_blocks.
template <int kBlockM, int kBlockN>
__global__ void __launch_bounds__(kTileListThreads)
    tile_list_kernel(const __grid_constant__ FwdParams p, int32_t* list, int32_t n_items) {
  __shared__ int32_t slot[kTileListBuckets];  // counts, then next free position per bucket
  __shared__ int32_t warp_sum[kTileListThreads / 32];
  __shared__ int32_t total;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  for (int i = tid; i < kTileListBuckets; i += kTileListThreads) slot[i] = 0;
  __syncthreads();
  for (int32_t i = tid; i < n_items; i += kTileListThreads) {
    int32_t b, m;
    const int32_t k = tile_list_bucket<kBlockM, kBlockN>(p, i, &b, &m);
    if (k >= 0) atomicAdd(&slot[k], 1);
  }
  __syncthreads();
  // Exclusive scan of the 4096 counts: 4 per thread, then across lanes and warps.
  constexpr int kPer = kTileListBuckets / kTileListThreads;
  int32_t c[kPer], sum = 0;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    c[j] = slot[tid * kPer + j];
    sum += c[j];
  }
  int32_t incl = sum;
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    const int32_t y = __shfl_up_sync(0xffffffffu, incl, d);
    if (lane >= d) incl += y;
  }
  if (lane == 31) warp_sum[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    int32_t w = warp_sum[lane], wi = w;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      const int32_t y = __shfl_up_sync(0xffffffffu, wi, d);
      if (lane >= d) wi += y;
    }
    warp_sum[lane] = wi - w;  // exclusive prefix of the warps
    if (lane == 31) total = wi;
  }
  __syncthreads();
  int32_t start = warp_sum[warp] + incl - sum;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    slot[tid * kPer + j] = start;
    start += c[j];
  }
  __syncthreads();
  for (int32_t i = tid; i < n_items; i += kTileListThreads) {
    int32_t b, m;
    const int32_t k = tile_list_bucket<kBlockM, kBlockN>(p, i, &b, &m);
    if (k < 0) continue;
    const int32_t pos = atomicAdd(&slot[k], 1);
    list[2 * pos] = b;
    list[2 * pos + 1] = m;
  }
  for (int32_t i = total + tid; i < n_items; i += kTileListThreads) {
    list[2 * i] = -1;
    list[2 * i + 1] = 0;
  }
}
#endif

}  // namespace longattn::cuda::sm90
