// The boundary between the CPU driver (threads, work items, addressing; portable code) and
// the per-ISA attention kernels (compiled with their own -m flags). Only plain data crosses
// it: the kernels never call inline/template code shared with other translation units, so
// the linker can never pick an AVX copy of a shared function for the portable path.
#pragma once

#include <cstdint>

#include "longattn/types.h"

namespace longattn::detail::cpu {

// One query row of a work item: a (token, query head) pair.
struct RowDesc {
  const void* q = nullptr;  // first element of the row in q
  void* out = nullptr;      // first element of the row in out
  float* lse = nullptr;     // LSE element (nullptr: not requested)
  int64_t lo = 0, hi = 0;   // visible keys [lo, hi) in sequence key coordinates
  float sink2 = 0.0f;       // sink logit times log2(e) (ignored without sinks)
};

// One work item: rows of `group` query heads sharing one kv head, over one block of tokens.
// Rows are ordered token-major, head-minor, so a row strip holds near-identical masks.
struct ItemView {
  int64_t rows = 0;
  const RowDesc* row = nullptr;
  int64_t key_lo = 0, key_hi = 0;     // union of the rows' visible ranges
  const void* const* krow = nullptr;  // krow[j - key_lo]: key j's first element, j in [key_lo, key_hi)
  const void* const* vrow = nullptr;  // same for values
  float q_descale = 1.0f, k_descale = 1.0f, v_descale = 1.0f;
};

// Per-call constants.
struct KernelConst {
  int64_t dqk = 0, dv = 0;
  DType in = DType::bf16, out = DType::bf16;
  float qscale2 = 1.0f;   // softmax scale * log2(e): logits come out in log2 units
  float softcap2 = 0.0f;  // softcap * log2(e) (0: off); tanh is applied in natural units
  bool has_sinks = false;
};

// One ISA's kernel.
struct CpuKernel {
  const char* name;
  int mr;           // row-strip height: work items are sized to multiples of it
  int rows_target;  // rows per work item (query tokens x group heads) to aim for
  // Scratch (floats, 64-byte aligned by the caller) for items of up to `rows_max` rows.
  int64_t (*scratch_floats)(const KernelConst& kc, int64_t rows_max);
  // Computes one item: reads q/k/v through the view, writes out (and lse) of its rows.
  void (*process)(const KernelConst& kc, const ItemView& item, float* scratch);
};

extern const CpuKernel kKernelPortable;
#if defined(__x86_64__) || defined(_M_X64)
extern const CpuKernel kKernelAvx2;
extern const CpuKernel kKernelAvx512;
extern const CpuKernel kKernelAmx;  // bf16 and e4m3 inputs only
extern const CpuKernel kKernelAmxSplit;  // f32 inputs as three bf16 planes (fp32 accuracy)
#endif

// Whether this CPU (and OS, for the tile state) runs kernels of `isa`.
bool isa_available(CpuIsa isa);

// The kernel of `isa` for inputs of dtype `in` (`isa` available, checked by validation).
// automatic resolves to the widest available: amx, avx512, avx2, portable. Under amx,
// bf16/e4m3 run on kKernelAmx, f32 on kKernelAmxSplit and f16 on kKernelAvx512.
const CpuKernel& select_kernel(DType in, CpuIsa isa);

}  // namespace longattn::detail::cpu
