// Paged K/V arithmetic shared by the host (plan.cpp, host tests) and the producer warp
// (paged_kv.cuh): the TMA box of a page size and a token's page by multiply-high.
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
// shared-memory address, so they land exactly as the one-box tile does
// (GpuPrimitives.TmaBoxRowsGiveTheOneBoxTile checks r = 1, 2, 4 bitwise, and the page-1 / 3 /
// 100 forward cases). Set to 3 to refuse page sizes that are not multiples of 8 (NotSupported
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

// How the paged producer fills a K/V tile whose page is shorter than the tile (FwdParams
// paged_mode; plan.cpp picks it, Overrides::paged_fill forces one):
//   kPagedTma: one producer thread issues every TMA box (2^box_shift rows x one 64-column
//     chunk). Pages that are multiples of the tile always take it (one TMA per tile).
//   kPagedLanes (default for boxes of kGatherBelowRows rows or more, under the tile): the
//     producer warp's 32 lanes issue the boxes of a tile side by side (lane i: boxes i,
//     i + 32, ...), lane 0 arming the full barrier first.
//   kPagedGather: the producer warpgroup's 128 threads copy the tile in 16-byte pieces with
//     cp.async into the 128B-swizzled layout TMA would give (gather_smem_offset), each thread
//     arriving once on the full barrier (cp.async.mbarrier.arrive.noinc).
// NOTES: the one-thread TMA path pays ~130 cycles per TMA whatever the box size: page 16 at
// hdim 128 is 32 TMAs per 128-key block against ~3150 cycles of tensor-core work. Measured
// (docs/PERFORMANCE.md): boxes of 16+ rows run fastest on the lanes, shorter boxes (pages
// 1, 3, 8, 24, 100) on the gather, where one-thread TMA fell to 0.05-0.18 of dense.
enum PagedMode : int { kPagedTma = 0, kPagedLanes = 1, kPagedGather = 2 };
constexpr int kGatherBelowRows = 16;

// Producer threads that run the schedule in a mode (thread 0 issues Q and the barriers' TMAs).
LONGATTN_PAGE_FN int paged_team(int mode) { return mode == kPagedGather ? 128 : mode == kPagedLanes ? 32 : 1; }

// The mode for boxes of 2^box_shift rows in a tile of block_n keys, in a kernel with the team
// modes (tile_size.h paged_team_ok; elsewhere kPagedTma).
inline int paged_mode_for(int box_shift, int block_n) {
  if ((1 << box_shift) >= block_n) return kPagedTma;
  return (1 << box_shift) < kGatherBelowRows ? kPagedGather : kPagedLanes;
}

// Byte offset inside a K/V stage of 16-byte unit `unit` (columns 8 unit .. 8 unit + 7) of key
// row `row`, as a 128B-swizzled TMA box (and the wgmma descriptors) lay it out: 64-column
// chunk c = unit / 8 at c x block_n x 128 bytes, the row's 128-byte line at row x 128, and the
// unit's place in the line XOR-ed with row % 8 (the swizzle is a function of the address
// bits inside each 1024-byte atom; stages and chunks start 1024-byte aligned).
LONGATTN_PAGE_FN uint32_t gather_smem_offset(uint32_t row, uint32_t unit, uint32_t block_n) {
  return (unit >> 3) * block_n * 128u + row * 128u + (((unit & 7u) ^ (row & 7u)) << 4);
}

// The gather's thread -> piece map (128 threads): thread t copies unit t % 8 of every 64-column
// chunk of rows t / 8 + 16 i, so 8 neighbouring threads read one row's 128 contiguous bytes
// of a chunk and a thread's swizzled unit (t % 8) ^ (row % 8) is the same in every row.
constexpr uint32_t kGatherRowStep = 16;
LONGATTN_PAGE_FN uint32_t gather_unit(uint32_t t) { return t & 7u; }
LONGATTN_PAGE_FN uint32_t gather_first_row(uint32_t t) { return t >> 3; }
// A warp's threads copy rows 4 w + q + 16 i (q < 4, i < block_n / 16): at most 32 rows, so
// each lane reads the page-table entry of one of them (gather_loader_row), once per tile and
// before the stage wait, and thread t takes its i-th row's page from lane
// gather_loader_lane(t, i) by shuffle: no dependent global read per row.
LONGATTN_PAGE_FN uint32_t gather_loader_row(uint32_t t) { return 4u * (t >> 5) + (t & 3u) + 16u * ((t & 31u) >> 2); }
LONGATTN_PAGE_FN uint32_t gather_loader_lane(uint32_t t, uint32_t i) { return ((t & 31u) >> 3) + 4u * i; }

// Step s (0 <= s < 2 (hi - lo)) of a tile's K / V loads in the consumers' order (producer.cuh):
// K[hi - 1]; then K[j], V[j + 1] for j = hi - 2 .. lo; finally V[lo].
struct KvStep {
  bool is_k;
  int32_t j;
};
LONGATTN_PAGE_FN KvStep kv_step(int32_t s, int32_t lo, int32_t hi) {
  const int32_t n = 2 * (hi - lo);
  const bool is_k = s == 0 || ((s & 1) && s != n - 1);
  return {is_k, is_k ? hi - 1 - (s + 1) / 2 : (s == n - 1 ? lo : hi - s / 2)};
}

}  // namespace longattn::cuda::sm90
