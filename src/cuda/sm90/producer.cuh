// The producer's load schedule: one thread (or, for paged K/V, a team of producer threads:
// paged_kv.cuh) issues the TMA loads of each tile in the consumers' order (consumer.cuh):
// Q; K[hi-1]; then for j = hi-2 .. lo: K[j], V[j+1]; finally V[lo]. Key blocks run from
// last to first so the masked blocks (key tail, causal diagonal) come first and the steady
// state runs without masks.
#pragma once

#include <cuda.h>

#include <cstdint>

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

  __device__ void load_q(int32_t b, int32_t h, int32_t m_block) {
    ptx::mbar_wait(sm.q_empty(qs.stage), qs.phase ^ 1u);
    ptx::mbar_arrive_expect_tx(sm.q_full(qs.stage), Smem::kQBytes);
    ptx::tma_load_5d(sm.q(qs.stage), tm_q, sm.q_full(qs.stage), 0,
                     int32_t(m_block * Cfg::kBlockM), 0, int32_t(h), int32_t(b));
    qs.advance();
  }
  __device__ void load_k(int32_t b, int32_t hk, int32_t n_block) {
    ptx::mbar_wait(sm.k_empty(ks.stage), ks.phase ^ 1u);
    ptx::mbar_arrive_expect_tx(sm.k_full(ks.stage), Smem::kKBytes);
    ptx::tma_load_5d(sm.k(ks.stage), tm_k, sm.k_full(ks.stage), 0,
                     int32_t(n_block * Cfg::kBlockN), 0, int32_t(hk), int32_t(b));
    ks.advance();
  }
  __device__ void load_v(int32_t b, int32_t hk, int32_t n_block) {
    ptx::mbar_wait(sm.v_empty(vs.stage), vs.phase ^ 1u);
    ptx::mbar_arrive_expect_tx(sm.v_full(vs.stage), Smem::kVBytes);
    ptx::tma_load_5d(sm.v(vs.stage), tm_v, sm.v_full(vs.stage), 0,
                     int32_t(n_block * Cfg::kBlockN), 0, int32_t(hk), int32_t(b));
    vs.advance();
  }
  // Feature kernel (ragged rows): the same loads at explicit token-row coordinates.
  // Packed GQA (Cfg::kPack, pack_gqa.h): h is the kv head and tm_q views Q as (dim, g heads,
  // tokens, kv heads, batch); a box of (64, g, kBlockM / g) per 64-column chunk lands as
  // that chunk's kBlockM rows in packed order (row = position x g + head), 128B-swizzled like
  // any box (the swizzle follows the shared-memory address).
  __device__ void load_q_row(int32_t b, int32_t h, int32_t row) {
    ptx::mbar_wait(sm.q_empty(qs.stage), qs.phase ^ 1u);
    ptx::mbar_arrive_expect_tx(sm.q_full(qs.stage), Smem::kQBytes);
    if constexpr (Cfg::kPack) {
#pragma unroll
      for (int c = 0; c < Cfg::kChunks; ++c)
        ptx::tma_load_5d(sm.q(qs.stage) + c * (Cfg::kBlockM * 128), tm_q, sm.q_full(qs.stage), c * Cfg::kChunkCols, 0,
                         row, h, b);
    } else {
      ptx::tma_load_5d(sm.q(qs.stage), tm_q, sm.q_full(qs.stage), 0, row, 0, h, b);
    }
    qs.advance();
  }
  __device__ void load_k_row(int32_t b, int32_t hk, int32_t row) {
    ptx::mbar_wait(sm.k_empty(ks.stage), ks.phase ^ 1u);
    ptx::mbar_arrive_expect_tx(sm.k_full(ks.stage), Smem::kKBytes);
    ptx::tma_load_5d(sm.k(ks.stage), tm_k, sm.k_full(ks.stage), 0, row, 0, hk, b);
    ks.advance();
  }
  __device__ void load_v_row(int32_t b, int32_t hk, int32_t row) {
    ptx::mbar_wait(sm.v_empty(vs.stage), vs.phase ^ 1u);
    ptx::mbar_arrive_expect_tx(sm.v_full(vs.stage), Smem::kVBytes);
    ptx::tma_load_5d(sm.v(vs.stage), tm_v, sm.v_full(vs.stage), 0, row, 0, hk, b);
    vs.advance();
  }
  __device__ void tile_rows(int32_t qb, int32_t kb, int32_t h, int32_t hk, int32_t q_row, int32_t k0,
                            int32_t lo, int32_t hi) {
    load_q_row(qb, h, q_row);
    if (hi <= lo) return;
    load_k_row(kb, hk, k0 + (hi - 1) * Cfg::kBlockN);
    for (int32_t j = hi - 2; j >= lo; --j) {
      load_k_row(kb, hk, k0 + j * Cfg::kBlockN);
      load_v_row(kb, hk, k0 + (j + 1) * Cfg::kBlockN);
    }
    load_v_row(kb, hk, k0 + lo * Cfg::kBlockN);
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
  __device__ void tile(int32_t b, int32_t h, int32_t hk, int32_t m_block, int32_t lo, int32_t hi) {
    load_q(b, h, m_block);
    if (hi <= lo) return;
    load_k(b, hk, hi - 1);
    for (int32_t j = hi - 2; j >= lo; --j) {
      load_k(b, hk, j);
      load_v(b, hk, j + 1);
    }
    load_v(b, hk, lo);
  }
};

}  // namespace longattn::cuda::sm90
