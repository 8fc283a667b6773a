// The attention kernel for bf16 and e4m3 inputs on CPUs with AMX (Sapphire Rapids and
// later): both matrix products on the tile unit, softmax and masks in AVX-512. Compiled with the AMX and
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
// 256-key tiles: the softmax's per-row work (max/sum reductions, rescale test) and the O
// tile loads/stores of P.V are spread over more keys; 64 and 128 keys were slower, 512 no
// faster and more masked work under causal (docs/PERFORMANCE.md, CPU backend).
#ifndef LONGATTN_CPU_BN
#define LONGATTN_CPU_BN 256
#endif
#include "cpu/attention_kernel.h"

namespace longattn::detail::cpu {
// 1024-row work items: each K/V tile is packed once for twice the rows of the FMA kernels
// (faster than 512 rows; 2048 no better).
const CpuKernel kKernelAmx = {"amx", cpu_amx::MR, 1024, &cpu_amx::scratch_floats, &cpu_amx::process};
}  // namespace longattn::detail::cpu
