// The producer's load schedule: one thread (or, for paged K/V, a team of producer threads:
// paged_kv.cuh) issues the TMA loads of each tile in the consumers' order (consumer.cuh):
// Q; K[hi-1]; then for j = hi-2 .. lo: K[j], V[j+1]; finally V[lo]. Key blocks run from
// last to first so the masked blocks (key tail, causal diagonal) come first and the steady
// state runs without masks.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "common/zigzag.h"
#include "cuda/ptx/sync.cuh"
#include "cuda/ptx/tma.cuh"
#include "cuda/sm90/params.h"
#include "cuda/sm90/pipeline.cuh"
#include "cuda/sm90/smem_layout.cuh"

namespace longattn::cuda::sm90 {

template <class Cfg>
struct Producer {
  using Smem = typename Cfg::Smem;
  const CUtensorMap* tm_q;
  const CUtensorMap* tm_k;
  const CUtensorMap* tm_v;
  Smem sm;
  PipeState<Cfg::kStages> ks, vs;
  PipeState<Cfg::kQStages> qs;
  // This thread in the paged producer team (page_math.h paged_team; 0 elsewhere): thread 0
  // loads Q and arms TMA barriers, the team shares a K/V tile's boxes or pieces.
  int tid = 0;
  // Column-addressed maps (FwdParams::col_maps: a head dim narrower than the kernel's): chunk
  // c is TMA coordinate 0 = c x kChunkCols, one load per chunk; else coordinate 2 = c, and a
  // box of every chunk is one load. Read from the params at each use (a register held for
  // it spilled the 24-register hdim-256 paged producer).
  static __device__ bool col_maps(const FwdParams& p) { return Cfg::kColMaps && p.col_maps; }
  static __device__ int32_t chunk_x(const FwdParams& p, int c) { return col_maps(p) ? c * Cfg::kChunkCols : 0; }
  static __device__ int32_t chunk_z(const FwdParams& p, int c) { return col_maps(p) ? 0 : c; }
  // One tile of `rows` rows with its kN chunks ([chunk][rows][128 B]) at (row, h, b).
  template <int kN>
  static __device__ void load_box(const FwdParams& p, uint8_t* dst, const CUtensorMap* tm, uint64_t* bar, int rows,
                                  int32_t row, int32_t h, int32_t b) {
    if (col_maps(p)) {
#pragma unroll
      for (int c = 0; c < kN; ++c) ptx::tma_load_5d(dst + c * (rows * 128), tm, bar, chunk_x(p, c), row, 0, h, b);
    } else {
      ptx::tma_load_5d(dst, tm, bar, 0, row, 0, h, b);
    }
  }

