// Mask-aware FLOP counting: what TFLOP/s figures are computed from.
#pragma once

#include <cstdint>
#include <vector>

#include "common/mask_rule.h"

namespace longattn::tools {

/// Exact number of visible (query, key) pairs of one sequence with `seq_q` queries and
/// `seq_k` keys under `rule`, using the library's own visibility rule (visible_range).
int64_t visible_pairs(const detail::MaskRule& rule, int64_t seq_q, int64_t seq_k);

/// FLOPs of one forward: per visible pair and query head, 2*dim_qk (Q·K) + 2*dim_v (P·V),
/// i.e. 4*d*pairs when dim_qk == dim_v. `q_lens` / `k_lens` are per-sequence lengths.
double attention_flops(const detail::MaskRule& rule, const std::vector<int64_t>& q_lens,
                       const std::vector<int64_t>& k_lens, int64_t heads_q, int64_t dim_qk,
                       int64_t dim_v);

}  // namespace longattn::tools
