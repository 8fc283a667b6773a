#include "host_array.h"

#include <cmath>
#include <limits>

#include "common/problem.h"

namespace longattn::tools {

HostArray::HostArray(DType t, std::vector<int64_t> s) : dtype(t), shape(std::move(s)) {
  bytes.assign(static_cast<size_t>(numel() * dtype_size(t)), 0);
}

int64_t HostArray::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

float HostArray::get(int64_t i) const {
  if (dtype == DType::i32) return static_cast<float>(reinterpret_cast<const int32_t*>(data())[i]);
  return detail::load_as_float(data(), dtype, i);
}

void HostArray::set(int64_t i, float x) {
  if (dtype == DType::i32) {
    reinterpret_cast<int32_t*>(data())[i] = static_cast<int32_t>(x);
    return;
  }
  detail::store_from_float(data(), dtype, i, x);
}

Tensor HostArray::view() {
  Tensor t;
  t.data = data();
  t.dtype = dtype;
  t.rank = static_cast<int>(shape.size());
  int64_t stride = 1;
  for (int d = t.rank - 1; d >= 0; --d) {
    t.shape[d] = shape[d];
    t.stride[d] = stride;
    stride *= shape[d];
  }
  return t;
}

void HostArray::poison() {
  const int64_t n = numel();
  for (int64_t i = 0; i < n; ++i) set(i, std::numeric_limits<float>::quiet_NaN());
}

HostArray HostArray::converted(DType t) const {
  if (t == dtype) return *this;
  HostArray r(t, shape);
  const int64_t n = numel();
  for (int64_t i = 0; i < n; ++i) r.set(i, get(i));
  return r;
}

}  // namespace longattn::tools
