// Host check of a tile mask's element mask on the sm90 accumulator fragment, shared by the
// mask tests (test_mask.cpp, test_pack_gqa.cpp).
#pragma once

#include <cstdint>

namespace longattn::cuda::sm90 {

// The element mask of key block b of q-tile mb on every thread's fragment (kernel.cuh's
// layout: warpgroup wg, warp, lane hold tile rows wg*64 + warp*16 + lane/4 (+8) and columns
// 8c + 2(lane%4) + e). `mask(s, row0, lane)` masks a fragment of ones; `row_of(r)` is tile
// row r's query row (or position); rows at or past `rows` are not checked; every other element
// must be kept exactly when `visible(row, key)`, else `fail(what, mb, row, key)`.
template <int kM, int kN, class MaskFn, class RowFn, class VisibleFn, class FailFn>
void check_fragments(int64_t mb, int64_t b, int64_t rows, MaskFn mask, RowFn row_of, VisibleFn visible,
                     FailFn fail) {
  for (int wg = 0; wg < kM / 64; ++wg)
    for (int warp = 0; warp < 4; ++warp)
      for (int lane = 0; lane < 32; ++lane) {
        float s[kN / 2];
        for (float& x : s) x = 1.f;
        const int row0 = wg * 64 + warp * 16 + lane / 4;
        mask(s, row0, lane);
        for (int cc = 0; cc < kN / 8; ++cc)
          for (int half = 0; half < 2; ++half)
            for (int e = 0; e < 2; ++e) {
              const int64_t row = row_of(row0 + 8 * half), key = b * kN + 8 * cc + 2 * (lane % 4) + e;
              if (row >= rows) continue;
              const bool vis = visible(row, key);
              const bool kept = s[4 * cc + 2 * half + e] == 1.f;
              if (vis != kept) fail(vis ? "visible key masked" : "invisible key kept", mb, row, key);
            }
      }
}

}  // namespace longattn::cuda::sm90
