// The one definition of key visibility, shared by every backend (host and device code).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define LONGATTN_HD __host__ __device__ __forceinline__
#else
#define LONGATTN_HD inline
#endif

namespace longattn::detail {

// Plain-old-data copy of longattn::Mask with the alignment offset resolved per sequence.
struct MaskRule {
  bool causal = false;
  bool top_left = false;
  int64_t window_left = -1;   // -1: unbounded
  int64_t window_right = -1;  // -1: unbounded
  int64_t chunk = 0;          // 0: off

  // Offset added to a query index to get its position in key coordinates.
  LONGATTN_HD int64_t offset(int64_t seq_q, int64_t seq_k) const {
    return top_left ? 0 : seq_k - seq_q;
  }
  // A window or a chunk bounds the visible keys (beyond what causal does).
  LONGATTN_HD bool windowed() const { return window_left >= 0 || window_right >= 0 || chunk > 0; }
  LONGATTN_HD bool any() const { return causal || windowed(); }
};

// Floor division for possibly negative numerators (positions left of key 0 under
// bottom-right alignment when seq_q > seq_k).
LONGATTN_HD int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// Is key j visible to the query at key-coordinate position p (= i + offset)?
LONGATTN_HD bool key_visible(const MaskRule& m, int64_t p, int64_t j) {
  if (m.causal && j > p) return false;
  if (m.window_left >= 0 && j < p - m.window_left) return false;
  if (m.window_right >= 0 && j > p + m.window_right) return false;
  if (m.chunk > 0 && floor_div(j, m.chunk) != floor_div(p, m.chunk)) return false;
  return true;
}

// Half-open range [lo, hi) of keys in [0, seq_k) that can be visible to position p.
// Every key outside it is masked; keys inside are visible (the rule is an interval).
LONGATTN_HD void visible_range(const MaskRule& m, int64_t p, int64_t seq_k, int64_t* lo,
                               int64_t* hi) {
  int64_t l = 0, h = seq_k;
  if (m.causal && p + 1 < h) h = p + 1;
  if (m.window_left >= 0 && p - m.window_left > l) l = p - m.window_left;
  if (m.window_right >= 0 && p + m.window_right + 1 < h) h = p + m.window_right + 1;
  if (m.chunk > 0) {
    int64_t c0 = floor_div(p, m.chunk) * m.chunk;
    if (c0 > l) l = c0;
    if (c0 + m.chunk < h) h = c0 + m.chunk;
  }
  if (h < l) h = l;
  *lo = l;
  *hi = h;
}

}  // namespace longattn::detail
