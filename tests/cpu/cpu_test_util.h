// Helpers shared by the CPU backend tests: the kernel ISAs this machine runs (each test is
// repeated per ISA through LONGATTN_CPU_ISA) and a one-line oracle check.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "cpu/kernel_api.h"
#include "support/testing.h"

namespace longattn::testing {

// Kernel paths this CPU can run: the portable one always, AVX2/AVX-512 when supported,
// AMX (bf16 inputs; other dtypes fall back to AVX-512 under it) when the library enables it.
inline std::vector<std::string> cpu_isas() {
  std::vector<std::string> v;
  for (const char* isa : {"portable", "avx2", "avx512", "amx"}) {
    setenv("LONGATTN_CPU_ISA", isa, 1);
    if (std::string(detail::cpu::select_kernel(DType::bf16).name) == isa) v.push_back(isa);
  }
  unsetenv("LONGATTN_CPU_ISA");
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
