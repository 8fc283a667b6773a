// The attention kernel for x86-64 CPUs with AVX-512F (16-wide FMA, 32 vector registers).
// Compiled with -mavx512f -mavx2 -mfma -mf16c (src/cpu/CMakeLists.txt); select_kernel()
// runs it only when __builtin_cpu_supports reports avx512f.
#include "cpu/simd_avx512.h"

#define LONGATTN_CPU_NS cpu_avx512
#include "cpu/attention_kernel.h"

namespace longattn::detail::cpu {
const CpuKernel kKernelAvx512 = {"avx512", cpu_avx512::MR, 512, &cpu_avx512::scratch_floats,
                                 &cpu_avx512::process};
}  // namespace longattn::detail::cpu
