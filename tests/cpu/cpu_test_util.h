// Helpers shared by the CPU backend tests: the kernel ISAs this machine runs (each test is
// repeated per ISA through LONGATTN_CPU_ISA) and a one-line oracle check.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "support/testing.h"

namespace longattn::testing {

// Kernel paths this CPU can run: the portable one always, AVX2/AVX-512 when supported.
inline std::vector<std::string> cpu_isas() {
  std::vector<std::string> v = {"portable"};
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c")) {
    v.push_back("avx2");
    if (__builtin_cpu_supports("avx512f")) v.push_back("avx512");
  }
#endif
  return v;
}

// The widest ISA (what users get by default).
inline std::string best_isa() { return cpu_isas().back(); }

// Selects the kernel for the following forward calls; restores the default on scope exit.
struct IsaScope {
  explicit IsaScope(const std::string& isa) { setenv("LONGATTN_CPU_ISA", isa.c_str(), 1); }
  ~IsaScope() { unsetenv("LONGATTN_CPU_ISA"); }
};

// Runs spec on the CPU backend and checks it against the float64 reference (oracle rule,
// poisoned outputs). Returns the failure text ("" on success).
inline std::string cpu_check(const CaseSpec& spec, int threads = 0, double atol = 1e-3) {
  Case c = make_case(spec);
  c.args.backend = Backend::cpu;
  c.args.num_threads = threads;
  OracleResult r = run_and_check(c.args, atol);
  return r.failure;
}

// Name fragment for parameterized tests.
inline std::string isa_name(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

}  // namespace longattn::testing
