#include "cpu/work_items.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <thread>

namespace longattn::detail::cpu {

int resolve_threads(int requested, const char* env_value) {
  if (requested > 0) return requested;
  if (env_value) {
    char* end = nullptr;
    const long n = std::strtol(env_value, &end, 10);
    if (end != env_value && n > 0) return int(n < 4096 ? n : 4096);
  }
  // Asked once: glibc reads /sys for it (~5 us, more than a small call's whole kernel).
  static const unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? int(hw) : 1;
}

int64_t block_tokens(const Problem& p, int mr, int rows_target, int threads, int64_t total_q) {
  const int64_t g = p.group;
  const int64_t target_rows = std::max<int64_t>(mr, rows_target / mr * mr);
  int64_t bm = std::max<int64_t>(1, target_rows / g);
  // Round down so that bm * g fills whole strips (the last strip of an item is padding).
  const int64_t step = mr / std::gcd<int64_t>(g, mr);
  if (bm >= step) bm = bm / step * step;
  // Keep at least ~4 items per thread so the dynamic queue can balance.
  const int64_t want = int64_t(threads) * 4;
  while (bm > step && (total_q + bm - 1) / bm * p.heads_kv < want) bm = std::max(step, bm / 2);
  return bm;
}

std::vector<WorkItem> build_work_items(const Problem& p, const std::vector<SeqInfo>& seqs,
                                       int64_t block) {
  std::vector<WorkItem> items;
  for (int64_t b = 0; b < p.batch; ++b) {
    const SeqInfo& s = seqs[size_t(b)];
    std::vector<WorkItem> blocks;
    for (int64_t i0 = 0; i0 < s.q_len; i0 += block) {
      WorkItem w;
      w.b = b;
      w.i0 = i0;
      w.i1 = std::min(s.q_len, i0 + block);
      w.key_lo = INT64_MAX;
      w.key_hi = INT64_MIN;
      for (int64_t i = w.i0; i < w.i1; ++i) {
        int64_t lo, hi;
        visible_range(p.mask, query_position(p, s, i), s.k_len, &lo, &hi);
        if (lo >= hi) continue;
        w.key_lo = std::min(w.key_lo, lo);
        w.key_hi = std::max(w.key_hi, hi);
        w.cost += hi - lo;
      }
      if (w.key_lo > w.key_hi) w.key_lo = w.key_hi = 0;  // no visible key: rows get zeros
      // Packing, the epilogue and the strip loop cost something even with no visible keys.
      w.cost = w.cost * p.group + (w.i1 - w.i0) * p.group * 16;
      blocks.push_back(w);
    }
    // Head-major: equal-cost items of one kv head run back to back, so a thread finds that
    // head's K/V rows still in its L2 (a 2k-key bf16 head is 1 MB).
    for (int64_t hk = 0; hk < p.heads_kv; ++hk)
      for (WorkItem w : blocks) {
        w.hk = hk;
        items.push_back(w);
      }
  }
  std::stable_sort(items.begin(), items.end(),
                   [](const WorkItem& x, const WorkItem& y) { return x.cost > y.cost; });
  return items;
}

}  // namespace longattn::detail::cpu
