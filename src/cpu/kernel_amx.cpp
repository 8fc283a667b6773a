// The attention kernel for bf16 inputs on CPUs with AMX (Sapphire Rapids and later): both
// matrix products on the tile unit, softmax and masks in AVX-512. Compiled with the AMX and
// AVX-512 flags (src/cpu/CMakeLists.txt); select_kernel() runs it only after CPUID reports
// AMX-BF16/AMX-TILE/AVX512-BF16 and the kernel granted this process the tile state.
#include <immintrin.h>

#include <cstring>

#include "cpu/simd_avx512.h"

namespace longattn::detail::cpu_amx {
namespace {
using Simd = cpu_avx512::Simd;
}  // namespace
}  // namespace longattn::detail::cpu_amx

#define LONGATTN_CPU_NS cpu_amx
#define LONGATTN_CPU_AMX 1
// 128-key tiles: the softmax's per-row work (max/sum reductions, rescale test) is spread
// over twice the columns; measured +15-20% over 64 at head dims 64 and 128.
#ifndef LONGATTN_CPU_BN
#define LONGATTN_CPU_BN 128
#endif
#include "cpu/attention_kernel.h"

namespace longattn::detail::cpu {
const CpuKernel kKernelAmx = {"amx", cpu_amx::MR, 512, &cpu_amx::scratch_floats, &cpu_amx::process};
}  // namespace longattn::detail::cpu
