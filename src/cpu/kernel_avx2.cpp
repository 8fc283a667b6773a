// The attention kernel for x86-64 CPUs with AVX2 + FMA + F16C. This file alone is compiled
// with -mavx2 -mfma -mf16c (src/cpu/CMakeLists.txt); select_kernel() runs it only after
// __builtin_cpu_supports confirms the CPU has those features.
#include "cpu/simd_avx2.h"

#define LONGATTN_CPU_NS cpu_avx2
#include "cpu/attention_kernel.h"

namespace longattn::detail::cpu {
const CpuKernel kKernelAvx2 = {"avx2", cpu_avx2::MR, 256, &cpu_avx2::scratch_floats,
                               &cpu_avx2::process};
}  // namespace longattn::detail::cpu
