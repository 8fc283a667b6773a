// Internal to src/reference: K/V rows of one (sequence, kv head) copied into a dense
// row-major buffer (dequantized), so the score loop walks contiguous memory whatever the
// layout (dense, ragged, paged) -- one gather per (b, kv head), reused by its query heads.
// Values are raw (fp8 descales are applied to scores and outputs by the callers, as the
// kernels do).
#pragma once

#include <cstdint>
#include <thread>
#include <vector>

#include "common/problem.h"

namespace longattn::detail {

template <typename T>
struct KvRows {
  int64_t len = 0;
  std::vector<T> k, v;  // len x dim_qk, len x dim_v
};

template <typename T>
void gather_kv(const Args& a, const Problem& p, int64_t b, int64_t hk, const SeqInfo& s,
               KvRows<T>* kv) {
  kv->len = s.k_len;
  kv->k.resize(size_t(s.k_len * p.dim_qk));
  kv->v.resize(size_t(s.k_len * p.dim_v));
  for (int64_t j = 0; j < s.k_len; ++j) {
    const int64_t ko = k_offset(a, p, b, s, j, hk), vo = v_offset(a, p, b, s, j, hk);
    for (int64_t d = 0; d < p.dim_qk; ++d)
      kv->k[size_t(j * p.dim_qk + d)] = T(load_as_double(a.k.data, p.in_dtype, ko + d));
    for (int64_t d = 0; d < p.dim_v; ++d)
      kv->v[size_t(j * p.dim_v + d)] = T(load_as_double(a.v.data, p.in_dtype, vo + d));
  }
}

// Runs fn(i) for i in [0, n) on up to `threads` threads (0: hardware threads). Work items
// are independent, so the result does not depend on the thread count.
template <typename Fn>
void parallel_for(int64_t n, int threads, Fn fn) {
  static const int hw = int(std::thread::hardware_concurrency());  // a /sys read: ask once
  int t = threads > 0 ? threads : hw;
  if (t < 1) t = 1;
  if (int64_t(t) > n) t = int(n);
  if (t <= 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::vector<std::thread> pool;
  for (int w = 0; w < t; ++w)
    pool.emplace_back([=, &fn] {
      for (int64_t i = w; i < n; i += t) fn(i);
    });
  for (auto& th : pool) th.join();
}

}  // namespace longattn::detail
