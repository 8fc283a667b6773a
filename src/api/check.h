// Internal helpers of the validation layer: each returns Status::Invalid with a message
// "<argument>: <what was expected>, got <actual>" so the caller knows what to fix.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "longattn/longattn.h"

#define LONGATTN_TRY(expr)              \
  do {                                  \
    ::longattn::Status s_ = (expr);     \
    if (!s_.ok()) return s_;            \
  } while (0)

namespace longattn::detail {

std::string shape_str(const Tensor& t);   // "(2, 128, 8, 64)"
std::string device_str(const Device& d);  // "cpu" or "cuda:1"

// data != nullptr.
Status check_present(const char* name, const Tensor& t);
// rank in [1, kMaxRank], shapes and strides >= 0, last dim contiguous (stride 1, or extent
// <= 1), and the addressed span fits in int64 bytes.
Status check_geometry(const char* name, const Tensor& t);
// dtype is one of `allowed`; `expected` spells them for the message ("bf16, f16 or f32").
Status check_dtype(const char* name, const Tensor& t, std::initializer_list<DType> allowed,
                   const char* expected);
// Exact shape; `dims` names the dimensions for the message ("(batch, heads_q, seq_q)").
Status check_shape(const char* name, const Tensor& t, std::initializer_list<int64_t> shape,
                   const char* dims);
// Same device as `ref` (named `ref_name`).
Status check_device(const char* name, const Tensor& t, const Device& ref, const char* ref_name);

// Output views: no two elements may share an address (each is written by one thread).
// Sufficient test: with dims of extent > 1 sorted by stride, each stride exceeds the span
// of all smaller ones (holds for packed and padded layouts).
Status check_distinct_elements(const char* name, const Tensor& t);

// Half-open byte range [lo, hi) touched by a view; empty (lo == hi) for zero-size views.
struct ByteRange {
  uintptr_t lo = 0, hi = 0;
};
ByteRange byte_range(const Tensor& t);
// Invalid when written tensor `w` shares bytes with `r` (both present).
Status check_no_overlap(const char* w_name, const Tensor& w, const char* r_name, const Tensor& r);

// Validation of CombineArgs (validate_combine.cpp); backends receive checked arguments.
Status validate_combine(const CombineArgs& a);

}  // namespace longattn::detail
