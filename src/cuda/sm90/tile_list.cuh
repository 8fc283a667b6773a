// Device-built tile lists the scheduler reads (scheduler.cuh, kList): ragged batches' (below),
// and the hdim-256 dense kinds' sectioned causal order (tile_list_sections_kernel, at the end).
//
// The host does not know the sequence lengths (cu_seqlens / seqused_q / seqused_k are device
// pointers), so a one-CTA pre-kernel on the caller's stream builds, before the forward kernel,
// the list of every (sequence, head, q-block) tile that has query rows (seqused_q applied:
// mask.cuh seq_coord), in dealing order: sequence-major (explained before
// tile_list_seq_kernel); after the live tiles, padding (b = -1) where the CTAs stop. A
// cost-sorted item order (one q-block of many sequences per round) lost: its rounds shared no
// K/V (docs/PERFORMANCE.md).
// Sort: counting sort of the sequences over 4096 cost buckets in shared memory (costs above 4095 key blocks,
// i.e. > 256k keys at block_n 64, share the last bucket). Sequences of equal cost land in an
// order that may differ between launches (atomics): results do not, since a tile's arithmetic
// does not depend on when it runs (batch invariance, tests/gpu/test_batch_invariance.cpp).
// Scratch: 16 bytes per tile of a host bound on the live items (batch x num_m_blocks, and
// for packed queries total_q / block_m + batch) x heads, from cudaMallocAsync on the
// caller's stream, freed stream-ordered after the forward kernel (launch_impl.cuh).
#pragma once

#include <cstdint>

#include "cuda/sm90/mask.cuh"
#include "cuda/sm90/params.h"
#include "cuda/sm90/scheduler.cuh"

