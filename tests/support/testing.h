// Test helpers shared by every test area: owned host tensors, random fill, poison, whole
// attention problems built from a small spec, and the oracle-rule comparison of
// ../shared/STYLE.md.
//
// Typical backend test:
//   CaseSpec s;  s.seq_q = 127; s.seq_k = 300; s.mask.causal = true;  s.seed = 7;
//   Case c = make_case(s);
//   c.args.backend = Backend::cpu;
//   OracleResult r = run_and_check(c.args);
//   EXPECT_TRUE(r.failure.empty()) << r.failure;
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "longattn/longattn.h"

namespace longattn::testing {

/// A host tensor that owns its bytes; `t` views them (contiguous unless restrided).
/// Moving keeps `t.data` valid (the byte vector's buffer moves with it); copying makes a
/// deep copy whose `t.data` points into the copy's own bytes.
struct HostTensor {
  std::vector<uint8_t> bytes;
  Tensor t;
  Tensor& operator*() { return t; }
  const Tensor& operator*() const { return t; }

  HostTensor() = default;
  HostTensor(HostTensor&&) = default;
  HostTensor& operator=(HostTensor&&) = default;
  HostTensor(const HostTensor& o) : bytes(o.bytes), t(o.t) { repoint(o); }
  HostTensor& operator=(const HostTensor& o) {
    if (this != &o) bytes = o.bytes, t = o.t, repoint(o);
    return *this;
  }

 private:
  void repoint(const HostTensor& o) {
    const auto* base = o.bytes.data();
    const auto* p = static_cast<const uint8_t*>(o.t.data);
    if (p && base && p >= base && p < base + o.bytes.size()) t.data = bytes.data() + (p - base);
  }
};

/// Zero-filled contiguous tensor.
HostTensor empty_tensor(DType dtype, std::initializer_list<int64_t> shape);
HostTensor empty_tensor(DType dtype, const std::vector<int64_t>& shape);
/// Uniform random values in [lo, hi), rounded to `dtype`. Never all zeros. Deterministic
/// for a given seed.
HostTensor random_tensor(DType dtype, const std::vector<int64_t>& shape, uint64_t seed,
                         float lo = -1.0f, float hi = 1.0f);
/// Like random_tensor, but the last dimension is padded by `pad` unused elements (filled
/// with NaN), so rows are not contiguous with each other: the view has shape `shape` and
/// stride[rank-2] = shape[rank-1] + pad. Catches code that assumes packed rows.
HostTensor random_padded(DType dtype, const std::vector<int64_t>& shape, int64_t pad,
                         uint64_t seed, float lo = -1.0f, float hi = 1.0f);
/// Int32 tensor from values; shape defaults to {values.size()}.
HostTensor int_tensor(const std::vector<int32_t>& values, std::vector<int64_t> shape = {});
/// Fill every element of the view with NaN (float types; i32 gets INT32_MIN), so unwritten
/// elements are detected. Works on strided views (padding is left alone).
void poison(HostTensor& x);
void poison(const Tensor& t);
/// Count NaN elements of the view.
int64_t count_nan(const HostTensor& x);

/// Element `flat_index` (row-major order over the view's shape) as double.
double get(const HostTensor& x, int64_t flat_index);
/// Element at a multi-index as double.
double get(const Tensor& t, std::initializer_list<int64_t> index);

/// A whole attention problem in a few fields. Defaults: a small odd-sized bf16 GQA problem.
struct CaseSpec {
  int64_t batch = 2, seq_q = 17, seq_k = 23;  ///< dense extents; ragged: the longest sequence
  int64_t heads_q = 4, heads_kv = 2;
  int64_t dim_qk = 64, dim_v = 64;
  DType dtype = DType::bf16, out_dtype = DType::bf16;
  Mask mask{};
  std::optional<float> softmax_scale;
  float softcap = 0.0f;
  bool lse = true;        ///< allocate and check the LSE output
  bool sinks = false;     ///< random per-head sink logits
  bool ragged_q = false;  ///< packed q with cu_seqlens_q
  bool ragged_k = false;  ///< packed k/v with cu_seqlens_k
  /// Ragged lengths (size batch); empty: random in [0, seq], the first sequence at `seq`.
  std::vector<int32_t> seqlens_q, seqlens_k;
  int64_t page_size = 0;   ///< > 0: paged K/V with a shuffled page table (excludes ragged_k)
  bool seqused_k = false;  ///< random keys-used per sequence (the first at full capacity)
  bool seqused_q = false;  ///< random query rows used per sequence (the first uses all)
  /// Query rows used per sequence (size batch; implies seqused_q); empty: random.
  std::vector<int32_t> used_q;
  bool padded = false;     ///< non-contiguous rows in q/k/v/out (see random_padded)
  float amp = 1.0f;        ///< q, k, v uniform in [-amp, amp)
  uint64_t seed = 1;
};

/// One line naming every non-default field, for failure messages:
/// "b2 sq17 sk23 h4/2 d64/64 bf16->bf16 causal(br) ragged_q seed=1".
std::string describe(const CaseSpec& s);
// gtest prints a parameter with this (readable names instead of a byte dump).
inline void PrintTo(const CaseSpec& s, std::ostream* os) { *os << describe(s); }

/// Owned tensors of one problem plus the Args viewing them (backend: reference).
/// Movable, not copyable (a copy's `args` would still view the original's buffers).
struct Case {
  Case() = default;
  Case(Case&&) = default;
  Case& operator=(Case&&) = default;
  Case(const Case&) = delete;
  Case& operator=(const Case&) = delete;

  CaseSpec spec;
  HostTensor q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, page_table,
      sinks, q_descale, k_descale, v_descale;
  Args args;
};
Case make_case(const CaseSpec& spec);

/// Oracle rule: max|out - ref| <= 2 * max|naive - ref| + atol, where `ref` is the float64
/// reference and `naive` the same attention in the inputs' precision (P rounded to the
/// input dtype before P.V, output rounded to the output dtype); LSE likewise with its own
/// naive error. run_and_check poisons a.out (and a.lse), runs longattn::forward(a) on a's
/// backend (host tensors), computes ref and naive for every row, and compares. NaN where
/// the reference is finite fails (an element was not written, or is wrong). Rows past
/// seqused_q must keep their poison (never written).
struct OracleResult {
  double max_err = 0, naive_err = 0, bound = 0;
  double lse_err = 0, lse_naive_err = 0, lse_bound = 0;
  std::string failure;  ///< empty when passing
};
OracleResult run_and_check(const Args& a, double atol = 1e-3);

/// Just the comparison half of run_and_check, for outputs already computed into a.out/a.lse
/// (e.g. copied back from a device). Does not run or poison anything.
///
/// fp8 on tensor cores (`acc_eps` > 0): the naive computation accumulates in float32, but
/// Hopper's fp8 wgmma sums its products with a narrower mantissa (about 14 bits), so the
/// logits carry an error up to acc_eps x sum_i |q_i k_i| (dequantized, scaled) and P V one up
/// to acc_eps x max|v|. With A = scale max(qd kd) max_row ||q_row||_1 max|k| and V = max|v|
/// max(vd), the bounds grow by: LSE acc_eps A; out acc_eps (2 A + 1) V (softmax moves the
/// weights by at most twice the largest logit error). The GPU fp8 tests use acc_eps = 2^-11,
/// 4x the documented precision.
OracleResult check_against_reference(const Args& a, double atol = 1e-3, double acc_eps = 0);

}  // namespace longattn::testing
