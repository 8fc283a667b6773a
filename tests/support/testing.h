// Test helpers shared by every test area: owned host tensors, random fill, poison,
// and the oracle-rule comparison of ../shared/STYLE.md.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "longattn/longattn.h"

namespace longattn::testing {

// A host tensor that owns its bytes; `t` views them (contiguous unless restrided).
struct HostTensor {
  std::vector<uint8_t> bytes;
  Tensor t;
  Tensor& operator*() { return t; }
};

HostTensor empty_tensor(DType dtype, std::initializer_list<int64_t> shape);
HostTensor empty_tensor(DType dtype, const std::vector<int64_t>& shape);
// Uniform random values in [lo, hi), rounded to `dtype`. Never all zeros.
HostTensor random_tensor(DType dtype, const std::vector<int64_t>& shape, uint64_t seed,
                         float lo = -1.0f, float hi = 1.0f);
// Int32 tensor from values.
HostTensor int_tensor(const std::vector<int32_t>& values, std::vector<int64_t> shape = {});
// Fill with NaN (float types) so unwritten elements are detected.
void poison(HostTensor& x);
// Count NaN elements (an output with any NaN was not fully written, or is wrong).
int64_t count_nan(const HostTensor& x);

// Reads element i (flat, contiguous order) as double.
double get(const HostTensor& x, int64_t flat_index);

// Oracle rule: max|out - ref| <= 2 * max|naive - ref| + atol, where `ref` is the float64
// reference and `naive` is the same attention done in the inputs' precision (P rounded to
// the input dtype before P.V, output rounded to the output dtype).
// run_and_check: poisons a.out (and a.lse), runs longattn::forward(a) on a's backend
// (host tensors), computes ref and naive, and compares out and lse (NaN anywhere fails).
struct OracleResult {
  double max_err = 0, naive_err = 0, bound = 0, lse_err = 0;
  std::string failure;  // empty when passing
};
OracleResult run_and_check(const Args& a, double atol = 1e-3);

}  // namespace longattn::testing
