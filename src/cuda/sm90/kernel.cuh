// The warp-specialized sm90 forward kernel: roles.
//
// Warpgroup 0 is the producer: it gives registers back (setmaxnreg) and one thread issues
// every TMA load (paged kernels: or a team of its threads shares a tile's boxes / cp.async
// pieces, page_math.h PagedMode; producer.cuh, paged_kv.cuh). Warpgroups 1..kWGs are the
// consumers (consumer.cuh). Both walk the same tiles (scheduler.cuh) and the same key blocks
// of each (tile_work.cuh).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "cuda/ptx/sync.cuh"
#include "cuda/ptx/tma.cuh"
#include "cuda/sm90/consumer.cuh"
#include "cuda/sm90/fp8.cuh"
#include "cuda/sm90/kernel_config.cuh"
#include "cuda/sm90/paged_kv.cuh"
#include "cuda/sm90/params.h"
#include "cuda/sm90/producer.cuh"
#include "cuda/sm90/scheduler.cuh"
#include "cuda/sm90/tile_work.cuh"

namespace longattn::cuda::sm90 {

// The producer's loop over its tiles (run by thread 0, or by the paged producer team).
template <class Cfg>
__device__ __forceinline__ void producer_loop(const FwdParams& p, Producer<Cfg>& prod, typename Cfg::Smem sm) {
  for (int64_t k = 0;; ++k) {
    int64_t t;
    // Dynamic: the next id from the counter, published in the slot of the Q buffer its load
    // will use (prod.qs: every tile below makes exactly one Q load); at the end (id -1 or list
    // padding) the producer completes that buffer's q_full without a load.
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
    const TileCoord tc = TileScheduler::decode<Cfg::kList>(p, t);
    if constexpr (Cfg::kList) {
      if (tc.b < 0) {  // tile list padding
        end_dynamic();
        break;
      }
    }
    const TileWork<Cfg> w = tile_work<Cfg>(p, tc);
    if constexpr (Cfg::kRagged) {
      // The first q row of the tile (packed: m0 is a position, tc.h the kv head, group 1);
      // written out at each call: a named local reordered the unpacked kernels' PTX.
      if constexpr (Cfg::kPaged) {
        prod.tile_paged(p, tc.b * int32_t(p.pt_stride_b), p.cu_seqlens_q ? 0 : tc.b, tc.h,
                        int32_t(p.fd_group.div(uint32_t(tc.h))),
                        Cfg::kPack ? w.sc.q0 + int32_t(w.mask.m0) : w.sc.q0 + tc.m_block * Cfg::kBlockM,
                        w.sc.k_len, int32_t(w.lo), int32_t(w.hi));
      } else {
        // Ragged q / k: token-row coordinates from the sequence start, TMA batch 0.
        prod.tile_rows(p, p.cu_seqlens_q ? 0 : tc.b, p.cu_seqlens_k ? 0 : tc.b, tc.h, int32_t(p.fd_group.div(uint32_t(tc.h))),
                       Cfg::kPack ? w.sc.q0 + int32_t(w.mask.m0) : w.sc.q0 + tc.m_block * Cfg::kBlockM,
                       w.sc.k0, int32_t(w.lo), int32_t(w.hi));
      }
    } else {
      prod.tile(p, w.kv_b, tc.h, int32_t(p.fd_group.div(uint32_t(tc.h))), tc.m_block, int32_t(w.lo), int32_t(w.hi));
    }
  }
}

// fp8: warps 1..3 of the producer warpgroup transpose each V stage into the Vt stage P V
// reads (fp8.cuh), in the load order: per tile, V[hi - 1] down to V[lo]. They walk the same
// tiles as the producer (the static schedule: fp8 kernels have no dynamic counter).
template <class Cfg>
__device__ __forceinline__ void transposer_loop(const FwdParams& p, typename Cfg::Smem sm, int w, int lane) {
  constexpr int kWarps = 3;
  PipeState<Cfg::kStages> vs, ts;
  for (int64_t k = 0;; ++k) {
    const int64_t t = TileScheduler::tile_id<Cfg::kTile.lpt_sections>(p, k, gridDim.x, blockIdx.x);
    if (t < 0) break;
    const TileCoord tc = TileScheduler::decode<Cfg::kList>(p, t);
    if (Cfg::kList && tc.b < 0) break;  // tile list padding
    const TileWork<Cfg> wk = tile_work<Cfg>(p, tc);
    for (int64_t j = wk.hi - 1; j >= wk.lo; --j) {
      // Keys of this block that exist: ragged / paged tiles end inside their last block, and
      // what lies past it in shared memory is not zero; dense maps end at seq_k (TMA fills 0).
      int32_t n_valid = Cfg::kBlockN;
      if constexpr (Cfg::kRagged) n_valid = wk.mask.sk - int32_t(j) * Cfg::kBlockN;
      ptx::mbar_wait(sm.v_full(vs.stage), vs.phase);
      ptx::mbar_wait(sm.pv_empty(ts.stage), ts.phase ^ 1u);
      transpose_v<Cfg, kWarps>(sm.v(vs.stage), sm.pv(ts.stage), w, lane, n_valid);
      // Generic-proxy stores read next by wgmma (async proxy): a proxy fence in every writing
      // thread, then one arrival per warp.
      ptx::fence_proxy_async_smem();
      __syncwarp();
      if (lane == 0) {
        ptx::mbar_arrive(sm.pv_full(ts.stage));
        ptx::mbar_arrive(sm.v_empty(vs.stage));
      }
      vs.advance();
      ts.advance();
    }
  }
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    fwd_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
               const __grid_constant__ CUtensorMap tm_v, const __grid_constant__ CUtensorMap tm_o,
               const __grid_constant__ FwdParams p) {
  extern __shared__ uint8_t smem_raw[];
  typename Cfg::Smem sm{reinterpret_cast<uint8_t*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023))};
  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;

  if (threadIdx.x == 0) {
    if constexpr (kernel_dense(Cfg::kKind)) {  // the diagnostic probe (params.h cta_clock)
      if (p.cta_clock) {
        p.cta_clock[kCtaClockSlots * size_t(blockIdx.x)] = ptx::global_timer();
        p.cta_clock[kCtaClockSlots * size_t(blockIdx.x) + 1] = ptx::sm_id();
      }
    }
    ptx::prefetch_tensor_map(&tm_q);
    ptx::prefetch_tensor_map(&tm_k);
    ptx::prefetch_tensor_map(&tm_v);
    if (Cfg::kOTma && p.o_tma) ptx::prefetch_tensor_map(&tm_o);
    for (int s = 0; s < Cfg::kQStages; ++s) {
      ptx::mbar_init(sm.q_full(s), 1);
      ptx::mbar_init(sm.q_empty(s), 4 * Cfg::kWGs);  // one arrival per consumer warp
    }
    // Full barriers: one arrival (the TMA's arm, with its bytes) or, for the paged gather,
    // one per producer thread (cp.async.mbarrier.arrive.noinc; paged_kv.cuh team_load).
    const uint32_t fills = Cfg::kPagedTeam && p.paged_mode == kPagedGather ? uint32_t(paged_team(kPagedGather)) : 1u;
    for (int s = 0; s < Cfg::kStages; ++s) {
      ptx::mbar_init(sm.k_full(s), fills);
      ptx::mbar_init(sm.v_full(s), fills);
      ptx::mbar_init(sm.k_empty(s), 4 * Cfg::kWGs);
      // fp8: the V stage is read by the 3 transposer warps; the consumers read Vt.
      ptx::mbar_init(sm.v_empty(s), Cfg::Smem::kVt ? 3 : 4 * Cfg::kWGs);
      if constexpr (Cfg::Smem::kVt) {
        ptx::mbar_init(sm.pv_full(s), 3);
        ptx::mbar_init(sm.pv_empty(s), 4 * Cfg::kWGs);
      }
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
      producer_loop<Cfg>(p, prod, sm);
      // The gather's last copies land (and arrive on their barriers) before the thread exits.
      if constexpr (Cfg::kPagedTeam) {
        if (p.paged_mode == kPagedGather) ptx::cp_async_wait_all();
      }
    } else if (Cfg::Smem::kVt && tid >= 32) {
      if constexpr (Cfg::Smem::kVt) transposer_loop<Cfg>(p, sm, tid / 32 - 1, tid % 32);
    }
  } else {
    ptx::setmaxnreg_inc<Cfg::kTile.consumer_regs>();
    consumer_loop<Cfg>(p, &tm_o, sm, wg - 1, tid);
  }
}

}  // namespace longattn::cuda::sm90
