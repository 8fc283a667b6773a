// Zigzag context parallelism's key layout (Args::cp_world): one sequence of 2W chunks of c keys,
// rank r holding chunks r and 2W - 1 - r, gathered rank-major as (W, 2c, heads_kv, dim). Key j
// of the sequence is row `row` of rank `rank` there. One definition for the host (layout.cpp:
// the CPU backend and the reference) and the CUDA producer (producer.cuh kv_coord, in 32 bits).
#pragma once

#include "common/mask_rule.h"  // LONGATTN_HD

namespace longattn::detail {

template <class I>
LONGATTN_HD void zigzag_key(I j, I c, I world, I* rank, I* row) {
  const I ch = j / c;
  const bool second = ch >= world;  // a rank's second chunk: rows c .. 2c
  *rank = second ? 2 * world - 1 - ch : ch;
  *row = j - ch * c + (second ? c : I(0));
}

}  // namespace longattn::detail
