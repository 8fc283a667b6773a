// Seeded randomness for test inputs, shared by testing.cpp and kvcache_case.cpp: splitmix64,
// random sequence lengths, prefix sums (cu_seqlens).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace longattn::testing {

// splitmix64: tiny, fast, and good enough to make test inputs independent per seed. `salt`
// separates the streams of different helpers that take the same seed.
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed, uint64_t salt = 0x632BE59BD9B4E019ull) : s(seed * 0x9E3779B97F4A7C15ull + salt) {}
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }  // [0, 1)
  float uniform(float lo, float hi) { return lo + (hi - lo) * float(uniform()); }
  int64_t below(int64_t n) { return n <= 0 ? 0 : int64_t(next() % uint64_t(n)); }
};

// `batch` random lengths in [0, max], the first at max (so the longest length is exercised).
inline std::vector<int32_t> random_lengths(int64_t batch, int64_t max, Rng& rng) {
  std::vector<int32_t> len(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) len[size_t(b)] = int32_t(b == 0 ? max : rng.below(max + 1));
  return len;
}

// Exclusive prefix sums with the total last: cu_seqlens of `len`.
inline std::vector<int32_t> prefix(const std::vector<int32_t>& len) {
  std::vector<int32_t> cu(len.size() + 1, 0);
  for (size_t i = 0; i < len.size(); ++i) cu[i + 1] = cu[i] + len[i];
  return cu;
}

}  // namespace longattn::testing
