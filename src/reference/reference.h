// The reference backend: attention evaluated directly from its definition.
//
// reference_*: every product and sum in float64 from the exact input values (fp8 inputs
// dequantized with their descales); the oracle every backend is tested against.
// emulated_*: the same loop in float32 with P rounded to the input dtype before P.V and the
// result rounded to the output dtype -- what a straightforward kernel in the input precision
// would produce. Tests bound a backend's error by ~2x this variant's error (STYLE.md).
//
// Semantics of a row (sequence b, query head h, query i, kv head hk = h / group):
//   s_j = scale * (q_i . k_j) * q_descale * k_descale, then softcap: s_j = cap*tanh(s_j/cap),
//   for the visible keys j (mask_rule.h); the sink logit joins the denominator only:
//   lse = log(exp(sink) + sum_j exp(s_j)),  out = sum_j exp(s_j - lse) * v_j * v_descale.
//   A row with no visible key gives out = 0 and lse = log(exp(sink)) = sink, or -inf without
//   a sink: the LSE is always the log of the softmax denominator, so combining partial
//   results (one of which carries the sink) stays exact.
#pragma once

#include <cstdint>

#include "common/problem.h"

namespace longattn::detail {

// Rows [row_begin, row_end) of sequence b, query head h, in float64.
// `out` receives (row_end - row_begin) x dim_v values, `lse` (may be null) one per row.
// Requires host-resident tensors (the API validated `a` into `p`).
void reference_rows(const Args& a, const Problem& p, int64_t b, int64_t h, int64_t row_begin,
                    int64_t row_end, double* out, double* lse);

// Arbitrary rows rows[0..n) of sequence b, query head h (one K/V gather for all of them:
// prefer this to n single-row reference_rows calls when sampling long sequences).
void reference_rows_at(const Args& a, const Problem& p, int64_t b, int64_t h, const int64_t* rows,
                       int64_t n, double* out, double* lse);

// Same rows in emulated input precision. Values in `out` are already rounded to the output
// dtype (stored as float); `lse` is float32.
void emulated_rows(const Args& a, const Problem& p, int64_t b, int64_t h, int64_t row_begin,
                   int64_t row_end, float* out, float* lse);

void emulated_rows_at(const Args& a, const Problem& p, int64_t b, int64_t h, const int64_t* rows,
                      int64_t n, float* out, float* lse);

// Writes a.out / a.lse with the emulated-precision result (tests, and a "naive" baseline).
Status emulated_forward(const Args& a, const Problem& p);

}  // namespace longattn::detail
