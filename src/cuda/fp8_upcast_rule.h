// Which fp8 (e4m3) calls the fp8 kernels could serve run faster on the f16 kernels after the
// exact upcast (fp8_upcast.h), host-only: q / k and v dims up to 64 (the fp8 kernel runs them
// at 128 on zero columns, half its tensor work wasted) with dense or ragged K / V, no window or
// chunk, at least 1024 query rows and 1024 visible keys per query row on average (causal:
// seq_k - seq_q / 2). There the f16 hdim-64 kernel after the upcast was faster than the fp8
// kernel, the upcast's pass over Q, K and V included, and at half as many keys slower
// (docs/history/PERFORMANCE-sessions-16-33.md,
// "FP8 at head dims up to 64 on the f16 kernel after the upcast"). Paged
// pools, seqused_k (a cache's capacity is not its keys: decode and kvcache calls) and short
// queries stay on the fp8 kernel: the copy of K / V would outweigh the attention.
#pragma once

#include <cstdint>

#include "common/problem.h"

namespace longattn::cuda {

inline bool fp8_upcast_faster(const detail::Problem& p) {
  const bool windowed = p.mask.windowed();
  if (!p.fp8 || p.dim_qk > 64 || p.dim_v > 64 || p.kv == detail::KvLayout::paged || p.has_seqused_k || windowed)
    return false;
  const int64_t visible = p.mask.causal ? p.max_seq_k - p.max_seq_q / 2 : p.max_seq_k;
  return p.max_seq_q >= 1024 && visible >= 1024;
}

}  // namespace longattn::cuda
