// Internal tuning overrides: what tests and the benchmark pass in to force a choice that a
// backend otherwise makes by its own rules (tile shape, schedule, paged producer mode, ...).
// A default-constructed Overrides means "the shipped rules" and is what longattn::forward
// uses. No override changes which keys a query sees; each only changes the order or the
// way of the work, so results agree within rounding (the schedule ones bit for bit; tests
// check both). Not part of the public API: users get what ships; options they need are
// Args fields.
#pragma once

#include <cstdint>

#include "longattn/longattn.h"

namespace longattn::detail {

// A choice forced off or on, or left to the rule.
enum class Force : int8_t { rule = -1, off = 0, on = 1 };


// How the paged producer fills a K/V tile shorter than a page (src/cuda/sm90/paged_kv.cuh).
enum class PagedFill : int8_t { rule = -1, tma = 0, lanes = 1, gather = 2 };

struct Overrides {
  // CUDA backend.
  int64_t sections = -1;                  // (batch, head) pairs per L2 section; 0: one section of all; -1: rule
  int64_t kv_splits = -1;                 // split-KV of dense batch-1 calls; 0 or 1: none; -1: rule
  Force tile_list = Force::rule;          // ragged: the device tile list (on) or the padded grid (off)
  Force dynamic = Force::rule;            // the atomic tile counter where compiled (on) or the static order (snake or deal)
  // Causal on the dense kinds without the sectioned snake (hdim 256): the L2-sectioned LPT
  // order as a device tile list built before the launch (on) or the one global snake.
  Force section_list = Force::rule;
  // That list's sections dealt from rotating first CTAs (on), all from CTA 0 (off, as the
  // kernels' own sectioned snake deals them), or where TileScheduler::rotation_rule holds.
  Force section_rotate = Force::rule;
  Force pack_gqa = Force::rule;           // packed GQA tiles wherever the group allows (on) or never
  Force softcap_fixed = Force::rule;      // softcap: fixed-max update where allowed (on) or the running max
  PagedFill paged_fill = PagedFill::rule;  // paged pages shorter than the tile
  bool paged_group_k = true;              // paged: grouped K stage where possible (one TMA per page box)
  bool paged_group_v = true;              // paged: grouped V stage where possible
  // fp8 (e4m3) on the f16 kernels after the exact upcast (on; forward_sm90.cpp
  // fp8_upcast_forward), on the fp8 kernels wherever they serve the call (off), or by the rule
  // (fp8_upcast_needed). Calls no fp8 kernel serves take the upcast whatever this says.
  Force fp8_upcast = Force::rule;
  // fp8 plain attention at head dim 128: the dense_vt kind (V transposed in global memory by a
  // pre-pass, Q K^T one block ahead: on), the dense kind (the in-kernel V transposer: off), or
  // the rule (tile_size.h fp8_vt_worth).
  Force fp8_vt_global = Force::rule;
  // Chunked attention as a batch of its chunks where the rule allows (cuda/chunk_batch.h: rule
  // or on), or always on the chunk mask of the feature kinds (off).
  Force chunk_batch = Force::rule;
  float rescale_threshold = 8.0f;         // lazy O rescale threshold, log2 units; <= 0: always rescale
  // Diagnostic (bench/gpu/cta_clock.py): the device address of 136 x grid uint64 that the dense
  // kinds fill per CTA c, from 136c: [0] its start (%globaltimer, ns), [1] its SM, [2 + w]
  // consumer warpgroup w's end (after its last O store has read shared memory; w < 3); then
  // for each of its first 32 tiles k, from 8 + 4k: [w] warpgroup w's end of the tile (w < 2),
  // [2] (batch << 32) | (head << 16) | q-block, [3] in 32-bit half w the low 32 bits of the
  // time warpgroup w's first S of the tile was ready (sm90/params.h kCtaClockSlots).
  // Slots not reached are not written. 0: off. Other kinds ignore it.
  uint64_t cta_clock = 0;
};

// longattn::forward with overrides (tests, benchmark).
Status forward_with(const Args& args, const Overrides& ov);

}  // namespace longattn::detail
