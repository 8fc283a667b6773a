// The warp-specialized sm90 forward kernel: roles and the consumer loop.
//
// Warpgroup 0 is the producer: it gives registers back (setmaxnreg) and one thread issues
// every TMA load (paged kernels: or a team of its threads shares a tile's boxes / cp.async
// pieces, page_math.h PagedMode). Warpgroups 1..kWGs are consumers, each owning 64 query rows: S = Q K^T
// (wgmma SS), online softmax in registers, O += P V (wgmma RS, P never leaves registers).
// Inside a consumer, S[j-1] is issued before P[j] V[j] and the softmax of S[j-1] runs while
// P[j] V[j] is in flight (FlashAttention-3 intra-warpgroup overlap).
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

#include "cuda/ptx/sync.cuh"
#include "cuda/ptx/tma.cuh"
#include "cuda/ptx/wgmma.cuh"
#include "cuda/sm90/epilogue.cuh"
#include "cuda/sm90/mainloop.cuh"
#include "cuda/sm90/mask.cuh"
#include "cuda/sm90/params.h"
#include "cuda/sm90/scheduler.cuh"
#include "cuda/sm90/smem_layout.cuh"
#include "cuda/sm90/softmax.cuh"
#include "cuda/sm90/tile_size.h"

namespace longattn::cuda::sm90 {

// kFeat_: the feature kernel (sinks, softcap, windows, chunks as run-time predicates); the
// dense kernels are instantiated with kFeat_ false and compile none of it. kRagged_ (with
// kFeat_): ragged batches / seqused_k, per-sequence starts and lengths read per tile.
// kPaged_ (with kRagged_): paged K/V; only the producer differs (it resolves each K/V
// tile's page from the page table), the consumers see the same shared-memory tiles.
// kHeadDimV_: v's head dim when it differs from q / k's (192 / 128; ragged kernels only).
// kPack_ (with kRagged_): packed GQA tiles (pack_gqa.h): a tile is (batch, kv head, packed
// q-block), its rows the g query heads of the kv head at kBlockM / g positions.
template <class T, int kHeadDim_, bool kCausalTile, int kVariant = 0, bool kFeat_ = false,
          bool kRagged_ = false, bool kPaged_ = false, int kHeadDimV_ = kHeadDim_, bool kPack_ = false>
struct KernelConfig {
  using Element = T;
  static constexpr bool kFeat = kFeat_;
  static constexpr bool kRagged = kFeat_ && kRagged_;
  static constexpr bool kPaged = kFeat_ && kRagged_ && kPaged_;
  static constexpr bool kPack = kFeat_ && kRagged_ && kPack_;
  static constexpr TileConfig kTile = kPaged    ? paged_tile(kHeadDim_, kHeadDimV_)
                                      : kRagged ? ragged_tile(kHeadDim_, kHeadDimV_)
                                      : kFeat_ ? feature_tile(kHeadDim_)
                                               : tile_config(kHeadDim_, kCausalTile, kVariant);
  static constexpr int kHeadDim = kHeadDim_, kHeadDimV = kHeadDimV_;
  // Paged producer-team modes (lanes / gather, page_math.h PagedMode) compiled in.
  static constexpr bool kPagedTeam = kPaged && paged_team_ok(kTile);
  static constexpr int kBlockM = kTile.block_m;
  static constexpr int kBlockN = kTile.block_n;
  static constexpr int kStages = kTile.stages;
  static constexpr int kQStages = kTile.q_stages;
  static constexpr int kWGs = kTile.consumer_wgs;
  static constexpr int kThreads = 128 * (kWGs + 1);
  using Smem = SmemLayout<kHeadDim, kBlockM, kBlockN, kStages, kQStages, kHeadDimV>;
  static constexpr int kSmemBytes = Smem::kBytes + 1024;  // + alignment slack
  // Dynamic tile assignment compiled in (used when FwdParams::tile_counter is set): the
  // kernels with the sectioned LPT schedule (scheduler.cuh DynamicTiles).
  // NOTES: not the three-warpgroup hdim-64 tile (consumers at 160 registers spilled 4 bytes).
  // Nor the wide non-causal dense tiles (the 128 x 176 consumer spilled 28 bytes): uniform
  // tiles gain nothing from it.
  // Nor the hdim-64 paged kernel: with the page read-ahead and the softcap modes it spilled
  // 8 bytes.
  static constexpr bool kDynamic = kTile.lpt_sections && kTile.consumer_wgs == 2 && (kCausalTile || kFeat_) &&
                                   !(kPaged && kHeadDim_ <= 64);
  static_assert(kBlockM == 64 * kWGs, "one consumer warpgroup per 64 query rows");
  static_assert(kBlockN % 16 == 0 && kHeadDim % 64 == 0 && kHeadDimV % 64 == 0, "wgmma k16 steps / 128B chunks");
  static_assert(kHeadDimV == kHeadDim || kRagged, "split head dims run the ragged kernels only");
  static_assert(!kPack || kHeadDimV == kHeadDim, "packed GQA: equal q / v head dims");
};

// Ping-pong between consumer warpgroups: a warpgroup issues its GEMMs only in its turn
// (named barrier 1 + wg) and then passes the turn on, so one warpgroup's softmax runs while
// the other's GEMMs occupy the tensor cores. Every warpgroup runs the same number of GEMM
// rounds (all work on the same tile), which keeps the turns aligned.
template <class Cfg>
struct PingPong {
  bool on;
  int wg;
  __device__ void init() const {
    if (on && wg == Cfg::kWGs - 1) ptx::named_arrive(1, 256);  // warpgroup 0 starts
  }
  __device__ void wait_turn() const {
    if (on) ptx::named_sync(1 + wg, 256);
  }
  __device__ void pass_turn() const {
    if (on) ptx::named_arrive(1 + (wg + 1) % Cfg::kWGs, 256);
  }
};

template <class Cfg>
__device__ __forceinline__ void consumer_loop(const FwdParams& p, typename Cfg::Smem sm, int wg,
                                              int tid) {
  constexpr int kNS = Cfg::kBlockN / 2, kNO = Cfg::kHeadDimV / 2, kNP = Cfg::kBlockN / 4;
  const int warp = tid / 32, lane = tid % 32;
  const int row0 = wg * 64 + warp * 16 + lane / 4;  // this thread's first row in the tile
  PipeState<Cfg::kStages> ks, vs;
  PipeState<Cfg::kQStages> qs;
  auto release = [&](uint64_t* bar) {
    if (lane == 0) ptx::mbar_arrive(bar);
  };
  const PingPong<Cfg> turn{p.pingpong && Cfg::kWGs > 1, wg};
  turn.init();
  // A K / V stage is ready: its full barrier completed. Paged gather (cp.async, generic proxy)
  // then needs a proxy fence before this thread's wgmmas read it (mainloop.cuh gather_paged).
  auto wait_full = [&](uint64_t* bar, uint32_t phase) {
    ptx::mbar_wait(bar, phase);
    if constexpr (Cfg::kPagedTeam) {
      if (p.paged_mode == kPagedGather) ptx::fence_proxy_async_smem();
    }
  };

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
    const TileCoord tc = TileScheduler::decode<Cfg::kRagged>(p, t);
    if (Cfg::kRagged && tc.b < 0) break;  // tile list padding: no more work
    // Logit scale of the feature kernel (log2 units), the softcap folded in.
    const float sl2 = p.feat_scale_log2;
    // Ragged kernel: this tile's sequence. A tile past its end visits no key block and
    // stores nothing (all its rows are clipped); it still takes its Q load. NOTES: skipping
    // it outright (`continue`, or a search loop for the next live tile) made the consumer
    // spill on some tiles.
    SeqCoord sc{0, 0, 0, 0};
    if constexpr (Cfg::kRagged) sc = seq_coord(p, tc.b);
    using Mask = TileMask<Cfg::kBlockM, Cfg::kBlockN, Cfg::kFeat, Cfg::kPack>;
    const Mask mask = [&] {
      if constexpr (Cfg::kRagged) {
        return Mask(p, tc.m_block, sc);
      } else {
        return Mask(p, tc.m_block);
      }
    }();
    const int64_t seq_q = Cfg::kRagged ? int64_t(sc.q_len) : p.seq_q;
    int64_t lo, hi;
    mask.block_range(seq_q, &lo, &hi);
    if constexpr (Cfg::kPack) {
      if (mask.m0 >= seq_q) lo = hi = 0;  // m0: the tile's first query position
    } else if constexpr (Cfg::kRagged) {
      if (int64_t(tc.m_block) * Cfg::kBlockM >= seq_q) lo = hi = 0;
    }
    if constexpr (!Cfg::kFeat) {
      if (p.kv_splits > 1) TileScheduler::split_range(p, tc.b, &lo, &hi);  // split-KV
    }
    // Element masks: dense kernels on blocks j >= j_mask (key tail, causal diagonal); the
    // feature kernel on every block outside [ja, ja + width) (unsigned compare, 32-bit:
    // fewer live registers in the hdim-256 consumer).
    const int64_t j_mask = Cfg::kFeat ? 0 : mask.first_masked_block();
    int32_t ja = 0;
    uint32_t width = 0;
    if constexpr (Cfg::kFeat) {
      int64_t a, b;
      mask.unmasked_blocks(seq_q, &a, &b);
      ja = int32_t(a);
      width = b > a ? uint32_t(b - a) : 0u;
    }
    // Feature kernel: softcap on the raw logits, then the mask. The fused softcap modes
    // (softcap_mode.h) cap inside the softmax update instead, on blocks without an element
    // mask (tanh(-inf) = -1 would unmask a key); blocks with one take the split path.
    bool fused_cap = false;
    auto mask_s = [&](float(&s)[kNS], int64_t j) {
      if constexpr (Cfg::kFeat) {
        const bool edge = uint32_t(int32_t(j) - ja) >= width;
        fused_cap = p.softcap_in != 0.f && p.softcap_mode != kCapSplit && !edge;
        if (p.softcap_in != 0.f && !fused_cap) softcap(s, p.softcap_in);
        if (edge) mask.apply(s, j, row0, lane);
      } else {
        if (j >= j_mask) mask.apply(s, j, row0, lane);
      }
    };

    float o[kNO];
#pragma unroll
    for (int i = 0; i < kNO; ++i) o[i] = 0.f;
    // Fixed-max softcap modes (softcap_mode.h): bf16 kernels, not the three-warpgroup hdim-64
    // tile (its consumer, at 160 registers, spilled 16 bytes with them; the two-warpgroup
    // hdim-64 ragged tile has 232); elsewhere they run as their running-max counterpart.
    constexpr bool kRoomy = Cfg::kHeadDim > 64 || Cfg::kWGs == 2;
    constexpr bool kFixedOk = Cfg::kFeat && kRoomy && std::is_same_v<typename Cfg::Element, __nv_bfloat16>;
    // FMA-pipe exp2 variants (fixed8 / fixedx / fixedx8 / fixed8h / fused8): hdim <= 128, not
    // paged, not the three-warpgroup tile (spills, see update_softcapped; fused8 alone spilled 16
    // bytes there too).
    constexpr bool kPolyOk = Cfg::kHeadDim <= 128 && !Cfg::kPaged && kRoomy;
    constexpr bool kHalvesOk = kFixedOk && !Cfg::kRagged && Cfg::kHeadDim == 128 && Cfg::kBlockN == 128;
    OnlineSoftmax smx;
    smx.init();
    if constexpr (Cfg::kFeat) {
      if constexpr (Cfg::kPack) {  // the rows' own heads (tc.h is the kv head)
        if (p.sinks) {
          const int32_t gm = (1 << p.pack_shift) - 1, h0 = tc.h << p.pack_shift;
          smx.init_sink_rows(p.sinks[(h0 + (row0 & gm)) * p.sinks_stride] * p.sink_to_raw,
                             p.sinks[(h0 + ((row0 + 8) & gm)) * p.sinks_stride] * p.sink_to_raw, lane);
        }
      } else {
        if (p.sinks) smx.init_sink(p.sinks[tc.h * p.sinks_stride] * p.sink_to_raw, lane);
      }
      if (kFixedOk && p.softcap_in != 0.f && softcap_is_fixed(p.softcap_mode)) smx.fix_max(sl2);
    }
    float factor[2];
    auto softmax_update = [&](float(&s)[kNS]) -> bool {
      if constexpr (Cfg::kFeat) {
        if (fused_cap)
          return update_softcapped<kPolyOk, kFixedOk, kPolyOk>(smx, s, p.softcap_mode, p.softcap_in, sl2,
                                                                 p.rescale_threshold, factor);
        if (kFixedOk && p.softcap_in != 0.f && softcap_is_fixed(p.softcap_mode))  // capped, masked
          return smx.template update_fixed<0, false, 0>(s, 0.f, sl2, factor);
        return smx.update(s, sl2, p.rescale_threshold, factor);
      } else {
        return smx.update(s, p.scale_log2, p.rescale_threshold, factor);
      }
    };

    // Ragged kernel: a sequence's last key block may end inside its V tile (block hi - 1);
    // its rows past the end are cleared before the P.V that reads them (clear_tail_rows,
    // mainloop.cuh). Full tiles pay a compare. The dense kernels' K/V maps end at seq_k, so
    // TMA already fills their tails with zeros.
    auto clear_v_tail = [&] {
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

    const uint8_t* q_wg = sm.q(qs.stage) + wg * 64 * 128;  // 64-row slice of every Q chunk
    uint64_t* q_empty = sm.q_empty(qs.stage);
    ptx::mbar_wait(sm.q_full(qs.stage), qs.phase);
    qs.advance();
    if (hi > lo) {
      float s[kNS];
      uint32_t pf[kNP];
      int64_t j = hi - 1;
      wait_full(sm.k_full(ks.stage), ks.phase);
      turn.wait_turn();
      gemm_qk<Cfg>(s, q_wg, sm.k(ks.stage), uint32_t(p.k_grouped));
      turn.pass_turn();
      ptx::wgmma_wait<0>();
      ptx::pin(s);
      release(sm.k_empty(ks.stage));
      ks.advance();
      if (j == lo) release(q_empty);
      mask_s(s, j);
      softmax_update(s);
      ptx::acc_to_a_frag<typename Cfg::Element>(s, pf);
      bool rescale = false;  // O rescale owed by the last softmax, applied before the next P.V

      for (j = hi - 2; j >= lo; --j) {
        wait_full(sm.k_full(ks.stage), ks.phase);
        if (j == hi - 2) clear_v_tail();  // V[hi - 1], read by this iteration's P.V
        // Halves modes on a block without element mask: S as two commit groups, the softmax
        // of the first half while the second is on the tensor cores (groups: S lo, S hi, P.V).
        // A whole iteration of its own. NOTES: sharing the P.V issue and the waits with the
        // one-group path below made ptxas serialize every wgmma of the kernel (C7511, "ptxas
        // info", not a warning: check_sass counts it).
        if constexpr (kHalvesOk) {
          if (p.softcap_in != 0.f && softcap_halves(p.softcap_mode) && uint32_t(int32_t(j) - ja) < width) {
            turn.wait_turn();
            float sh[2][kNS / 2];  // own registers: aliasing s made ptxas serialize (C7511)
            gemm_qk_halves<Cfg>(sh[0], sh[1], q_wg, sm.k(ks.stage), uint32_t(p.k_grouped));
            if (rescale) rescale_rows(o, factor);
            ptx::mbar_wait(sm.v_full(vs.stage), vs.phase);
            gemm_pv<Cfg>(o, pf, sm.v(vs.stage), uint32_t(p.v_group_shift));
            turn.pass_turn();
            ptx::wgmma_wait<2>();
            ptx::pin(sh[0]);
            update_fixed_half(smx, sh[0], p.softcap_mode, p.softcap_in, sl2, factor);
            ptx::wgmma_wait<1>();
            ptx::pin(sh[1]);
            release(sm.k_empty(ks.stage));
            ks.advance();
            if (j == lo) release(q_empty);
            update_fixed_half(smx, sh[1], p.softcap_mode, p.softcap_in, sl2, factor);
            rescale = p.rescale_threshold <= 0.f;  // factor = 1: the fixed max never moves
            ptx::wgmma_wait<0>();
            ptx::pin(o);
            release(sm.v_empty(vs.stage));
            vs.advance();
#pragma unroll
            for (int i = 0; i < kNS / 4; ++i) {
              pf[i] = ptx::pack2<typename Cfg::Element>(sh[0][2 * i], sh[0][2 * i + 1]);
              pf[kNS / 4 + i] = ptx::pack2<typename Cfg::Element>(sh[1][2 * i], sh[1][2 * i + 1]);
            }
            continue;
          }
        }
        turn.wait_turn();
        gemm_qk<Cfg>(s, q_wg, sm.k(ks.stage), uint32_t(p.k_grouped));
        // Rescale O while S runs on the tensor cores (FlashAttention-3 order): O is not an
        // operand of any wgmma in flight here.
        if (rescale) rescale_rows(o, factor);
        wait_full(sm.v_full(vs.stage), vs.phase);
        gemm_pv<Cfg>(o, pf, sm.v(vs.stage), uint32_t(p.v_group_shift));
        turn.pass_turn();
        ptx::wgmma_wait<1>();
        ptx::pin(s);
        release(sm.k_empty(ks.stage));
        ks.advance();
        if (j == lo) release(q_empty);
        mask_s(s, j);
        const bool moved = softmax_update(s);
        rescale = moved || p.rescale_threshold <= 0.f;
        ptx::wgmma_wait<0>();
        ptx::pin(o);
        release(sm.v_empty(vs.stage));
        vs.advance();
        ptx::acc_to_a_frag<typename Cfg::Element>(s, pf);
      }
      if (rescale) rescale_rows(o, factor);
      wait_full(sm.v_full(vs.stage), vs.phase);
      if (lo == hi - 1) clear_v_tail();  // a single key block: V[lo] is V[hi - 1]
      turn.wait_turn();
      gemm_pv<Cfg>(o, pf, sm.v(vs.stage), uint32_t(p.v_group_shift));
      turn.pass_turn();
      ptx::wgmma_wait<0>();
      ptx::pin(o);
      release(sm.v_empty(vs.stage));
      vs.advance();
    } else {
      release(q_empty);
    }

    float inv[2], lse[2];
    if constexpr (Cfg::kFeat) {
      smx.finalize(sl2, inv, lse);
    } else {
      smx.finalize(p.scale_log2, inv, lse);
    }
    rescale_rows(o, inv);
    if constexpr (Cfg::kPack) {  // rows scattered back to (position, head)
      const SeqCoord e = seq_coord(p, tc.b);
      const int64_t pos0 = int64_t(e.q0) + int64_t(tc.m_block) * (Cfg::kBlockM >> p.pack_shift);
      store_packed(p, o, lse, tc.b, tc.h, pos0, row0, lane, int64_t(e.q0) + e.q_len);
    } else if constexpr (Cfg::kRagged) {  // rows of this sequence in the token dimension
      const SeqCoord e = seq_coord(p, tc.b);  // re-read: not held in registers through the loop
      const int64_t row = int64_t(e.q0) + tc.m_block * Cfg::kBlockM + row0;
      store_o(p, o, tc.b, tc.h, row, lane, int64_t(e.q0) + e.q_len);
      store_lse(p, lse, tc.b, tc.h, row, lane, int64_t(e.q0) + e.q_len);
    } else {
      const int64_t row = tc.m_block * Cfg::kBlockM + row0;
      store_o(p, o, tc.b, tc.h, row, lane, p.seq_q);
      store_lse(p, lse, tc.b, tc.h, row, lane, p.seq_q);
    }
  }
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    fwd_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
               const __grid_constant__ CUtensorMap tm_v, const __grid_constant__ FwdParams p) {
  extern __shared__ uint8_t smem_raw[];
  typename Cfg::Smem sm{reinterpret_cast<uint8_t*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023))};
  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;

  if (threadIdx.x == 0) {
    ptx::prefetch_tensor_map(&tm_q);
    ptx::prefetch_tensor_map(&tm_k);
    ptx::prefetch_tensor_map(&tm_v);
    for (int s = 0; s < Cfg::kQStages; ++s) {
      ptx::mbar_init(sm.q_full(s), 1);
      ptx::mbar_init(sm.q_empty(s), 4 * Cfg::kWGs);  // one arrival per consumer warp
    }
    // Full barriers: one arrival (the TMA's arm, with its bytes) or, for the paged gather,
    // one per producer thread (cp.async.mbarrier.arrive.noinc; mainloop.cuh gather_paged).
    const uint32_t fills = Cfg::kPagedTeam && p.paged_mode == kPagedGather ? uint32_t(paged_team(kPagedGather)) : 1u;
    for (int s = 0; s < Cfg::kStages; ++s) {
      ptx::mbar_init(sm.k_full(s), fills);
      ptx::mbar_init(sm.v_full(s), fills);
      ptx::mbar_init(sm.k_empty(s), 4 * Cfg::kWGs);
      ptx::mbar_init(sm.v_empty(s), 4 * Cfg::kWGs);
    }
    ptx::mbar_fence_init();
  }
  __syncthreads();

  if (wg == 0) {
    ptx::setmaxnreg_dec<Cfg::kTile.producer_regs>();
    // Paged kernels in the lanes / gather modes run the schedule on a team of producer threads
    // (page_math.h paged_team; each computes the same tiles, so no dynamic counter there).
    if (tid == 0 || (Cfg::kPagedTeam && tid < paged_team(p.paged_mode))) {
      Producer<Cfg> prod{&tm_q, &tm_k, &tm_v, sm};
      prod.tid = tid;
      for (int64_t k = 0;; ++k) {
        int64_t t;
        // Dynamic: the next id from the counter, published in the slot of the Q buffer its
        // load will use (prod.qs: every tile below makes exactly one Q load); at the end
        // (id -1 or list padding) the producer completes that buffer's q_full without a load.
        auto end_dynamic = [&] {
          if constexpr (Cfg::kDynamic) {
            if (p.tile_counter) ptx::mbar_arrive(sm.q_full(prod.qs.stage));
          }
        };
        if constexpr (Cfg::kDynamic) {
          if (p.tile_counter) {
            t = DynamicTiles<Cfg::kQStages>::take(p);
            DynamicTiles<Cfg::kQStages>{DynamicTiles<Cfg::kQStages>::slots()}.publish(
                int32_t(t), prod.qs.stage, prod.qs.phase, sm.q_empty(prod.qs.stage));
          } else {
            t = TileScheduler::tile_id<Cfg::kTile.lpt_sections>(p, k, gridDim.x, blockIdx.x);
          }
        } else {
          t = TileScheduler::tile_id<Cfg::kTile.lpt_sections>(p, k, gridDim.x, blockIdx.x);
        }
        if (t < 0) {
          end_dynamic();
          break;
        }
        const TileCoord tc = TileScheduler::decode<Cfg::kRagged>(p, t);
        if constexpr (Cfg::kRagged) {
          if (tc.b < 0) {  // tile list padding
            end_dynamic();
            break;
          }
          const SeqCoord sc = seq_coord(p, tc.b);
          const TileMask<Cfg::kBlockM, Cfg::kBlockN, true, Cfg::kPack> mask(p, tc.m_block, sc);
          int64_t lo, hi;
          mask.block_range(sc.q_len, &lo, &hi);
          if constexpr (Cfg::kPack) {
            if (mask.m0 >= sc.q_len) lo = hi = 0;  // past the sequence (see consumer)
          } else {
            if (tc.m_block * Cfg::kBlockM >= sc.q_len) lo = hi = 0;
          }
          // The first q row of the tile (packed: m0 is a position, tc.h the kv head, group 1);
          // written out at each call: a named local reordered the unpacked kernels' PTX.
          if constexpr (Cfg::kPaged) {
            prod.tile_paged(p, tc.b * int32_t(p.pt_stride_b),
                            p.cu_seqlens_q ? 0 : tc.b, tc.h, tc.h / int32_t(p.group),
                            Cfg::kPack ? sc.q0 + int32_t(mask.m0) : sc.q0 + tc.m_block * Cfg::kBlockM, sc.k_len,
                            int32_t(lo), int32_t(hi));
            continue;
          }
          // Ragged q / k: token-row coordinates from the sequence start, TMA batch 0.
          prod.tile_rows(p.cu_seqlens_q ? 0 : tc.b, p.cu_seqlens_k ? 0 : tc.b, tc.h, tc.h / int32_t(p.group),
                         Cfg::kPack ? sc.q0 + int32_t(mask.m0) : sc.q0 + tc.m_block * Cfg::kBlockM, sc.k0,
                         int32_t(lo), int32_t(hi));
        } else {
          const TileMask<Cfg::kBlockM, Cfg::kBlockN, Cfg::kFeat> mask(p, tc.m_block);
          int64_t lo, hi;
          mask.block_range(p.seq_q, &lo, &hi);
          int32_t b = tc.b;
          if (!Cfg::kFeat && p.kv_splits > 1) {  // split-KV: b is the split; one sequence
            TileScheduler::split_range(p, b, &lo, &hi);
            b = 0;
          }
          prod.tile(b, tc.h, tc.h / int32_t(p.group), tc.m_block, int32_t(lo), int32_t(hi));
        }
      }
      // The gather's last copies land (and arrive on their barriers) before the thread exits.
      if constexpr (Cfg::kPagedTeam) {
        if (p.paged_mode == kPagedGather) ptx::cp_async_wait_all();
      }
    }
  } else {
    ptx::setmaxnreg_inc<Cfg::kTile.consumer_regs>();
    consumer_loop<Cfg>(p, sm, wg - 1, tid);
  }
}

}  // namespace longattn::cuda::sm90
