// The attention kernel in plain C++ for CPUs without AVX2/FMA (and non-x86 builds).
#include "cpu/simd_portable.h"

#define LONGATTN_CPU_NS cpu_portable
#include "cpu/attention_kernel.h"

namespace longattn::detail::cpu {
const CpuKernel kKernelPortable = {"portable", cpu_portable::MR, 128, &cpu_portable::scratch_floats,
                                   &cpu_portable::process};
}  // namespace longattn::detail::cpu
