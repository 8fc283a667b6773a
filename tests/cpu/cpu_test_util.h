// Helpers shared by the CPU backend tests: the kernel ISAs this machine runs (each test is
// repeated per ISA through Args::cpu_isa) and a one-line oracle check.
#pragma once

#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "support/testing.h"

namespace longattn::testing {

// Kernel ISAs this CPU can run: portable always, AVX2/AVX-512 when supported, AMX (bf16,
// e4m3 and f32 inputs; f16 falls back to AVX-512 under it) when the OS grants the tile state.
inline std::vector<CpuIsa> cpu_isas() {
  std::vector<CpuIsa> v;
  for (CpuIsa isa : {CpuIsa::portable, CpuIsa::avx2, CpuIsa::avx512, CpuIsa::amx})
    if (cpu_isa_available(isa)) v.push_back(isa);
  return v;
}

// Runs spec on the CPU backend with kernel `isa` and checks it against the float64 reference
// (oracle rule, poisoned outputs). Returns the failure text ("" on success).
inline std::string cpu_check(const CaseSpec& spec, CpuIsa isa = CpuIsa::automatic, int threads = 0,
                             double atol = 1e-3) {
  Case c = make_case(spec);
  c.args.backend = Backend::cpu;
  c.args.cpu_isa = isa;
  c.args.num_threads = threads;
  OracleResult r = run_and_check(c.args, atol);
  return r.failure;
}

// Base of the tests repeated per kernel ISA: GetParam() is the Args::cpu_isa they run.
class PerIsaTest : public ::testing::TestWithParam<CpuIsa> {
 protected:
  CpuIsa isa() const { return GetParam(); }
  std::string check(const CaseSpec& spec, int threads = 0, double atol = 1e-3) const {
    return cpu_check(spec, GetParam(), threads, atol);
  }
};

// Name fragment for parameterized tests ("portable", "avx2", ...).
inline std::string isa_name(const ::testing::TestParamInfo<CpuIsa>& info) { return cpu_isa_name(info.param); }

}  // namespace longattn::testing

namespace longattn {
// gtest prints the parameter with the test list ("GetParam() = avx512").
inline void PrintTo(CpuIsa isa, std::ostream* os) { *os << cpu_isa_name(isa); }
}  // namespace longattn
