// The host's decisions for one forward call on the sm90 kernels, in one struct: which kernel
// (tile_size.h Kernel) and tile, packed GQA, the paged producer's layout and mode, split-KV,
// the softcap mode and the tile order. plan_forward applies the rules (each explained where
// it lives: tile_size.h, pack_gqa.h, page_math.h, schedule_rule.h, softcap_mode.h) and the
// internal overrides (common/overrides.h); nothing else in the backend chooses.
#pragma once

#include <cstdint>

#include "common/overrides.h"
#include "common/problem.h"
#include "cuda/sm90/tile_size.h"

namespace longattn::cuda {

struct ForwardPlan {
  sm90::Kernel kernel = sm90::Kernel::dense;
  sm90::TileConfig tile{};
  // The kernel's head dims (tile_size.h kernel_dims); col_maps: the call's are narrower, so
  // its tensor maps are column-addressed and zero-fill the rest (params.h col_maps).
  int dim_qk = 0, dim_v = 0;
  bool col_maps = false;
  int64_t num_m_blocks = 0;  // q-blocks per (batch, head) of the scheduler's tile space
  int64_t sched_heads = 0;   // heads of that space (packed GQA: kv heads)
  int pack_shift = 0;        // packed GQA: log2 of the group (0: unpacked)
  // Paged K/V (page_math.h, paged_kv.cuh).
  int box_shift = 0;         // TMA box rows = 2^box_shift (never crossing a page)
  int paged_mode = 0;        // page_math.h PagedMode
  bool v_grouped = false, k_grouped = false;
  int64_t kv_splits = 1;     // split-KV (schedule_rule.h kv_splits): 1 = none
  // Causal calls on the dense / feature kinds' 192-row tile, seq_q not a multiple of 192, no
  // window or chunk (plan.cpp): the q-tiles end at the last row, so the partial tile is the
  // first (whose rows see the fewest keys), not the last (the most). The kernel sees q_shift
  // virtual rows before row 0 (params.h).
  int64_t q_shift = 0;
  int32_t softcap_mode = 0;  // softcap_mode.h SoftcapMode
  float rescale_threshold = 8.0f;
  uint64_t cta_clock = 0;    // Overrides::cta_clock (the dense kinds' per-CTA times; 0: off)
  // Tile order (schedule_rule.h, scheduler.cuh).
  int64_t section_bh = 1;    // (batch, head) pairs per L2 section
  bool tile_list = false;    // ragged: the device-built tile list instead of the padded grid
  int64_t list_items = 0;    // its capacity bound in items
  bool dynamic = false;      // the atomic tile counter where the kernel compiles it
  bool section_list = false; // causal, dense kinds without the sectioned snake: its order as a device list
  int8_t section_rotate = -1; // that list's sections from rotating first CTAs: -1 rule, 0 / 1 (launch.h)
};

// The SMs a call's kernels may fill (the persistent grid, split-KV's count): all of the
// device's `sms` but Args::sm_margin (validated >= 0), at least one.
inline int usable_sms(int sms, int sm_margin) { return sm_margin < sms ? sms - sm_margin : 1; }

// Fills `plan` for a validated problem that the kernels serve (forward_sm90.cpp checks that
// first). `num_sms` (usable_sms) and `l2_bytes` describe the device. NotSupported (naming the argument)
// for a page size or page table the paged kernel cannot take.
Status plan_forward(const Args& a, const detail::Problem& p, const detail::Overrides& ov, int num_sms,
                    int64_t l2_bytes, ForwardPlan* plan);

}  // namespace longattn::cuda
