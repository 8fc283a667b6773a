// Shape builders shared by the GPU forward tests (test_forward.cpp: the parameterised suites;
// test_forward_edges.cpp: determinism, schedule, softcap modes, refusals, empty inputs).
#pragma once

#include <cstdint>

#include "gpu_case.h"

namespace longattn::gputest {

// Softcap runs tanh.approx.f32 (max relative error 2^-11, as FlashAttention-3), so a capped
// logit may be off by up to cap * 2^-11 beyond what the naive float computation shows; the
// absolute tolerance grows by that bound (it moves the LSE by at most as much).
inline double atol_for(const Shape& s) { return 1e-3 + (s.softcap > 0 ? double(s.softcap) / 2048.0 : 0.0); }

inline Shape S(int64_t b, int64_t sq, int64_t sk, int64_t hq, int64_t hkv, int64_t d, bool causal,
        DType in = DType::bf16, DType out = DType::bf16) {
  Shape s = dense_shape(b, sq, sk, hq, hkv, d, causal);
  s.in = in;
  s.out = out;
  s.seed = uint64_t(b * 131 + sq * 7 + sk * 3 + hq + d + causal);
  // The float64 reference is single-threaded: check every row of short sequences and a
  // sample (edges, tile boundaries, random) of long ones.
  s.rows_per_head = sq * sk > 4096LL * 4096 ? 24 : 64;
  return s;
}

// Issue 5: softcap, sinks, sliding windows, chunks (the feature kernel), alone and together,
// on odd sizes, GQA, the three head dims, both alignments; windows smaller than a tile,
// straddling tiles, and rows that see no key at all (with and without sinks).
inline Shape F(int64_t b, int64_t sq, int64_t sk, int64_t hq, int64_t hkv, int64_t d, bool causal) {
  Shape s = S(b, sq, sk, hq, hkv, d, causal);
  s.seed += 1000;
  return s;
}
inline Shape cap(Shape s, float c) { s.softcap = c; return s; }
inline Shape sinks(Shape s, float lo = -1.f, float hi = 4.f) { s.sinks = true; s.sink_lo = lo; s.sink_hi = hi; return s; }
inline Shape win(Shape s, int64_t l, int64_t r) { s.window_left = l; s.window_right = r; return s; }
inline Shape chunk(Shape s, int64_t c) { s.chunk = c; return s; }
inline Shape tl(Shape s) { s.top_left = true; return s; }

}  // namespace longattn::gputest
