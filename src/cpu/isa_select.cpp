// Runtime choice of the kernel: the widest ISA the CPU supports (never -march=native).
#include <cstdlib>
#include <cstring>

#include "cpu/kernel_api.h"

namespace longattn::detail::cpu {
namespace {

const CpuKernel& detect() {
  const char* want = std::getenv("LONGATTN_CPU_ISA");
  const bool any = want == nullptr || *want == '\0';
#if defined(__x86_64__) || defined(_M_X64)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("f16c");
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f");
  if (avx512 && (any || std::strcmp(want, "avx512") == 0)) return kKernelAvx512;
  if (avx2 && (any || std::strcmp(want, "avx512") == 0 || std::strcmp(want, "avx2") == 0))
    return kKernelAvx2;
#else
  (void)any;
#endif
  return kKernelPortable;
}

}  // namespace

const CpuKernel& select_kernel() {
  // Read per call (cheap) so tests can switch paths with setenv between calls.
  return detect();
}

}  // namespace longattn::detail::cpu
