// Generic tensor checks shared by forward and combine validation.
#include <utility>
#include <limits>

#include "api/check.h"

namespace longattn::detail {

std::string shape_str(const Tensor& t) {
  std::string s = "(";
  for (int i = 0; i < t.rank && i < kMaxRank; ++i) {
    if (i) s += ", ";
    s += std::to_string(t.shape[i]);
  }
  return s + ")";
}

std::string device_str(const Device& d) {
  if (d.kind == DeviceKind::cpu) return "cpu";
  return "cuda:" + std::to_string(d.ordinal);
}

Status check_present(const char* name, const Tensor& t) {
  if (!t.present()) return Status::Invalid(std::string(name) + ": null data pointer (required)");
  return Status::Ok();
}

Status check_geometry(const char* name, const Tensor& t) {
  std::string n = name;
  if (t.rank < 1 || t.rank > kMaxRank)
    return Status::Invalid(n + ": rank " + std::to_string(t.rank) + " outside [1, " +
                           std::to_string(kMaxRank) + "]");
  bool empty = false;
  for (int i = 0; i < t.rank; ++i) {
    if (t.shape[i] < 0)
      return Status::Invalid(n + ": negative extent " + std::to_string(t.shape[i]) +
                             " in dimension " + std::to_string(i) + " of shape " + shape_str(t));
    if (t.stride[i] < 0)
      return Status::Invalid(n + ": negative stride " + std::to_string(t.stride[i]) +
                             " in dimension " + std::to_string(i) + " (strides must be >= 0)");
    empty = empty || t.shape[i] == 0;
  }
  // An empty tensor addresses no element, so its strides mean nothing: NumPy gives every
  // zero-size array strides of 0, and a call with seq_q = 0 from Python must still be valid.
  if (empty) return Status::Ok();
  int last = t.rank - 1;
  if (t.stride[last] != 1 && t.shape[last] > 1)
    return Status::Invalid(n + ": last dimension must be contiguous (stride 1), got stride " +
                           std::to_string(t.stride[last]));
  // The largest element offset times the element size must fit in int64: every backend
  // computes addresses in 64-bit and must never wrap.
  int64_t span = 0;
  for (int i = 0; i < t.rank; ++i) {
    int64_t term;
    if (__builtin_mul_overflow(t.shape[i] - 1, t.stride[i], &term) ||
        __builtin_add_overflow(span, term, &span))
      return Status::Invalid(n + ": shape " + shape_str(t) + " with its strides overflows int64");
  }
  int64_t bytes;
  if (__builtin_mul_overflow(span + 1, dtype_size(t.dtype), &bytes))
    return Status::Invalid(n + ": shape " + shape_str(t) + " with its strides overflows int64");
  return Status::Ok();
}

Status check_dtype(const char* name, const Tensor& t, std::initializer_list<DType> allowed,
                   const char* expected) {
  for (DType d : allowed)
    if (t.dtype == d) return Status::Ok();
  return Status::Invalid(std::string(name) + ": dtype " + dtype_name(t.dtype) + " not supported, expected " +
                         expected);
}

Status check_shape(const char* name, const Tensor& t, std::initializer_list<int64_t> shape,
                   const char* dims) {
  bool ok = t.rank == int(shape.size());
  int i = 0;
  for (int64_t s : shape) {
    if (ok && t.shape[i] != s) ok = false;
    ++i;
  }
  if (ok) return Status::Ok();
  std::string want = "(";
  i = 0;
  for (int64_t s : shape) want += (i++ ? ", " : "") + std::to_string(s);
  want += ")";
  return Status::Invalid(std::string(name) + ": shape " + shape_str(t) + ", expected " + want + " " +
                         dims);
}

Status check_device(const char* name, const Tensor& t, const Device& ref, const char* ref_name) {
  bool same = t.device.kind == ref.kind &&
              (ref.kind == DeviceKind::cpu || t.device.ordinal == ref.ordinal);
  if (same) return Status::Ok();
  return Status::Invalid(std::string(name) + ": on " + device_str(t.device) + " but " + ref_name +
                         " is on " + device_str(ref) + " (all tensors must be on one device)");
}

Status check_distinct_elements(const char* name, const Tensor& t) {
  int dims[kMaxRank], n = 0;
  for (int i = 0; i < t.rank; ++i) {
    if (t.shape[i] == 0) return Status::Ok();  // no elements at all
    if (t.shape[i] > 1) dims[n++] = i;
  }
  for (int k = 1; k < n; ++k)  // insertion sort by stride (at most 4 dims)
    for (int j = k; j > 0 && t.stride[dims[j]] < t.stride[dims[j - 1]]; --j) std::swap(dims[j], dims[j - 1]);
  int64_t span = 0;  // largest offset reachable with the dims checked so far
  for (int k = 0; k < n; ++k) {
    const int d = dims[k];
    if (t.stride[d] <= span)
      return Status::Invalid(std::string(name) + ": stride " + std::to_string(t.stride[d]) +
                             " of dimension " + std::to_string(d) +
                             " makes output elements overlap (outputs need distinct addresses)");
    span += (t.shape[d] - 1) * t.stride[d];
  }
  return Status::Ok();
}

ByteRange byte_range(const Tensor& t) {
  ByteRange r;
  if (!t.present()) return r;
  int64_t span = 0;
  for (int i = 0; i < t.rank; ++i) {
    if (t.shape[i] == 0) return r;
    span += (t.shape[i] - 1) * t.stride[i];
  }
  r.lo = reinterpret_cast<uintptr_t>(t.data);
  r.hi = r.lo + uintptr_t((span + 1) * dtype_size(t.dtype));
  return r;
}

Status check_no_overlap(const char* w_name, const Tensor& w, const char* r_name, const Tensor& r) {
  if (!w.present() || !r.present()) return Status::Ok();
  ByteRange a = byte_range(w), b = byte_range(r);
  if (a.lo == a.hi || b.lo == b.hi) return Status::Ok();
  if (a.lo < b.hi && b.lo < a.hi)
    return Status::Invalid(std::string(w_name) + ": output memory overlaps " + r_name +
                           " (outputs must not alias inputs or each other)");
  return Status::Ok();
}

}  // namespace longattn::detail
