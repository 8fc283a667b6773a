// A Tensor as the helper kernels index it: rank normalised to 4 (leading extents 1), element
// strides, passed by value to device code (util_kernels.cu, fp8_upcast.cu).
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

}  // namespace longattn::cuda
