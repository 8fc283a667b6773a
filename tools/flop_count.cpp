#include "flop_count.h"

#include <cstddef>

namespace longattn::tools {

int64_t visible_pairs(const detail::MaskRule& rule, int64_t seq_q, int64_t seq_k) {
  const int64_t off = rule.offset(seq_q, seq_k);
  int64_t pairs = 0;
  // One interval per query: O(seq_q), exact for every mask kind (causal, window, chunk).
  for (int64_t i = 0; i < seq_q; ++i) {
    int64_t lo = 0, hi = 0;
    detail::visible_range(rule, i + off, seq_k, &lo, &hi);
    pairs += hi - lo;
  }
  return pairs;
}

double attention_flops(const detail::MaskRule& rule, const std::vector<int64_t>& q_lens,
                       const std::vector<int64_t>& k_lens, int64_t heads_q, int64_t dim_qk,
                       int64_t dim_v) {
  double pairs = 0;
  for (std::size_t b = 0; b < q_lens.size(); ++b)
    pairs += static_cast<double>(visible_pairs(rule, q_lens[b], k_lens[b]));
  return pairs * static_cast<double>(heads_q) * 2.0 * static_cast<double>(dim_qk + dim_v);
}

}  // namespace longattn::tools
