// What the helper kernels (util_kernels.cu, fp8_upcast.cu) share: a Tensor as they index it
// (rank normalised to 4, leading extents 1; element strides; passed by value to device code)
// and the sequence of a query row.
#pragma once

#include <cstdint>

#include "longattn/longattn.h"

namespace longattn::cuda {

struct View4 {
  void* data;
  DType t;
  int64_t shape[4], stride[4];
};

inline View4 view4(const Tensor& x) {
  View4 v{x.data, x.dtype, {1, 1, 1, 1}, {0, 0, 0, 0}};
  for (int i = 0; i < x.rank; ++i) {
    v.shape[4 - x.rank + i] = x.shape[i];
    v.stride[4 - x.rank + i] = x.stride[i];
  }
  return v;
}

#if defined(__CUDACC__)
// The sequence of row (b, s) of a (batch, seq, heads, dim) view: b, or for a ragged view (1,
// tokens, ...) the sequence holding token s (cu[l] <= s < cu[l + 1]); -1: past the last one.
// `used` (seqused_q, may be null) drops the rows past it: -1 too.
struct RowSeq {
  const int32_t* cu = nullptr;
  const int32_t* used = nullptr;
  int64_t batch = 0;
  __device__ __forceinline__ int64_t operator()(int64_t b, int64_t s) const {
    if (cu) {
      if (s >= cu[batch]) return -1;
      int64_t l = 0, h = batch;
      while (h - l > 1) {
        const int64_t m = (l + h) / 2;
        if (cu[m] <= s) l = m;
        else h = m;
      }
      return used && s - cu[l] >= used[l] ? -1 : l;
    }
    return used && s >= used[b] ? -1 : b;
  }
};
#endif

}  // namespace longattn::cuda
