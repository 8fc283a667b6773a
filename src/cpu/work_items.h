// The CPU backend's work decomposition: one item per (batch, kv head, block of query tokens),
// carrying every query head of that kv head so each packed K/V tile serves the whole group.
#pragma once

#include <cstdint>
#include <vector>

#include "common/problem.h"

namespace longattn::detail::cpu {

struct WorkItem {
  int64_t b = 0, hk = 0;
  int64_t i0 = 0, i1 = 0;          // query tokens [i0, i1) of sequence b
  int64_t key_lo = 0, key_hi = 0;  // union of the tokens' visible key ranges
  int64_t cost = 0;                // visible (query row, key) pairs: the scheduling weight
};

// Threads for Args::num_threads = `requested`: itself if > 0, else `env_value` (the text of
// LONGATTN_NUM_THREADS, nullptr when unset) if it parses as a positive integer (capped at
// 4096), else every hardware thread. Garbage in the variable never fails a call.
int resolve_threads(int requested, const char* env_value);

// Query tokens per item for this problem: about `rows_target` rows (tokens x group heads),
// a whole number of `mr`-row strips when the group allows, smaller when there would be too
// few items to keep `threads` busy. Larger items convert each K/V tile for more rows.
int64_t block_tokens(const Problem& p, int mr, int rows_target, int threads, int64_t total_q);

// All items, heaviest first (longest-processing-time order: under causal masks the last
// query blocks see the most keys and would otherwise finish last). Deterministic order.
std::vector<WorkItem> build_work_items(const Problem& p, const std::vector<SeqInfo>& seqs,
                                       int64_t block);

}  // namespace longattn::detail::cpu
