// The attention kernel for f32 inputs on CPUs with AMX: each f32 operand (Q, K, V and the
// softmax's P) is split into three bf16 planes and every product runs as six TDPBF16PS
// passes (amx_split_mma.h), which keeps fp32 accuracy. Same flags and same run-time checks
// as kernel_amx.cpp.
#include <immintrin.h>

#include <cstring>

#include "cpu/simd_avx512.h"

namespace longattn::detail::cpu_amx_split {
namespace {
using Simd = cpu_avx512::Simd;
}  // namespace
}  // namespace longattn::detail::cpu_amx_split

#define LONGATTN_CPU_NS cpu_amx_split
#define LONGATTN_CPU_AMX 1
#define LONGATTN_CPU_AMX_SPLIT 1
#ifndef LONGATTN_CPU_BN
#define LONGATTN_CPU_BN 256
#endif
#include "cpu/attention_kernel.h"

namespace longattn::detail::cpu_amx_split {
namespace {

// Items whose Q/K/V hold Inf or NaN (noticed while packing, before anything is written)
// run on the AVX-512 FMA kernel instead: same inputs, same item, so still bitwise
// reproducible for any thread count.
void process_checked(const cpu::KernelConst& kc, const cpu::ItemView& it, float* scratch) {
  if (!process_item(kc, it, scratch)) cpu::kKernelAvx512.process(kc, it, scratch);
}

int64_t scratch_checked(const cpu::KernelConst& kc, int64_t rows_max) {
  const int64_t own = scratch_floats(kc, rows_max), fallback = cpu::kKernelAvx512.scratch_floats(kc, rows_max);
  return own > fallback ? own : fallback;
}

}  // namespace
}  // namespace longattn::detail::cpu_amx_split

namespace longattn::detail::cpu {
// 512-row items: the item's Q (three planes) and fp32 O plus the K/V tiles (three planes
// each) stay within the 2 MB L2.
const CpuKernel kKernelAmxSplit = {"amx_split", cpu_amx_split::MR, 512, &cpu_amx_split::scratch_checked,
                                   &cpu_amx_split::process_checked};
}  // namespace longattn::detail::cpu
