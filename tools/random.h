// Deterministic random numbers for inputs and row sampling (splitmix64: fast, seedable,
// identical on every platform, unlike std:: distributions).
#pragma once

#include <cmath>
#include <cstdint>

namespace longattn::tools {

class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Uniform integer in [0, n).
  int64_t below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }
  // Standard normal (Box-Muller; one value per call keeps the stream simple).
  float normal() {
    double u = uniform(), v = uniform();
    return static_cast<float>(std::sqrt(-2.0 * std::log(1.0 - u)) * std::cos(6.283185307179586 * v));
  }

 private:
  uint64_t s_;
};

}  // namespace longattn::tools
