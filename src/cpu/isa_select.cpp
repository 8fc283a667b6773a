// Run-time choice of the kernel from Args::cpu_isa and what the CPU supports (never
// -march=native).

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "cpu/kernel_api.h"
#include "longattn/longattn.h"

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

struct Features {
  bool avx2 = false, avx512 = false, amx = false;
};

Features features() {
  static const Features f = [] {
    Features r;
#if defined(__x86_64__)
    __builtin_cpu_init();
    r.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
             __builtin_cpu_supports("f16c");
    r.avx512 = r.avx2 && __builtin_cpu_supports("avx512f");
    r.amx = r.avx512 && amx_usable();
#endif
    return r;
  }();
  return f;
}

}  // namespace

bool isa_available(CpuIsa isa) {
  const Features f = features();
  switch (isa) {
    case CpuIsa::automatic:
    case CpuIsa::portable: return true;
    case CpuIsa::avx2: return f.avx2;
    case CpuIsa::avx512: return f.avx512;
    case CpuIsa::amx: return f.amx;
  }
  return false;
}

const CpuKernel& select_kernel(DType in, CpuIsa isa) {
  const Features f = features();
  if (isa == CpuIsa::automatic)
    isa = f.amx ? CpuIsa::amx : f.avx512 ? CpuIsa::avx512 : f.avx2 ? CpuIsa::avx2 : CpuIsa::portable;
#if defined(__x86_64__)
  switch (isa) {
    case CpuIsa::amx:
      // AMX takes bf16 and e4m3 (exact in bf16) inputs directly, and f32 as three bf16
      // planes at fp32 accuracy (amx_split_mma.h); f16 stays on the FMA kernel.
      if (in == DType::bf16 || in == DType::e4m3) return kKernelAmx;
      if (in == DType::f32) return kKernelAmxSplit;
      return kKernelAvx512;
    case CpuIsa::avx512: return kKernelAvx512;
    case CpuIsa::avx2: return kKernelAvx2;
    default: break;
  }
#else
  (void)in;
#endif
  return kKernelPortable;
}

}  // namespace longattn::detail::cpu

namespace longattn {
bool cpu_isa_available(CpuIsa isa) { return detail::cpu::isa_available(isa); }
}  // namespace longattn
