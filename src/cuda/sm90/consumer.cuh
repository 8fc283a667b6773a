// The consumer warpgroups' loop: each owns 64 query rows of the tile. S = Q K^T (wgmma SS),
// online softmax in registers, O += P V (wgmma RS, P never leaves registers). Inside a
// consumer, S[j-1] is issued before P[j] V[j] and the softmax of S[j-1] runs while P[j] V[j]
// is in flight (FlashAttention-3 intra-warpgroup overlap); between the two consumer
// warpgroups, GEMM turns alternate (ping-pong). fp8 dense_vt at hdim 128 (kLookahead) runs
// S one block further ahead, S[j-1] in flight while the softmax of S[j] runs, and no turns.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

#include "cuda/ptx/sync.cuh"
#include "cuda/ptx/tma.cuh"
#include "cuda/ptx/wgmma.cuh"
#include "cuda/sm90/epilogue.cuh"
#include "cuda/sm90/fp8.cuh"
#include "cuda/sm90/fp8_scale.h"
#include "cuda/sm90/gemm.cuh"
#include "cuda/sm90/page_math.h"
#include "cuda/sm90/params.h"
#include "cuda/sm90/pipeline.cuh"
#include "cuda/sm90/scheduler.cuh"
#include "cuda/sm90/softcap_mode.h"
#include "cuda/sm90/softmax.cuh"
#include "cuda/sm90/tail_rows.cuh"
#include "cuda/sm90/tile_work.cuh"

