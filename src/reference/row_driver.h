// Internal to src/reference: what the float64 oracle and its float32 "emulated" twin share
// around their per-row arithmetic -- gathering one (sequence, kv head) for a row list, and
// the whole-problem driver that writes out/lse. Only the row arithmetic differs between the
// two (reference_forward.cpp, emulated_forward.cpp), so only it is written twice.
#pragma once

#include <cstdint>
#include <vector>

#include "common/problem.h"
#include "reference/gather.h"

namespace longattn::detail {

// RowsFn computes rows rows[0..n) of sequence b, query head h from the gathered K/V:
//   void(const Args&, const Problem&, const SeqInfo&, const KvRows<T>&, int64_t b, int64_t h,
//        const int64_t* rows, int64_t n, T* out /* n x dim_v */, T* lse /* n, may be null */)
template <typename T, typename RowsFn>
void rows_at(const Args& a, const Problem& p, int64_t b, int64_t h, const int64_t* rows,
             int64_t n, T* out, T* lse, RowsFn rows_fn) {
  const SeqInfo s = seq_info(a, p, b);
  KvRows<T> kv;
  gather_kv(a, p, b, h / p.group, s, &kv);
  rows_fn(a, p, s, kv, b, h, rows, n, out, lse);
}

// Rows [begin, end) as a row list.
inline std::vector<int64_t> row_range(int64_t begin, int64_t end) {
  std::vector<int64_t> rows;
  for (int64_t i = begin; i < end; ++i) rows.push_back(i);
  return rows;
}

// Every row of the problem into a.out (and a.lse). Work item: one (sequence, kv head); its
// K/V are gathered once for the whole query-head group.
template <typename T, typename RowsFn>
void forward_all_rows(const Args& a, const Problem& p, RowsFn rows_fn) {
  parallel_for(p.batch * p.heads_kv, a.num_threads, [&](int64_t item) {
    const int64_t b = item / p.heads_kv, hk = item % p.heads_kv;
    const SeqInfo s = seq_info(a, p, b);
    if (s.q_len == 0) return;
    KvRows<T> kv;
    gather_kv(a, p, b, hk, s, &kv);
    const std::vector<int64_t> rows = row_range(0, s.q_len);
    std::vector<T> o(size_t(s.q_len * p.dim_v)), lse(static_cast<size_t>(s.q_len));
    for (int64_t h = hk * p.group; h < (hk + 1) * p.group; ++h) {
      rows_fn(a, p, s, kv, b, h, rows.data(), s.q_len, o.data(), lse.data());
      for (int64_t i = 0; i < s.q_len; ++i) {
        const int64_t oo = out_offset(a, p, b, s, i, h);
        for (int64_t d = 0; d < p.dim_v; ++d)
          store_from_float(a.out.data, p.out_dtype, oo + d, float(o[size_t(i * p.dim_v + d)]));
        if (p.has_lse)
          store_from_float(a.lse.data, DType::f32, lse_offset(a, p, b, s, i, h), float(lse[size_t(i)]));
      }
    }
  });
}

}  // namespace longattn::detail
