// Paged K/V arithmetic shared by the host (forward_sm90.cpp, host tests) and the producer
// warp (mainloop.cuh): the TMA box of a page size and a token's page by multiply-high.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define LONGATTN_PAGE_FN __host__ __device__ __forceinline__
#else
#define LONGATTN_PAGE_FN inline
#endif

namespace longattn::cuda::sm90 {

// log2 of the rows per TMA box for a page size: the largest power of two dividing the page
// size, at most the tile's key rows (a power of two). Boxes of that many rows, starting at
// multiples of it, never cross a page and tile a K/V tile exactly.
constexpr int box_shift_for(int64_t page_size, int block_n) {
  int s = 0;
  while ((int64_t(2) << s) <= block_n && page_size % (int64_t(2) << s) == 0) ++s;
  return s;
}

// Smallest box the paged producer issues (log2 rows). 0: every page size. NOTES: boxes of
// fewer than 8 rows start inside a 1024-byte swizzle atom; the swizzle is a function of the
// shared-memory address, so they land exactly as the one-box tile does (H200, 2026-11-22:
// GpuPrimitives.TmaBoxRowsGiveTheOneBoxTile bitwise for r = 1, 2, 4, and the page-1 / 3 / 100
// forward cases). Set to 3 to refuse page sizes that are not multiples of 8 (NotSupported
// naming page_table) should another device disagree.
constexpr int kMinBoxShift = 0;

// n / d for n < 2^31 and 1 <= d < 2^31 without a division (the producer thread has 40
// registers, and a division is a long dependent sequence per box): with l = ceil(log2 d)
// and m = floor(2^32 (2^l - d) / d) + 1, n / d = (mulhi(n, m) + n) >> l (Granlund and
// Montgomery 1994; n < 2^31 keeps the sum within 32 bits). d = 2^k gives m = 1.
struct PageDiv {
  uint32_t magic = 1, shift = 0;
};

inline PageDiv make_page_div(uint32_t d) {
  PageDiv r;
  while ((uint64_t(1) << r.shift) < d) ++r.shift;
  r.magic = uint32_t(((uint64_t(1) << 32) * ((uint64_t(1) << r.shift) - d)) / d + 1);
  return r;
}

LONGATTN_PAGE_FN uint32_t page_div(uint32_t n, uint32_t magic, uint32_t shift) {
#if defined(__CUDA_ARCH__)
  const uint32_t hi = __umulhi(n, magic);
#else
  const uint32_t hi = uint32_t((uint64_t(n) * magic) >> 32);
#endif
  return (hi + n) >> shift;
}

}  // namespace longattn::cuda::sm90
