// Runtime choice of the kernel: the widest ISA the CPU supports (never -march=native).
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "cpu/kernel_api.h"

namespace longattn::detail::cpu {
namespace {

#if defined(__x86_64__)
// AMX needs CPUID support and, on Linux, permission for the tile state (the kernel leaves
// it off until a process asks: arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)).
bool amx_usable() {
  static const bool ok = [] {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    const bool tile = d & (1u << 24), bf16 = d & (1u << 22);
    const bool avx512bw = b & (1u << 30), avx512vl = b & (1u << 31);
    if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
    const bool avx512bf16 = a & (1u << 5);
    if (!(tile && bf16 && avx512bw && avx512vl && avx512bf16)) return false;
#if defined(__linux__)
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return false;
#endif
  }();
  return ok;
}
#endif

}  // namespace

const CpuKernel& select_kernel(DType in) {
  // Read per call (cheap) so tests can switch paths with setenv between calls.
  const char* want = std::getenv("LONGATTN_CPU_ISA");
  int cap = 3;  // 0 portable, 1 avx2, 2 avx512, 3 amx
  if (want && *want) {
    if (std::strcmp(want, "portable") == 0) cap = 0;
    else if (std::strcmp(want, "avx2") == 0) cap = 1;
    else if (std::strcmp(want, "avx512") == 0) cap = 2;
  }
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("f16c");
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f");
  // AMX takes bf16 and e4m3 (exact in bf16) inputs directly; f16 stays on the FMA kernels.
  if (cap >= 3 && (in == DType::bf16 || in == DType::e4m3) && avx512 && amx_usable()) return kKernelAmx;
  // f32 on the tile unit as three bf16 planes: fp32 accuracy (amx_split_mma.h), faster than
  // the FMA kernel where the tile unit is (see src/cpu/README.md for the numbers).
  // LONGATTN_CPU_F32=fma keeps f32 on the FMA kernel (A/B measurements; a tile unit shared
  // with other work halves the split kernel's speed, see docs/PERFORMANCE.md).
  const char* f32 = std::getenv("LONGATTN_CPU_F32");
  const bool f32_fma = f32 && std::strcmp(f32, "fma") == 0;
  if (cap >= 3 && in == DType::f32 && !f32_fma && avx512 && amx_usable()) return kKernelAmxSplit;
  if (cap >= 2 && avx512) return kKernelAvx512;
  if (cap >= 1 && avx2) return kKernelAvx2;
#else
  (void)in;
  (void)cap;
#endif
  return kKernelPortable;
}

}  // namespace longattn::detail::cpu
