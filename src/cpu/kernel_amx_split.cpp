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

// True when none of the n floats is Inf or NaN (exponent bits all ones).
bool all_finite(const float* p, int64_t n) {
  const __m512i e = _mm512_set1_epi32(0x7f800000);
  __mmask16 bad = 0;
  for (int64_t i = 0; i < n; i += 16) {
    const int64_t left = n - i;
    const __mmask16 m = left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
    bad |= _mm512_mask_cmpeq_epi32_mask(m, _mm512_and_si512(_mm512_maskz_loadu_epi32(m, p + i), e), e);
  }
  return bad == 0;
}

// An Inf in a high plane times a zero low plane of the other operand is NaN where the exact
// product is +-Inf, so items whose Q/K/V hold Inf or NaN run on the AVX-512 FMA kernel
// instead (same inputs, same item, so still bitwise reproducible). The scan reads the item's
// rows once (~1-3% of its time; the packing then finds them in cache).
bool item_finite(const cpu::KernelConst& kc, const cpu::ItemView& it) {
  for (int64_t r = 0; r < it.rows; ++r)
    if (!all_finite(static_cast<const float*>(it.row[r].q), kc.dqk)) return false;
  for (int64_t j = 0; j < it.key_hi - it.key_lo; ++j)
    if (!all_finite(static_cast<const float*>(it.krow[j]), kc.dqk) ||
        !all_finite(static_cast<const float*>(it.vrow[j]), kc.dv))
      return false;
  return true;
}

void process_checked(const cpu::KernelConst& kc, const cpu::ItemView& it, float* scratch) {
  if (item_finite(kc, it)) process(kc, it, scratch);
  else cpu::kKernelAvx512.process(kc, it, scratch);
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
