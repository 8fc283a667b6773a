// One attention problem on the GPU and its check against the float64 reference (oracle
// rule, STYLE.md): host inputs, device copies, poisoned outputs, sampled reference rows.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "common/overrides.h"
#include "longattn/longattn.h"

namespace longattn::gputest {

struct Shape {
  int64_t batch = 1, seq_q = 128, seq_k = 128, heads_q = 4, heads_kv = 4, dim = 128;
  int64_t dim_v = 0;  // v / out head dim; 0: dim
  bool causal = false, top_left = false, lse = true;
  DType in = DType::bf16, out = DType::bf16;
  float q_range = 3.f;             // q ~ U(-q_range, q_range), k, v ~ U(-1, 1)
  float scale = 0.f;               // 0: default 1/sqrt(d)
  int64_t rows_per_head = 1 << 30;  // reference rows checked per (b, h): sampled beyond this
  int64_t pad = 0;                  // extra elements per token row of q/k/v/out (strided layout)
  // out's own padding (-1: pad): a dense out's token rows, a packed (ragged) out's head rows.
  // Not a multiple of 8: 16-bit rows off 16 bytes, the kernels' pair stores (FwdParams::o_vec).
  int64_t out_pad = -1;
  bool automatic = false;           // backend automatic instead of cuda (dispatch check)
  // Issue-5 features: softcap (0: off), per-head sinks ~ U(sink_lo, sink_hi), windows
  // (-1: off), chunk (0: off); windows and chunks follow `top_left` like causal.
  float softcap = 0.f;
  bool sinks = false;
  float sink_lo = -1.f, sink_hi = 4.f;
  int64_t window_left = -1, window_right = -1, chunk = 0;
  // Ragged batches: per-sequence lengths (non-empty: that tensor is packed with device
  // cu_seqlens; batch = the vector's size, seq_q / seq_k ignored for it); used_k: seqused_k.
  // used_q: seqused_q (query rows computed per sequence; the rows past it must keep the
  // poison run_case writes first, out and LSE alike).
  std::vector<int32_t> lens_q, lens_k, used_k, used_q;
  // != 0: every K/V element that no output row reads (keys past a sequence's used length,
  // keys of sequences without queries) holds this value (NaN, Inf): it must not leak.
  float unread = 0.f;
  uint64_t seed = 1;
  int64_t l2_budget = 0;  // Args::l2_budget_bytes (0: the device rule)
  // Internal overrides (schedule, split-KV, paged mode, ...) the call runs with; default: the rules.
  detail::Overrides ov;
  std::string name() const;
};

// gtest prints a parameter with this (readable names instead of a byte dump).
inline void PrintTo(const Shape& s, std::ostream* os) { *os << s.name(); }

// A dense shape (every other field at its default).
inline Shape dense_shape(int64_t b, int64_t sq, int64_t sk, int64_t hq, int64_t hkv, int64_t d, bool causal) {
  Shape s;
  s.batch = b;
  s.seq_q = sq;
  s.seq_k = sk;
  s.heads_q = hq;
  s.heads_kv = hkv;
  s.dim = d;
  s.causal = causal;
  return s;
}

struct CheckResult {
  Status status;
  double max_err = 0, naive_err = 0, lse_err = 0, lse_naive = 0;
  int64_t nan_out = 0, nan_lse = 0, rows_checked = 0;
  int64_t written_past = 0;  // out / LSE elements written in rows past seqused_q (must be 0)
  int64_t unread_set = 0;  // K/V elements set to Shape::unread (a test of it needs > 0)
  std::string failure;  // empty: passed
  std::vector<uint8_t> out_bytes;  // the whole output (for determinism checks)
};

// Sets every K/V element of the host problem `h` (host metadata) that no output row reads
// to `value`, in place (h.k.data / h.v.data): keys past a sequence's used length (seqused_k,
// a page's or a packed tensor's rows past it, spare pages) and all keys of sequences without
// queries. The reference never reads them; a kernel that lets them reach P.V fails.
// Returns the number of K and V elements set (-1: `h` is not a valid problem).
int64_t poison_unread_kv(const Args& h, float value);

// Runs longattn::forward with backend=cuda on device copies of random inputs, then checks
// the sampled rows (every written element is checked for NaN: outputs are poisoned first).
CheckResult run_case(const Shape& s, double atol = 1e-3);

}  // namespace longattn::gputest
