// Paged K/V in the producer (members of Producer, producer.cuh): each K/V tile's pages come
// from the page table, loaded as TMA boxes that never cross a page, by one thread or by the
// producer warp's lanes, or gathered with cp.async by the producer warpgroup (page_math.h
// PagedMode). The consumers see the same shared-memory tiles as elsewhere, except for the
// grouped K / V stage layouts (params.h k_grouped, v_group_shift) that gemm.cuh addresses.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "cuda/ptx/cp_async.cuh"
#include "cuda/ptx/sync.cuh"
#include "cuda/ptx/tma.cuh"
#include "cuda/sm90/page_math.h"
#include "cuda/sm90/params.h"
#include "cuda/sm90/producer.cuh"

namespace longattn::cuda::sm90 {

// Paged K/V, any page size: key block j is loaded as boxes of r = 2^box_shift rows (the
// largest power of two dividing the page size, at most kBlockN; page_math.h), so a box
// never crosses a page: token t = j kBlockN + i r lies in page page_table[b, t / page_size]
// at row t % page_size, the TMA batch coordinate of the rank-4 (num_pages, page_size,
// heads, dim) maps. r = kBlockN: one box holds every 64-column chunk (one TMA per tile, the
// page-multiple case); shorter boxes hold one chunk and land at row i r of each chunk.
// Boxes starting at or past the sequence's used keys are not loaded (their page-table
// entries need not exist); their rows keep stale data: K there is masked, V cleared by the
// consumers (clear_tail_rows). 128B swizzle is a function of the shared-memory address
// (rows repeat every 8 x 128 bytes), so boxes of any r give the one-box layout
// (test_primitives: TmaBoxRows). Entries are trusted (Args::check_page_table validates them
// first, on request). NOTES: the producer runs on few registers (tile_size.h); the page comes from a
// multiply-high (page_div), not a division, and the table offset is 32-bit (the host sends
// tables of fewer than 2^31 entries; the pointer and divisor stay in the parameter bank).
// One box of rows [row, row + r) of `page` with every chunk, into the grouped layout.
// V (params.h v_group_shift): the usual (64, rows, chunk, head, page) map, [chunk][r rows].
// K (params.h k_grouped): the row-group map (tensor_map.h row_groups: 64, 8 rows, chunk,
// 8-row group of the pool, head), [group][chunk][8 rows]; the pool's row of (page, row) is
// page x page_size + row (uniform pages, < 2^32 rows: plan.cpp).
template <class Cfg>
template <bool kIsK>
__device__ __forceinline__ void Producer<Cfg>::grouped_box(const FwdParams& p, uint8_t* dst, const CUtensorMap* tm, uint64_t* full,
                                            int32_t row, int32_t hk, int32_t page) {
  if constexpr (kIsK) {
    const uint32_t pool_row = uint32_t(page) * uint32_t(p.page_size) + uint32_t(row);
    ptx::tma_load_5d(dst, tm, full, 0, 0, 0, int32_t(pool_row >> 3), hk);
  } else {
    ptx::tma_load_5d(dst, tm, full, 0, row, 0, hk, page);
  }
}
template <class Cfg>
template <bool kIsK>
__device__ __forceinline__ void Producer<Cfg>::load_paged(const FwdParams& p, int32_t pt_off, int32_t hk, uint32_t k_len,
                                           uint32_t j) {
  PipeState<Cfg::kStages>& st = kIsK ? ks : vs;
  constexpr int kChunks = kIsK ? Cfg::kChunks : Cfg::kChunksV;
  const uint32_t t0 = j * Cfg::kBlockN, shift = uint32_t(p.box_shift), r = 1u << shift;
  const uint32_t rows = k_len - t0 < uint32_t(Cfg::kBlockN) ? k_len - t0 : uint32_t(Cfg::kBlockN);
  const uint32_t boxes = (rows + r - 1) >> shift;
  uint32_t pg = page_div(t0, p.page_magic, p.page_div_shift);
  uint32_t row = t0 - pg * uint32_t(p.page_size);
  // The first box's page is read before waiting for the free stage (its latency hides
  // behind the ring), each next one before the current box's TMAs are issued.
  int32_t page = __ldg(p.page_table + (pt_off + int32_t(pg)));
  ptx::mbar_wait(kIsK ? sm.k_empty(st.stage) : sm.v_empty(st.stage), st.phase ^ 1u);
  uint64_t* full = kIsK ? sm.k_full(st.stage) : sm.v_full(st.stage);
  uint8_t* dst = kIsK ? sm.k(st.stage) : sm.v(st.stage);
  const CUtensorMap* tm = kIsK ? tm_k : tm_v;
  ptx::mbar_arrive_expect_tx(full, (boxes << shift) * (kChunks * 128));
  if (r == uint32_t(Cfg::kBlockN)) {  // whole tile in one page: one box, every chunk
    load_box<kChunks>(p, dst, tm, full, Cfg::kBlockN, int32_t(row), hk, page);
  } else if (kIsK ? p.k_grouped != 0 : uint32_t(p.v_group_shift) == shift) {  // grouped: a box has every chunk
    for (uint32_t i = 0; i < boxes; ++i) {
      uint32_t next_row = row + r, next_pg = pg;
      if (next_row == uint32_t(p.page_size)) {
        next_row = 0;
        ++next_pg;
      }
      const int32_t next = i + 1 < boxes ? __ldg(p.page_table + (pt_off + int32_t(next_pg))) : 0;
      grouped_box<kIsK>(p, dst + (i << shift) * (kChunks * 128), tm, full, int32_t(row), hk, page);
      row = next_row;
      pg = next_pg;
      page = next;
    }
  } else {
    for (uint32_t i = 0; i < boxes; ++i) {
      uint32_t next_row = row + r, next_pg = pg;
      if (next_row == uint32_t(p.page_size)) {
        next_row = 0;
        ++next_pg;
      }
      const int32_t next = i + 1 < boxes ? __ldg(p.page_table + (pt_off + int32_t(next_pg))) : 0;
#pragma unroll
      for (int c = 0; c < kChunks; ++c)
        ptx::tma_load_5d(dst + c * (Cfg::kBlockN * 128) + ((i << shift) * 128), tm, full, chunk_x(p, c),
                         int32_t(row), chunk_z(p, c), hk, page);
      row = next_row;
      pg = next_pg;
      page = next;
    }
  }
  st.advance();
}
// The lanes / gather modes (page_math.h PagedMode; the producer team of paged_team
// threads runs this): one K or V tile, is_k at run time so each path is inlined once (with
// a copy per K / V call site the 56-register producer spilled).
//
// kPagedLanes (default for boxes of kGatherBelowRows rows or more, under the tile): the TMA
// boxes of load_paged, issued by the 32 lanes of the producer warp side by side (lane i:
// boxes i, i + 32, ...; each lane finds its page by multiply-high): the ~130 cycles per TMA
// are the issuing thread's, so lanes help (page_math.h). Lane 0 arms the full barrier with
// the tile's bytes before the warp issues any box.
//
// kPagedGather (default for boxes under kGatherBelowRows rows): the producer warpgroup's
// 128 threads copy the tile's rows in 16-byte pieces (cp.async, L2 only) to where the TMA
// box would put them (gather_smem_offset: the 128B swizzle), so the consumers' descriptors
// are unchanged. Thread t copies unit t % 8 of each chunk of rows t / 8 + 16 i: per 128 x
// 128 bf16 tile 16 copies per thread. Page-table entries: each lane reads one of its warp's
// 32 rows before the stage wait, the threads take theirs by shuffle (page_math.h
// gather_loader_row / gather_loader_lane). Rows at or past the sequence's used keys are not
// read (their page-table entries need not exist): K there is masked; V there is written
// with zeros by the same copies (zero-fill, no source bytes), so the consumers skip their
// clear_tail_rows for gathered V (consumer.cuh clear_v_tail) and no generic-proxy store of
// theirs meets these copies in the stage. Each thread then arrives once on the full
// barrier when its copies have landed (cp.async.mbarrier.arrive.noinc; the barrier expects
// 128 arrivals in this mode, kernel.cuh). NOTES: cp.async writes shared memory through the
// generic proxy and wgmma reads it through the async proxy, so every consumer thread runs
// fence.proxy.async after its full-barrier wait (consumer.cuh wait_full): the wait acquires
// the copies, the fence makes them visible to the wgmmas it issues next. The write-after-read order needs
// nothing new: a stage is released (empty barrier) only after the wgmmas reading it
// completed (wgmma wait), as for TMA writes.
template <class Cfg>
__device__ __forceinline__ void Producer<Cfg>::team_load(const FwdParams& p, int32_t pt_off, int32_t hk, uint32_t k_len,
                                          uint32_t j, bool is_k) {
  const int stage = is_k ? ks.stage : vs.stage;
  const uint32_t phase = is_k ? ks.phase : vs.phase;
  uint64_t* full = is_k ? sm.k_full(stage) : sm.v_full(stage);
  uint8_t* dst = is_k ? sm.k(stage) : sm.v(stage);
  const uint32_t t0 = j * Cfg::kBlockN;
  const uint32_t rows = k_len - t0 < uint32_t(Cfg::kBlockN) ? k_len - t0 : uint32_t(Cfg::kBlockN);
  uint64_t* empty = is_k ? sm.k_empty(stage) : sm.v_empty(stage);
  if (p.paged_mode == kPagedGather) {
    static_assert(Cfg::kBlockN % kGatherRowStep == 0 && Cfg::kBlockN / kGatherRowStep * 4 <= 32,
                  "a warp's rows: one page-table entry per lane");
    // This lane's entry for its warp (read before the stage wait: its latency hides there).
    const uint32_t lrow = gather_loader_row(uint32_t(tid));
    int32_t lpage = 0;
    if (lrow < rows) lpage = __ldg(p.page_table + (pt_off + int32_t(page_div(t0 + lrow, p.page_magic, p.page_div_shift))));
    ptx::mbar_wait(empty, phase ^ 1u);
    constexpr int kMaxChunks = Cfg::kChunks > Cfg::kChunksV ? Cfg::kChunks : Cfg::kChunksV;
    const int chunks = is_k ? Cfg::kChunks : Cfg::kChunksV;
    const uint32_t unit = gather_unit(uint32_t(tid)), r0 = gather_first_row(uint32_t(tid));
    const uint8_t* src0 = (is_k ? p.k_bytes : p.v_bytes) + int64_t(hk) * (is_k ? p.k_head_bytes : p.v_head_bytes) +
                          unit * 16;
    const int64_t page_bytes = is_k ? p.k_page_bytes : p.v_page_bytes;
    const int64_t row_bytes = is_k ? p.k_row_bytes : p.v_row_bytes;
    const uint32_t dst0 = ptx::smem_u32(dst);
    // NOTES: unrolled by 2 (fully unrolled the producer spilled at 56 registers). Every lane
    // runs every step (the shuffle needs the whole warp); rows past the keys copy nothing.
#pragma unroll 2
    for (uint32_t i = 0; i < uint32_t(Cfg::kBlockN / kGatherRowStep); ++i) {
      const int32_t page = __shfl_sync(0xffffffffu, lpage, int(gather_loader_lane(uint32_t(tid), i)));
      const uint32_t r = r0 + i * kGatherRowStep;
      const uint32_t d = dst0 + gather_smem_offset(r, unit, Cfg::kBlockN);
      if (r < rows) {
        const uint32_t t = t0 + r, pg = page_div(t, p.page_magic, p.page_div_shift);
        const uint8_t* src = src0 + int64_t(page) * page_bytes + int64_t(t - pg * uint32_t(p.page_size)) * row_bytes;
#pragma unroll
        for (int c = 0; c < kMaxChunks; ++c)
          if (c < chunks) ptx::cp_async_16(d + c * (Cfg::kBlockN * 128), src + c * 128);
      } else if (!is_k) {  // V rows past the keys: zeros, read from nowhere (see above)
#pragma unroll
        for (int c = 0; c < kMaxChunks; ++c)
          if (c < chunks) ptx::cp_async_16_zfill(d + c * (Cfg::kBlockN * 128), src0, 0u);
      }
    }
    ptx::cp_async_mbar_arrive_noinc(full);
  } else {  // kPagedLanes
    ptx::mbar_wait(empty, phase ^ 1u);
    const int chunks = is_k ? Cfg::kChunks : Cfg::kChunksV;
    const uint32_t shift = uint32_t(p.box_shift);
    const uint32_t boxes = (rows + (1u << shift) - 1) >> shift;
    const CUtensorMap* tm = is_k ? tm_k : tm_v;
    if (tid == 0) ptx::mbar_arrive_expect_tx(full, (boxes << shift) * uint32_t(chunks * 128));
    __syncwarp();
    // A box has every chunk (grouped K / V).
    const bool grouped = is_k ? p.k_grouped != 0 : uint32_t(p.v_group_shift) == shift;
    for (uint32_t i = uint32_t(tid); i < boxes; i += 32) {
      const uint32_t t = t0 + (i << shift), pg = page_div(t, p.page_magic, p.page_div_shift);
      const int32_t row = int32_t(t - pg * uint32_t(p.page_size));
      const int32_t page = __ldg(p.page_table + (pt_off + int32_t(pg)));
      if (grouped) {
        if (is_k) {
          grouped_box<true>(p, dst + (i << shift) * uint32_t(chunks * 128), tm, full, row, hk, page);
        } else {
          grouped_box<false>(p, dst + (i << shift) * uint32_t(chunks * 128), tm, full, row, hk, page);
        }
      } else {
        for (int c = 0; c < chunks; ++c)
          ptx::tma_load_5d(dst + c * (Cfg::kBlockN * 128) + ((i << shift) * 128), tm, full, chunk_x(p, c), row,
                           chunk_z(p, c), hk, page);
      }
    }
  }
  if (is_k) {
    ks.advance();
  } else {
    vs.advance();
  }
}

template <class Cfg>
__device__ __forceinline__ void Producer<Cfg>::tile_paged(const FwdParams& p, int32_t pt_off, int32_t qb, int32_t h,
                                           int32_t hk, int32_t q_row, int32_t k_len, int32_t lo, int32_t hi) {
  if (tid == 0) load_q_row(p, qb, h, q_row);
  if (hi <= lo) return;
  if constexpr (Cfg::kPagedTeam) {
    if (p.paged_mode != kPagedTma) {  // a producer team: one call site (team_load)
      for (int32_t s = 0; s < 2 * (hi - lo); ++s) {
        const KvStep st = kv_step(s, lo, hi);
        team_load(p, pt_off, hk, uint32_t(k_len), uint32_t(st.j), st.is_k);
      }
      return;
    }
  }
  load_paged<true>(p, pt_off, hk, uint32_t(k_len), uint32_t(hi - 1));
  for (int32_t j = hi - 2; j >= lo; --j) {
    load_paged<true>(p, pt_off, hk, uint32_t(k_len), uint32_t(j));
    load_paged<false>(p, pt_off, hk, uint32_t(k_len), uint32_t(j + 1));
  }
  load_paged<false>(p, pt_off, hk, uint32_t(k_len), uint32_t(lo));
}

}  // namespace longattn::cuda::sm90
