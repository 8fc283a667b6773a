// The key blocks a tile visits. Producer and consumers compute them with this one function:
// they must agree on every load (producer.cuh, consumer.cuh).
#pragma once

#include <cstdint>

#include "cuda/sm90/mask.cuh"
#include "cuda/sm90/params.h"
#include "cuda/sm90/scheduler.cuh"

namespace longattn::cuda::sm90 {

template <class Cfg>
struct TileWork {
  using Mask = TileMask<Cfg::kBlockM, Cfg::kBlockN, Cfg::kFeat, Cfg::kPack, Cfg::kCp>;
  SeqCoord sc;  // ragged kernels: the tile's sequence (dense: zeros)
  Mask mask;
  int64_t lo, hi;  // key blocks [lo, hi), visited from hi - 1 down to lo
  int32_t kv_b;    // the batch index of K / V (split-KV: 0, the split is tc.b)
};

// Ragged kernels: a tile past its sequence's end visits no key block and stores nothing, but
// still takes its Q load. NOTES: skipping such a tile outright (`continue`, or a search for
// the next live tile) made the consumer spill on some tiles.
template <class Cfg>
__device__ __forceinline__ TileWork<Cfg> tile_work(const FwdParams& p, const TileCoord& tc) {
  using Mask = typename TileWork<Cfg>::Mask;
  SeqCoord sc{0, 0, 0, 0};
  if constexpr (Cfg::kRagged) sc = seq_coord(p, tc.b);
  const Mask mask = [&] {
    if constexpr (Cfg::kRagged) {
      return Mask(p, tc.m_block, sc);
    } else {
      return Mask(p, tc.m_block);
    }
  }();
  const int64_t seq_q = Cfg::kRagged ? int64_t(sc.q_len) : p.seq_q;
  int64_t lo, hi;
  mask.block_range(seq_q, &lo, &hi);
  if constexpr (Cfg::kPack) {
    if (mask.m0 >= seq_q) lo = hi = 0;  // m0: the tile's first query position
  } else if constexpr (Cfg::kRagged) {
    if (int64_t(tc.m_block) * Cfg::kBlockM >= seq_q) lo = hi = 0;
  }
  int32_t kv_b = tc.b;
  if constexpr (!Cfg::kFeat) {
    if (p.kv_splits > 1) {  // split-KV: tc.b is the split, of the one sequence
      TileScheduler::split_range(p, tc.b, &lo, &hi);
      kv_b = 0;
    }
  }
  return TileWork<Cfg>{sc, mask, lo, hi, kv_b};
}

}  // namespace longattn::cuda::sm90