namespace longattn::cuda::sm90 {

// fp8 dense_vt at hdim 128 (V from global memory: no transposer): S one block ahead (two S
// buffers) and no GEMM turns.
template <class Cfg>
inline constexpr bool kLookahead = Cfg::kVtGlobal && Cfg::kHeadDim <= 128;

// Ping-pong between consumer warpgroups: a warpgroup issues its GEMMs only in its turn
// (named barrier 1 + wg) and then passes the turn on, so one warpgroup's softmax runs while
// the other's GEMMs occupy the tensor cores. Every warpgroup runs the same number of GEMM
// rounds (all work on the same tile), which keeps the turns aligned. Off with the lookahead:
// each warpgroup then keeps two GEMMs in flight under its own softmax, and both warpgroups'
// exp2 passes may run together (two warps per SM sub-partition fill the MUFU, which one warp
// alone does not: docs/PERFORMANCE.md, the exp2 probe).
template <class Cfg>
struct PingPong {
  int wg;
  static constexpr bool kOn = Cfg::kWGs > 1 && !kLookahead<Cfg>;
  __device__ void init() const {
    if (kOn && wg == Cfg::kWGs - 1) ptx::named_arrive(1, 256);  // warpgroup 0 starts
  }
  __device__ void wait_turn() const {
    if (kOn) ptx::named_sync(1 + wg, 256);
  }
  __device__ void pass_turn() const {
    if (kOn) ptx::named_arrive(1 + (wg + 1) % Cfg::kWGs, 256);
  }
};

// Tile stagger (kLookahead, two warpgroups; named barriers 1 and 2, which PingPong leaves
// unused there): without GEMM turns both warpgroups would start and end each tile together,
// their prologues and epilogues leaving the tensor pipe idle at once. Warpgroup 1 starts a
// tile only after warpgroup 0's first softmax of it (barrier 2), warpgroup 0 only after
// warpgroup 1's first softmax of the previous tile (barrier 1; init arrives for the first),
// so neither barrier's arrivals run a round ahead of its waits. Like PingPong's turns, one
// arrival is left over at exit. The same operations in both warpgroups, only the ids differ:
// with a branch on the warpgroup around the barriers the consumer spilled 64 bytes.
template <class Cfg>
struct TileStagger {
  int wg;
  static constexpr bool kOn = kLookahead<Cfg> && Cfg::kWGs == 2;
  __device__ void init() const {
    if (kOn && wg == 1) ptx::named_arrive(1, 256);
  }
  __device__ void tile_start() const {  // before the tile's first Q.K^T
    if (kOn) ptx::named_sync(1 + wg, 256);
  }
  __device__ void first_softmax_done() const {  // once per tile (a tile without keys too)
    if (kOn) ptx::named_arrive(2 - wg, 256);
  }
};

// fp8: the descales of a tile's (batch, kv head): {q x k, v}.
template <class Cfg>
__device__ __forceinline__ float2 tile_descales(const FwdParams& p, int32_t b, int32_t hk) {
  const float q = p.q_descale ? p.q_descale[b * p.qd_sb + hk * p.qd_sh] : 1.f;
  const float k = p.k_descale ? p.k_descale[b * p.kd_sb + hk * p.kd_sh] : 1.f;
  const float v = p.v_descale ? p.v_descale[b * p.vd_sb + hk * p.vd_sh] : 1.f;
  return make_float2(q * k, v);
}

template <class Cfg>
__device__ __forceinline__ void consumer_loop(const FwdParams& p, const CUtensorMap* tm_o, typename Cfg::Smem sm, int wg,
                                              int tid) {
  // A softcap: only in a kernel compiled for one (KernelConfig kCap). Without it the key-block
  // step has no softcap branch: each taken branch there (softcap before the mask, fused or
  // fixed cap in the update) jumped past a variant's code, and at the landing the warp waited
  // for an instruction fetch (docs/PERFORMANCE.md, "The feature kind's step without softcap
  // branches"). Read from the params at each use: a bool held through the loop cost the
  // hdim-256 consumer a register (it spilled).
  auto capped = [&] { return Cfg::kCap && p.softcap_in != 0.f; };
  // P fragments: 16-bit P packs 2 per register, fp8 P 4.
  constexpr int kNS = Cfg::kBlockN / 2, kNO = Cfg::kHeadDimV / 2, kNP = Cfg::kBlockN / (Cfg::kFp8 ? 8 : 4);
  // Two P buffers (see the main loop) where S, O and both fit in registers with 40 to spare.
  // NOTES: with two, the paged bf16 hdim-128 consumers spilled 152-220 bytes, hdim 256
  // 132-158 and 192 / 128 12; the hdim-64 192 x 128 tile kept its registers by serializing
  // every wgmma (ptxas C7512). Not fp8: two buffers lost there (docs/PERFORMANCE.md).
  constexpr bool kDoubleP =
      !Cfg::kFp8 && !Cfg::kPaged && Cfg::kHeadDim <= 128 && kNS + kNO + 2 * kNP <= Cfg::kTile.consumer_regs - 40;
  const int warp = tid / 32, lane = tid % 32;
  const int row0 = wg * 64 + warp * 16 + lane / 4;  // this thread's first row in the tile
  PipeState<Cfg::kStages> ks, vs;
  PipeState<Cfg::kQStages> qs;
  auto release = [&](uint64_t* bar) {
    if (lane == 0) ptx::mbar_arrive(bar);
  };
  const PingPong<Cfg> turn{wg};
  turn.init();
  // O through shared memory (KernelConfig kOTma, FwdParams::o_tma; read at each use). A
  // warpgroup writes its O into its own 64-row slice of the tile's Q buffer (its Q.K^T reads
  // are done), and thread 0 stores it with TMA. The buffer's q_empty arrivals then come
  // after the epilogue, and thread 0's only after its store has read the slice: deferred
  // into the next tile, after that tile's first Q.K^T is issued (o_pending), so nobody waits
  // for the store. The producer loads into this buffer again two tiles later.
  // kOBuf (tile_size.h o_own_buffer): O has a buffer of its own and Q's arrivals come as
  // without TMA stores; the warpgroup's next epilogue waits (thread 0, then its named
  // barrier) until the previous store has read the slice, a tile later, so that wait is
  // normally already over.
  auto o_tma = [&] { return Cfg::kOTma && p.o_tma; };
  auto o_in_q = [&] { return !Cfg::kOBuf && o_tma(); };  // q_empty's arrivals deferred
  uint64_t* o_pending = nullptr;  // thread 0: q_empty owed once its last TMA store has read
  bool o_stored = false;          // thread 0 (kOBuf): a TMA store of O was issued
  auto settle_o = [&] {
    if constexpr (Cfg::kOTma) {
      if (o_pending) {
        ptx::bulk_wait_read<0>();
        ptx::mbar_arrive(o_pending);
        o_pending = nullptr;
      }
    }
  };
  // A K / V stage is ready: its full barrier completed. Paged gather (cp.async, generic proxy)
  // then needs a proxy fence before this thread's wgmmas read it (paged_kv.cuh team_load).
  auto wait_full = [&](uint64_t* bar, uint32_t phase) {
    ptx::mbar_wait(bar, phase);
    if constexpr (Cfg::kPagedTeam) {
      if (p.paged_mode == kPagedGather) ptx::fence_proxy_async_smem();
    }
  };
  // Fixed-max softcap (softcap_mode.h): bf16 kernels, not the three-warpgroup hdim-64 tile
  // (its consumer, at 160 registers, spilled 16 bytes with it); elsewhere the host sends
  // kCapFused. (fp8 P must stay below 448: never a fixed max.)
  constexpr bool kFixedOk = Cfg::kFeat && !Cfg::kFp8 && (Cfg::kHeadDim > 64 || Cfg::kWGs == 2) &&
                            std::is_same_v<typename Cfg::Element, __nv_bfloat16>;
  // softmax.cuh update: the rows in FlashAttention-3's order, but in the fp8 hdim-256 kind
  // (docs/history/PERFORMANCE-sessions-16-33.md, "The softmax in FA3's row order").
  constexpr bool kRowOrder = !(Cfg::kFp8 && Cfg::kHeadDim == 256);

  const TileStagger<Cfg> stagger{wg};
  stagger.init();
  for (int64_t k = 0;; ++k) {
    const int64_t t = [&]() -> int64_t {
      if constexpr (Cfg::kDynamic) {  // the id the producer published with this tile's Q
        if (p.tile_counter)
          return DynamicTiles<Cfg::kQStages>{DynamicTiles<Cfg::kQStages>::slots()}.next(qs.stage, qs.phase,
                                                                                        sm.q_full(qs.stage));
      }
      return TileScheduler::tile_id<Cfg::kTile.lpt_sections>(p, k, gridDim.x, blockIdx.x);
    }();
    if (t < 0) break;
    const TileCoord tc = TileScheduler::decode<Cfg::kList>(p, t);
    if (Cfg::kList && tc.b < 0) break;  // tile list padding: no more work
    const TileWork<Cfg> w = tile_work<Cfg>(p, tc);
    // fp8: the tile's descales fold into the logit scale (or the softcap's input scale) and
    // the final normalization; 1 (folded away) for 16-bit inputs.
    float dqk = 1.f, dv = 1.f;
    if constexpr (Cfg::kFp8) {
      const float2 d = tile_descales<Cfg>(p, w.kv_b, Cfg::kPack ? tc.h : int32_t(p.fd_group.div(uint32_t(tc.h))));
      dqk = d.x;
      dv = d.y;
    }
    // Logit scale of the feature kernel (log2 units), the softcap folded in.
    const float sl2 = capped() ? p.feat_scale_log2 : p.feat_scale_log2 * dqk;
    const float cap_in = p.softcap_in * dqk;
    const auto& mask = w.mask;
    const int64_t lo = w.lo, hi = w.hi;
    // Element masks: dense kernels on blocks j >= j_mask (key tail, causal diagonal); the
    // feature kernel on every block outside [ja, ja + width) (unsigned compare, 32-bit:
    // fewer live registers in the hdim-256 consumer).
    const int64_t j_mask = Cfg::kFeat ? 0 : mask.first_masked_block();
    int32_t ja = 0;
    uint32_t width = 0;
    if constexpr (Cfg::kFeat) {
      int64_t a, b;
      mask.unmasked_blocks(Cfg::kRagged ? int64_t(w.sc.q_len) : p.seq_q, &a, &b);
      ja = int32_t(a);
      width = b > a ? uint32_t(b - a) : 0u;
    }
    auto fixed_cap = [&] { return kFixedOk && capped() && p.softcap_mode == kCapFixed; };
    // Feature kernel: on blocks with an element mask, softcap on the raw logits, then the
    // mask (tanh(-inf) = -1 would unmask a key); elsewhere the softmax update caps.
    bool fused_cap = false;
    auto mask_s = [&](float(&s)[kNS], int64_t j) {
      if constexpr (Cfg::kFeat) {
        const bool edge = uint32_t(int32_t(j) - ja) >= width;
        fused_cap = capped() && !edge;
        if (capped() && edge) softcap(s, cap_in);
        if (edge) mask.apply(s, j, row0, lane);
      } else {
        if (j >= j_mask) mask.apply(s, j, row0, lane);
      }
    };

    float o[kNO];
#pragma unroll
    for (int i = 0; i < kNO; ++i) o[i] = 0.f;
    OnlineSoftmax<Cfg::kFp8 ? kFp8POffset : 0> smx;
    smx.init();
    if constexpr (Cfg::kFeat) {
      // A sink logit in the kernel's logit units (without softcap those carry the descales).
      const float to_raw = capped() ? p.sink_to_raw : p.sink_to_raw / dqk;
      if constexpr (Cfg::kPack) {  // the rows' own heads (tc.h is the kv head)
        if (p.sinks) {
          const int32_t gm = (1 << p.pack_shift) - 1, h0 = tc.h << p.pack_shift;
          smx.init_sink_rows(p.sinks[(h0 + (row0 & gm)) * p.sinks_stride] * to_raw,
                             p.sinks[(h0 + ((row0 + 8) & gm)) * p.sinks_stride] * to_raw, lane);
        }
      } else {
        if (p.sinks) smx.init_sink(p.sinks[tc.h * p.sinks_stride] * to_raw, lane);
      }
      if (fixed_cap()) smx.fix_max(sl2);
    }
    // S -> P fragments.
    auto to_p = [&](const float(&s)[kNS], uint32_t(&pf)[kNP]) {
      if constexpr (Cfg::kFp8) {
        acc_to_a_frag_fp8(s, pf);
      } else {
        ptx::acc_to_a_frag<typename Cfg::Element>(s, pf);
      }
    };
    float factor[2];
    // `pf` (not null): P's conversion into it, inside each softcap mode's branch: in one basic
    // block with the update, ptxas interleaves the conversion with the exp2s (the feature
    // kind's runtime mode branches had put all of it after them).
    auto softmax_update = [&](float(&s)[kNS], uint32_t(*pf)[kNP]) -> bool {
      bool moved;
      if constexpr (Cfg::kFeat) {
        if (fused_cap) {
          if (fixed_cap()) {
            moved = smx.template update_fixed<true>(s, p.softcap_in, sl2, factor);
          } else {
            moved = smx.update_capped(s, cap_in, sl2, p.rescale_threshold, factor);
          }
        } else if (fixed_cap()) {
          moved = smx.template update_fixed<false>(s, 0.f, sl2, factor);  // capped, masked
        } else {
          moved = smx.update(s, sl2, p.rescale_threshold, factor);
          if (pf) to_p(s, *pf);
          return moved;
        }
      } else {
        moved = smx.template update<kRowOrder>(s, p.scale_log2 * dqk, p.rescale_threshold, factor);
      }
      if (pf) to_p(s, *pf);
      return moved;
    };

    // Ragged kernel: a sequence's last key block may end inside its V tile (block hi - 1);
    // its rows past the end are cleared before the P.V that reads them (tail_rows.cuh).
    // Full tiles pay a compare. The dense kernels' K/V maps end at seq_k, so TMA already
    // fills their tails with zeros.
    auto clear_v_tail = [&] {
      if constexpr (Cfg::kFp8) return;  // the V transposer wrote zeros there (fp8.cuh)
      if constexpr (Cfg::kPagedTeam) {  // gathered V: the copies zero-filled the tail rows
        if (p.paged_mode == kPagedGather) return;
      }
      if constexpr (Cfg::kRagged) {
        const int32_t n = mask.sk - int32_t(hi - 1) * Cfg::kBlockN;
        if (n < Cfg::kBlockN) {
          wait_full(sm.v_full(vs.stage), vs.phase);
          clear_tail_rows<Cfg>(sm.v(vs.stage), n, wg * 128 + tid, uint32_t(p.v_group_shift));
        }
      }
    };

    // O += P V from the stage P V reads (fp8: Vt; fp8.cuh).
    auto pv = [&](float(&o)[kNO], const uint32_t(&pf)[kNP]) {
      if constexpr (Cfg::kFp8) {
        gemm_pv_fp8<Cfg>(o, pf, sm.pv(vs.stage));
      } else {
        gemm_pv<Cfg>(o, pf, sm.v(vs.stage), uint32_t(p.v_group_shift));
      }
    };

    uint8_t* q_wg = sm.q(qs.stage) + wg * 64 * 128;  // 64-row slice of every Q chunk (o_tma: O's too)
    uint64_t* q_empty = sm.q_empty(qs.stage);
    ptx::mbar_wait(sm.q_full(qs.stage), qs.phase);
    qs.advance();
    if constexpr (kLookahead<Cfg>) {
      // Q K^T one block ahead (two S buffers): a step issues P.V and the next block's Q K^T
      // (the turn calls are no-ops here: PingPong) and runs this block's softmax under both.
      // Every path keeps the same wgmma groups in flight at each point, and none from one step
      // into the next: where that differed (a runtime-conditional second Q K^T), ptxas
      // serialized every wgmma (C7514).
      float sa[kNS], sb[kNS];
      uint32_t pf[kNP];
      auto issue_qk = [&](float(&s_out)[kNS]) -> uint32_t {
        wait_full(sm.k_full(ks.stage), ks.phase);
        gemm_qk<Cfg>(s_out, q_wg, sm.k(ks.stage), uint32_t(p.k_grouped));
        const uint32_t st = ks.stage;
        ks.advance();
        return st;
      };
      auto issue_pv = [&]() -> uint32_t {  // O += P V from the next Vt stage
        wait_full(sm.pv_full(vs.stage), vs.phase);
        pv(o, pf);
        const uint32_t v_stage = vs.stage;
        vs.advance();
        return v_stage;
      };
      const int32_t lo32 = int32_t(lo);
      uint32_t k_cur = 0;  // the K stage of the block whose softmax runs next
      auto softmax_block = [&](int32_t jj, float(&s_cur)[kNS]) -> bool {  // S[jj] complete
        ptx::pin(s_cur);
        release(sm.k_empty(k_cur));
        if (jj == lo32 && !o_in_q()) release(q_empty);
        mask_s(s_cur, jj);
        return softmax_update(s_cur, nullptr);
      };
      auto finish_block = [&](float(&s_cur)[kNS], uint32_t v_stage, bool moved) {  // the P.V complete
        ptx::pin(o);
        release(sm.pv_empty(v_stage));
        if (moved || p.rescale_threshold <= 0.f) rescale_rows(o, factor);
        to_p(s_cur, pf);
      };
      // Block jj (> lo), its S in s_cur: O += P[jj + 1] V[jj + 1], S[jj - 1] into s_next.
      auto step = [&](int32_t jj, float(&s_cur)[kNS], float(&s_next)[kNS]) {
        turn.wait_turn();
        const uint32_t v_stage = issue_pv();
        const uint32_t k_next = issue_qk(s_next);
        turn.pass_turn();
        const bool moved = softmax_block(jj, s_cur);
        ptx::wgmma_wait<1>();  // the P.V
        finish_block(s_cur, v_stage, moved);
        ptx::wgmma_wait<0>();  // S[jj - 1]: it had the whole softmax to complete
        ptx::pin(s_next);
        k_cur = k_next;
      };
      auto step_last = [&](float(&s_cur)[kNS]) {  // block lo: O += P[lo + 1] V[lo + 1]
        turn.wait_turn();
        const uint32_t v_stage = issue_pv();
        turn.pass_turn();
        const bool moved = softmax_block(lo32, s_cur);
        ptx::wgmma_wait<0>();
        finish_block(s_cur, v_stage, moved);
      };
      stagger.tile_start();
      if (hi - 1 == lo) {  // one block
        turn.wait_turn();
        k_cur = issue_qk(sa);
        turn.pass_turn();
        settle_o();
        ptx::wgmma_wait<0>();
        softmax_block(lo32, sa);  // O is still zero: no rescale
        to_p(sa, pf);
        stagger.first_softmax_done();
      } else if (hi > lo) {
        turn.wait_turn();
        k_cur = issue_qk(sa);                    // S[hi - 1]
        const uint32_t k_second = issue_qk(sb);  // S[hi - 2]
        turn.pass_turn();
        settle_o();
        ptx::wgmma_wait<1>();
        softmax_block(int32_t(hi - 1), sa);
        to_p(sa, pf);
        ptx::wgmma_wait<0>();
        ptx::pin(sb);
        stagger.first_softmax_done();
        k_cur = k_second;
        int32_t jj = int32_t(hi) - 2;  // its S is in sb
        for (;;) {
          if (jj == lo32) {
            step_last(sb);
            break;
          }
          step(jj--, sb, sa);
          if (jj == lo32) {
            step_last(sa);
            break;
          }
          step(jj--, sa, sb);
        }
      }
      if (hi > lo) {  // the last P.V: P[lo]
        turn.wait_turn();
        wait_full(sm.pv_full(vs.stage), vs.phase);
        pv(o, pf);
        turn.pass_turn();
        ptx::wgmma_wait<0>();
        ptx::pin(o);
        release(sm.pv_empty(vs.stage));
        vs.advance();
      } else {
        stagger.first_softmax_done();  // no key block: nothing to wait for
        settle_o();
        if (!o_in_q()) release(q_empty);
      }
    } else if (hi > lo) {
      // P is double-buffered (pa, pb; kDoubleP): the P V in flight reads one buffer while the
      // softmax of the next block writes the other. With one buffer the conversion has to wait
      // for that P V, and ptxas hoists the wait above the whole softmax (to interleave the
      // conversions with the exp2s): the softmax then no longer overlaps this warpgroup's P V.
      // With two, a step waits for the previous P V only after issuing its own Q K^T.
      float s[kNS];
      uint32_t pa[kNP], pb[kNP];
      // The buffer the first step (and every second one after it) writes; pa with one buffer.
      uint32_t(&p_second)[kNP] = *(kDoubleP ? &pb : &pa);
      int64_t j = hi - 1;
      // Dense kinds: the first block's mask limits (the causal diagonal or the key tail,
      // when j >= j_mask), before the wait for K (a loop: ptxas keeps them on this side of
      // it, off the path from S to the softmax; placed after the Q.K^T they were scheduled
      // after the wait for S).
      int32_t lim[2] = {0, 0};
      if constexpr (!Cfg::kFeat) mask.dense_limits(j, row0, lane, lim);
      wait_full(sm.k_full(ks.stage), ks.phase);
      turn.wait_turn();
      gemm_qk<Cfg>(s, q_wg, sm.k(ks.stage), uint32_t(p.k_grouped));
      turn.pass_turn();
      settle_o();  // the previous tile's O store, while this Q.K^T runs
      ptx::wgmma_wait<0>();
      ptx::pin(s);
      if constexpr (kernel_dense(Cfg::kKind)) {  // the probe: this tile's first S is ready (params.h)
        if (p.cta_clock && tid == 0 && wg < 2 && k < kCtaClockTiles)
          reinterpret_cast<uint32_t*>(p.cta_clock + cta_clock_tile(blockIdx.x, k) + 3)[wg] = uint32_t(ptx::global_timer());
      }
      release(sm.k_empty(ks.stage));
      ks.advance();
      if (j == lo && !o_in_q()) release(q_empty);
      if constexpr (Cfg::kFeat) {
        mask_s(s, j);
      } else {
        if (j >= j_mask) mask.apply_limits(s, lim);
      }
      softmax_update(s, &pa);
      bool rescale = false;  // O rescale owed by the last softmax, applied before the next P.V
      bool pv_pending = false;  // a P.V is in flight; its V stage (v_done) is released after it
      uint32_t v_done = 0;
      auto finish_pv = [&] {  // the P.V in flight (if any) has completed: O and its P are free
        if (pv_pending) {
          ptx::pin(o);
          release(sm.pv_empty(v_done));
        }
      };
      // One key block j: S = Q K[j]^T, O += P_in V[j + 1], then P_out = softmax(S).
      auto step = [&](int64_t jj, uint32_t(&p_in)[kNP], uint32_t(&p_out)[kNP]) {
        wait_full(sm.k_full(ks.stage), ks.phase);
        if (jj == hi - 2) clear_v_tail();  // V[hi - 1], read by this step's P.V
        turn.wait_turn();
        gemm_qk<Cfg>(s, q_wg, sm.k(ks.stage), uint32_t(p.k_grouped));
        ptx::wgmma_wait<1>();  // the previous step's P.V (kDoubleP; else only S is in flight)
        finish_pv();
        // Rescale O while S runs on the tensor cores (FlashAttention-3 order).
        if (rescale) rescale_rows(o, factor);
        wait_full(sm.pv_full(vs.stage), vs.phase);
        pv(o, p_in);
        turn.pass_turn();
        v_done = vs.stage;
        vs.advance();
        pv_pending = true;
        ptx::wgmma_wait<1>();  // S
        ptx::pin(s);
        release(sm.k_empty(ks.stage));
        ks.advance();
        if (jj == lo && !o_in_q()) release(q_empty);
        mask_s(s, jj);
        bool moved;
        if constexpr (kDoubleP) {
          moved = softmax_update(s, &p_out);
        } else {  // one buffer: the P.V reading it completes first
          moved = softmax_update(s, nullptr);
          ptx::wgmma_wait<0>();
          finish_pv();
          pv_pending = false;
          to_p(s, p_out);
        }
        rescale = moved || p.rescale_threshold <= 0.f;
      };
      // The last P.V, from the buffer holding the last block's P.
      auto last_pv = [&](uint32_t(&p_last)[kNP]) {
        ptx::wgmma_wait<0>();
        finish_pv();
        if (rescale) rescale_rows(o, factor);
        wait_full(sm.pv_full(vs.stage), vs.phase);
        if (lo == hi - 1) clear_v_tail();  // a single key block: V[lo] is V[hi - 1]
        turn.wait_turn();
        pv(o, p_last);
        turn.pass_turn();
        ptx::wgmma_wait<0>();
        ptx::pin(o);
        release(sm.pv_empty(vs.stage));
        vs.advance();
      };
      // Unrolled by two so that both buffers are named statically (registers, not memory).
      bool last_in_b = false;
      for (j = hi - 2; j >= lo; j -= 2) {
        step(j, pa, p_second);
        if (j - 1 < lo) {
          last_in_b = true;
          break;
        }
        step(j - 1, p_second, pa);
      }
      if (last_in_b) {
        last_pv(p_second);
      } else {
        last_pv(pa);
      }
    } else {
      settle_o();
      if (!o_in_q()) release(q_empty);
    }

    float inv[2], lse[2];
    if constexpr (Cfg::kFeat) {
      smx.finalize(sl2, inv, lse);
    } else {
      smx.finalize(p.scale_log2 * dqk, inv, lse);
    }
    if constexpr (Cfg::kFp8) {
      inv[0] *= dv;
      inv[1] *= dv;
    }
    rescale_rows(o, inv);
    if constexpr (Cfg::kPack) {  // rows scattered back to (position, head)
      const SeqCoord e = seq_coord(p, tc.b);
      const int64_t pos0 = int64_t(e.q0) + int64_t(tc.m_block) * (Cfg::kBlockM >> p.pack_shift);
      store_packed<Cfg::kColMaps>(p, o, lse, tc.b, tc.h, pos0, row0, lane, int64_t(e.q0) + e.q_len);
    } else if constexpr (Cfg::kRagged) {  // rows of this sequence in the token dimension
      const SeqCoord e = seq_coord(p, tc.b);  // re-read: not held in registers through the loop
      const int64_t row = int64_t(e.q0) + tc.m_block * Cfg::kBlockM + row0;
      store_o<Cfg::kColMaps>(p, o, tc.b, tc.h, row, lane, int64_t(e.q0) + e.q_len);
      store_lse(p, lse, tc.b, tc.h, row, lane, int64_t(e.q0) + e.q_len);
    } else {
      const int64_t row = tc.m_block * Cfg::kBlockM + row0 - p.q_shift;  // the memory row
      if (o_tma()) {
        if constexpr (Cfg::kOTma) {
          // o_wg: this warpgroup's rows of every 64-column chunk; chunks kBlockM x 128 bytes apart.
          uint8_t* o_wg = Cfg::kOBuf ? sm.o() + wg * 64 * 128 : q_wg;
          if constexpr (Cfg::kOBuf) {  // the previous tile's store has read o_wg
            if (tid == 0) ptx::bulk_wait_read<0>();
            ptx::named_sync(ptx::kBarOStore + wg, 128);
          }
          if constexpr (Cfg::kFp8) {  // O in the output's type (launch_args.cpp: bf16 or f16)
            if (p.out_type == OutType::bf16) {
              store_o_smem<__nv_bfloat16>(o, o_wg, Cfg::kBlockM * 128, warp, lane);
            } else {
              store_o_smem<__half>(o, o_wg, Cfg::kBlockM * 128, warp, lane);
            }
          } else {
            store_o_smem<typename Cfg::Element>(o, o_wg, Cfg::kBlockM * 128, warp, lane);
          }
          ptx::fence_proxy_async_smem();  // each writer: its stores -> the TMA store's reads
          ptx::named_sync(ptx::kBarOStore + wg, 128);
          // Rows past seq_q: clipped by the map. (q_shift calls store directly: a TMA store at a
          // negative row faulted; launch_args.cpp encode_out_map.)
          if (tid == 0) {
            constexpr int kOChunks = Cfg::kHeadDimV * 2 / 128;  // 16-bit O: 64 columns a chunk
#pragma unroll
            for (int c = 0; c < kOChunks; ++c) {
              const bool cols = Cfg::kColMaps && p.col_maps;  // chunk c at column c x 64
              ptx::tma_store_5d(tm_o, o_wg + c * (Cfg::kBlockM * 128), cols ? c * 64 : 0,
                                tc.m_block * Cfg::kBlockM + wg * 64 - p.q_shift, cols ? 0 : c, tc.h, tc.b);
            }
            ptx::bulk_commit();
            if constexpr (Cfg::kOBuf) {
              o_stored = true;
            } else {
              o_pending = q_empty;
            }
          } else if (!Cfg::kOBuf) {
            release(q_empty);
          }
        }
      } else {
        store_o<Cfg::kColMaps>(p, o, tc.b, tc.h, row, lane, p.seq_q - p.q_shift);
      }
      store_lse(p, lse, tc.b, tc.h, row, lane, p.seq_q - p.q_shift);
    }
    if constexpr (kernel_dense(Cfg::kKind)) {  // the diagnostic probe: this tile's end (params.h)
      if (p.cta_clock && tid == 0 && wg < 2 && k < kCtaClockTiles) {
        unsigned long long* e = p.cta_clock + cta_clock_tile(blockIdx.x, k);
        e[wg] = ptx::global_timer();
        // The tile's coordinates, live here for the O store; its key-block range is not (a
        // probe must not hold registers through the loop).
        if (wg == 0) e[2] = (uint64_t(uint32_t(tc.b)) << 32) | (uint64_t(uint32_t(tc.h)) << 16) | uint64_t(uint32_t(tc.m_block));
      }
    }
  }
  // The last store has read its shared memory before the CTA's shared memory goes; the global
  // writes complete on their own (the grid's end orders them for the host).
  if constexpr (Cfg::kOTma) {
    if (o_pending || o_stored) ptx::bulk_wait_read<0>();
  }
  if constexpr (kernel_dense(Cfg::kKind)) {  // the diagnostic probe (params.h cta_clock)
    if (p.cta_clock && tid == 0) p.cta_clock[kCtaClockSlots * size_t(blockIdx.x) + 2 + wg] = ptx::global_timer();
  }
}

}  // namespace longattn::cuda::sm90