namespace longattn::cuda::sm90 {

constexpr int kTileListThreads = 1024;
constexpr int kTileListBuckets = 4096;  // 4 per thread (the scan below)

// Cost bucket of q-block m of a sequence (m below its live_m_blocks): 0 = most expensive.
// Host and device (tests/gpu/test_scheduler.cpp builds the same list on the host).
template <int kBlockM, int kBlockN>
LONGATTN_MASK_FN int32_t tile_list_bucket(const FwdParams& p, int32_t m, const SeqCoord& sc) {
  const TileMask<kBlockM, kBlockN, true> mask(p, m, sc);
  int64_t lo, hi;
  mask.block_range(sc.q_len, &lo, &hi);
  const int64_t cost = hi > lo ? hi - lo : 0;
  return kTileListBuckets - 1 - int32_t(cost < kTileListBuckets - 1 ? cost : kTileListBuckets - 1);
}

// q-blocks of a sequence that hold query rows (never more than the grid's num_m_blocks, which
// max_seqlen_q sets, as in the padded grid).
template <int kBlockM>
LONGATTN_MASK_FN int32_t live_m_blocks(const FwdParams& p, const SeqCoord& sc) {
  const int64_t n = (int64_t(sc.q_len) + kBlockM - 1) / kBlockM;
  return int32_t(n < p.num_m_blocks ? n : p.num_m_blocks);
}

// Sequence-major order (tile_list_seq_kernel): sequences sorted by the cost of their
// heaviest q-block, heaviest first; inside a sequence, kv head by kv head, and inside one kv
// head the q-blocks from the last to the first (causal: heaviest first) with the query heads
// sharing that kv head (GQA) innermost. Why: an order that puts q-blocks of equal cost
// together (one q-block from each of many sequences) runs tiles that never share K/V, each
// reading its whole key range from DRAM (~128 FLOP per byte: memory-bound).
// Sequence-major keeps the CTAs of a round on a few (sequence, kv head) pairs whose K+V stays
// in L2, the dense kernels' order. Index i of a sequence's n x heads_q tiles (host-testable):
//   i = (hk n + mi) group + j  ->  (h = hk group + j, m = n - 1 - mi).
LONGATTN_MASK_FN void seq_major_tile(int64_t i, int32_t n, int32_t group, int32_t* h, int32_t* m) {
  const int64_t j = i % group, r = i / group;
  *h = int32_t((r / n) * group + j);
  *m = int32_t(n - 1 - r % n);
}

#if defined(__CUDACC__)
// Exclusive scan in place of the kTileListBuckets counts in shared memory, by the whole CTA
// of kTileListThreads (4 buckets per thread, then across lanes and warps); returns the sum
// to every thread. Ends with a __syncthreads: slot[i] is then bucket i's first position.
__device__ inline int32_t bucket_exclusive_scan(int32_t* slot) {
  __shared__ int32_t warp_sum[kTileListThreads / 32];
  __shared__ int32_t total;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
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
  return total;
}

// The sequence-major list (see seq_major_tile). One CTA of kTileListThreads. list: int4 (b, h,
// m_block, 0), capacity n_items x heads_q tiles (launch_impl.cuh bounds the live items by
// n_items); after the live tiles, n_pad entries of b = -1 (the most any CTA reads past them:
// launch_impl.cuh). counter (may be null): the dynamic tile counter, zeroed here. One warp per
// sequence: its lanes find the heaviest q-block's bucket (pass 1) and write its tiles (pass 2).
template <int kBlockM, int kBlockN>
__global__ void __launch_bounds__(kTileListThreads)
    tile_list_seq_kernel(const __grid_constant__ FwdParams p, int4* list, int32_t n_items, int32_t n_pad,
                         int32_t* counter) {
  __shared__ int32_t slot[kTileListBuckets];  // tiles per bucket, then next free position
  constexpr int kWarps = kTileListThreads / 32;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  if (counter && tid == 0) *counter = 0;  // the dynamic tile counter (launch_impl.cuh)
  for (int i = tid; i < kTileListBuckets; i += kTileListThreads) slot[i] = 0;
  __syncthreads();
  const int32_t batch = int32_t(p.batch), nh = int32_t(p.heads_q), group = int32_t(p.group);
  const int64_t cap = int64_t(n_items) * nh;
  auto heaviest = [&](const SeqCoord& sc, int32_t n) {  // warp-wide min bucket (all lanes)
    int32_t best = kTileListBuckets - 1;
    for (int32_t m = lane; m < n; m += 32) best = min(best, tile_list_bucket<kBlockM, kBlockN>(p, m, sc));
#pragma unroll
    for (int d = 16; d > 0; d /= 2) best = min(best, __shfl_xor_sync(0xffffffffu, best, d));
    return best;
  };
  for (int32_t b = warp; b < batch; b += kWarps) {
    const SeqCoord sc = seq_coord(p, b);
    const int32_t n = live_m_blocks<kBlockM>(p, sc);
    const int32_t key = heaviest(sc, n);
    if (lane == 0 && n > 0) atomicAdd(&slot[key], n * nh);
  }
  __syncthreads();
  const int32_t total = bucket_exclusive_scan(slot);  // < 2^31: the host bounds the tiles
  for (int32_t b = warp; b < batch; b += kWarps) {
    const SeqCoord sc = seq_coord(p, b);
    const int32_t n = live_m_blocks<kBlockM>(p, sc);
    if (n == 0) continue;
    const int32_t key = heaviest(sc, n);
    int32_t pos = 0;
    if (lane == 0) pos = atomicAdd(&slot[key], n * nh);
    pos = __shfl_sync(0xffffffffu, pos, 0);
    const int64_t count = int64_t(n) * nh;
    for (int64_t i = lane; i < count && pos + i < cap; i += 32) {  // never write past the capacity
      int32_t h, m;
      seq_major_tile(i, n, group, &h, &m);
      list[pos + i] = make_int4(b, h, m, 0);
    }
  }
  const int64_t live = int64_t(total) < cap ? int64_t(total) : cap;
  const int64_t end = live + n_pad < cap ? live + n_pad : cap;
  for (int64_t i = live + tid; i < end; i += kTileListThreads) list[i] = make_int4(-1, 0, 0, 0);
}

// The dense kinds without the sectioned snake (hdim 256; KernelConfig kSectionList): the
// sectioned LPT schedule written out (TileScheduler::section_list_entry), one thread per entry
// (round k, CTA c) of the forward kernel's grid `g`, `rounds` rounds (section_list_rounds),
// sections dealt from rotating first CTAs where `rotate` (LaunchArgs::section_rotate), the last
// from `last_first` (schedule_rule.h rotated_last_first). A template (on its block size) like
// the kernel above, so that every launch file may instantiate it.
template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    tile_list_sections_kernel(const __grid_constant__ FwdParams sec, int4* list, int32_t rounds, uint32_t g, bool rotate,
                              uint32_t last_first) {
  const int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= int64_t(rounds) * g) return;
  const int64_t k = i / g;
  const TileCoord tc = TileScheduler::section_list_entry(sec, k, g, uint32_t(i - k * g), rotate, last_first);
  list[i] = make_int4(tc.b, tc.h, tc.m_block, 0);
}
#endif

}  // namespace longattn::cuda::sm90