  __device__ void load_q(const FwdParams& p, int32_t b, int32_t h, int32_t m_block) {
    ptx::mbar_wait(sm.q_empty(qs.stage), qs.phase ^ 1u);
    ptx::mbar_arrive_expect_tx(sm.q_full(qs.stage), Smem::kQBytes);
    // Memory row = virtual row - q_shift (params.h): rows below 0 load as zeros.
    load_box<Cfg::kChunks>(p, sm.q(qs.stage), tm_q, sm.q_full(qs.stage), Cfg::kBlockM,
                           int32_t(m_block * Cfg::kBlockM) - p.q_shift, int32_t(h), int32_t(b));
    qs.advance();
  }
  // Zigzag context parallelism (params.h cp_chunk): key row `row` of the sequence at its
  // (rank, row) in the gathered shards (zigzag.h); the rank is the maps' batch coordinate. A
  // block never crosses a chunk (c is a multiple of kBlockN, plan.cpp).
  static __device__ __forceinline__ void kv_coord(const FwdParams& p, int32_t* row, int32_t* b) {
    if constexpr (!Cfg::kCp) return;
    if (p.cp_chunk == 0) return;
    uint32_t rank, r;
    detail::zigzag_key(uint32_t(*row), uint32_t(p.cp_chunk), uint32_t(p.cp_world), &rank, &r);
    *b = int32_t(rank);
    *row = int32_t(r);
  }
  __device__ void load_k(const FwdParams& p, int32_t b, int32_t hk, int32_t n_block) {
    ptx::mbar_wait(sm.k_empty(ks.stage), ks.phase ^ 1u);
    ptx::mbar_arrive_expect_tx(sm.k_full(ks.stage), Smem::kKBytes);
    int32_t row = int32_t(n_block * Cfg::kBlockN);
    kv_coord(p, &row, &b);
    load_box<Cfg::kChunks>(p, sm.k(ks.stage), tm_k, sm.k_full(ks.stage), Cfg::kBlockN, row, int32_t(hk), int32_t(b));
    ks.advance();
  }
  __device__ void load_v(const FwdParams& p, int32_t b, int32_t hk, int32_t n_block) {
    ptx::mbar_wait(sm.v_empty(vs.stage), vs.phase ^ 1u);
    ptx::mbar_arrive_expect_tx(sm.v_full(vs.stage), Smem::kVBytes);
    if constexpr (Cfg::kVtGlobal) {
      // tm_v maps Vt (batch, heads_kv, kHeadDimV rows, keys) column-addressed (fp8_vt.h): the
      // block's 128 keys of every row, [kHeadDimV rows][128 B], keys past the end zero-filled.
      // Context parallelism: Vt of the gathered shards, one (rank) batch each, as K and V.
      int32_t key = int32_t(n_block * Cfg::kBlockN);
      kv_coord(p, &key, &b);
      ptx::tma_load_5d(sm.v(vs.stage), tm_v, sm.v_full(vs.stage), key, 0, 0, hk, b);
    } else {
      int32_t row = int32_t(n_block * Cfg::kBlockN);
      kv_coord(p, &row, &b);
      load_box<Cfg::kChunksV>(p, sm.v(vs.stage), tm_v, sm.v_full(vs.stage), Cfg::kBlockN, row, int32_t(hk),
                              int32_t(b));
    }
    vs.advance();
  }
  // Feature kernel (ragged rows): the same loads at explicit token-row coordinates.
  // Packed GQA (Cfg::kPack, pack_gqa.h): h is the kv head and tm_q views Q as (dim, g heads,
  // tokens, kv heads, batch); a box of (64, g, kBlockM / g) per 64-column chunk lands as
  // that chunk's kBlockM rows in packed order (row = position x g + head), 128B-swizzled like
  // any box (the swizzle follows the shared-memory address).
  __device__ void load_q_row(const FwdParams& p, int32_t b, int32_t h, int32_t row) {
    ptx::mbar_wait(sm.q_empty(qs.stage), qs.phase ^ 1u);
    ptx::mbar_arrive_expect_tx(sm.q_full(qs.stage), Smem::kQBytes);
    if constexpr (Cfg::kPack) {
#pragma unroll
      for (int c = 0; c < Cfg::kChunks; ++c)
        ptx::tma_load_5d(sm.q(qs.stage) + c * (Cfg::kBlockM * 128), tm_q, sm.q_full(qs.stage), c * Cfg::kChunkCols, 0,
                         row, h, b);
    } else {
      load_box<Cfg::kChunks>(p, sm.q(qs.stage), tm_q, sm.q_full(qs.stage), Cfg::kBlockM, row, h, b);
    }
    qs.advance();
  }
  __device__ void load_k_row(const FwdParams& p, int32_t b, int32_t hk, int32_t row) {
    ptx::mbar_wait(sm.k_empty(ks.stage), ks.phase ^ 1u);
    ptx::mbar_arrive_expect_tx(sm.k_full(ks.stage), Smem::kKBytes);
    load_box<Cfg::kChunks>(p, sm.k(ks.stage), tm_k, sm.k_full(ks.stage), Cfg::kBlockN, row, hk, b);
    ks.advance();
  }
  __device__ void load_v_row(const FwdParams& p, int32_t b, int32_t hk, int32_t row) {
    ptx::mbar_wait(sm.v_empty(vs.stage), vs.phase ^ 1u);
    ptx::mbar_arrive_expect_tx(sm.v_full(vs.stage), Smem::kVBytes);
    load_box<Cfg::kChunksV>(p, sm.v(vs.stage), tm_v, sm.v_full(vs.stage), Cfg::kBlockN, row, hk, b);
    vs.advance();
  }
  __device__ void tile_rows(const FwdParams& p, int32_t qb, int32_t kb, int32_t h, int32_t hk, int32_t q_row, int32_t k0,
                            int32_t lo, int32_t hi) {
    load_q_row(p, qb, h, q_row);
    if (hi <= lo) return;
    load_k_row(p, kb, hk, k0 + (hi - 1) * Cfg::kBlockN);
    for (int32_t j = hi - 2; j >= lo; --j) {
      load_k_row(p, kb, hk, k0 + j * Cfg::kBlockN);
      load_v_row(p, kb, hk, k0 + (j + 1) * Cfg::kBlockN);
    }
    load_v_row(p, kb, hk, k0 + lo * Cfg::kBlockN);
  }

  // Paged K/V, defined in paged_kv.cuh.
  template <bool kIsK>
  __device__ __forceinline__ void grouped_box(const FwdParams& p, uint8_t* dst, const CUtensorMap* tm, uint64_t* full,
                                              int32_t row, int32_t hk, int32_t page);
  template <bool kIsK>
  __device__ __forceinline__ void load_paged(const FwdParams& p, int32_t pt_off, int32_t hk, uint32_t k_len,
                                             uint32_t j);
  __device__ __forceinline__ void team_load(const FwdParams& p, int32_t pt_off, int32_t hk, uint32_t k_len,
                                            uint32_t j, bool is_k);
  __device__ __forceinline__ void tile_paged(const FwdParams& p, int32_t pt_off, int32_t qb, int32_t h,
                                             int32_t hk, int32_t q_row, int32_t k_len, int32_t lo, int32_t hi);

  // All loads of one tile, in the consumers' order.
  __device__ void tile(const FwdParams& p, int32_t b, int32_t h, int32_t hk, int32_t m_block, int32_t lo, int32_t hi) {
    load_q(p, b, h, m_block);
    if (hi <= lo) return;
    load_k(p, b, hk, hi - 1);
    for (int32_t j = hi - 2; j >= lo; --j) {
      load_k(p, b, hk, j);
      load_v(p, b, hk, j + 1);
    }
    load_v(p, b, hk, lo);
  }
};

}  // namespace longattn::cuda::sm90
