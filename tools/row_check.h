// The run's correctness check: sampled query rows against the float64 reference, with the
// oracle tolerance of STYLE.md (error <= 2 x the naive same-precision error + atol), plus
// a scan of the whole output for unwritten (NaN) elements.
#pragma once

#include <cstdint>
#include <string>

#include "host_array.h"
#include "inputs.h"
#include "longattn/longattn.h"

namespace longattn::tools {

struct CheckResult {
  int64_t rows = 0;           // query rows compared (all heads counted separately)
  int64_t nan_out = 0;        // NaN elements anywhere in the output (unwritten or wrong)
  int64_t nan_lse = 0;        // NaN elements in the LSE
  double max_err = 0;         // max |out - ref| over checked rows
  double naive_err = 0;       // max |naive - ref|: same math in the input precision
  double bound = 0;           // 2 * naive_err + atol
  double lse_err = 0, lse_bound = 0;
  bool pass = true;
  std::string failure;        // why it failed ("" when passing)
};

/// Absolute slack added to the bound (outputs are O(1)).
inline constexpr double kCheckAtol = 1e-3;

/// `host_args` must be the call with host-resident tensors (as validated), `out`/`lse` the
/// results. Checks about `rows` query rows: blocks of up to 8 consecutive rows at random
/// (sequence, head, position), always including the first and last row of the longest
/// sequence.
CheckResult check_rows(const Args& host_args, const Inputs& in, const HostArray& out,
                       const HostArray* lse, int64_t rows, uint64_t seed);

}  // namespace longattn::tools
