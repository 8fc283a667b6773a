// An owned, contiguous host array of one of longattn's dtypes: the CLI's unit of data
// (what .npy files hold, what random inputs and outputs are).
#pragma once

#include <cstdint>
#include <vector>

#include "longattn/types.h"

namespace longattn::tools {

struct HostArray {
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // contiguous, row-major, little-endian

  HostArray() = default;
  HostArray(DType t, std::vector<int64_t> s);  // zero-filled
  int64_t numel() const;
  void* data() { return bytes.data(); }
  const void* data() const { return bytes.data(); }
  // Element access in float, rounding to nearest even on store.
  float get(int64_t i) const;
  void set(int64_t i, float x);
  // A contiguous longattn::Tensor view of the bytes (host memory).
  Tensor view();
  // Every element NaN (floats) so unwritten outputs are detected.
  void poison();
  // Same values in another dtype.
  HostArray converted(DType t) const;
};

}  // namespace longattn::tools
