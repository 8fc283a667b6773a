// Epilogue: O (normalized in registers) and LSE to global memory.
// Direct stores from the accumulator fragment: a quad holds 4 consecutive pairs of one row in
// each 8-column group; 16-bit outputs whose rows are 16-byte aligned (FwdParams::o_vec) first
// transpose four groups across the quad, so each lane writes one group's 16 bytes
// (store_o_half_v16), else each lane writes its pair. Rows at or past row_end (seq_q; ragged
// kinds: the end of the sequence's used rows, q0 + q_len of mask.cuh seq_coord, seqused_q
// applied) are clipped, so rows past seqused_q are never written. 64-bit offsets. Packed GQA
// tiles scatter their rows to (position, head): store_packed.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "cuda/ptx/ldst_matrix.cuh"
#include "cuda/sm90/params.h"

namespace longattn::cuda::sm90 {

// Half `half` (rows row0 and row0 + 8 of the fragment) of this thread's O to out + base,
// whose first column is this thread's 2 (lane % 4). kCols (KernelConfig kColMaps): columns at
// or past p.o_cols (a head dim narrower than the kernel's) are not stored (o_cols is even: a
// pair never straddles it); without it every column is.
template <bool kCols, int NO>
__device__ __forceinline__ void store_o_half(const FwdParams& p, const float (&o)[NO], int half, int64_t base,
                                             int lane) {
  const int32_t lim = kCols ? p.o_cols - 2 * (lane % 4) : 2 * NO;
  if (p.out_type == OutType::f32) {
    float* out = static_cast<float*>(p.out) + base;
#pragma unroll
    for (int c = 0; c < NO / 4; ++c)
      if (8 * c < lim)
        *reinterpret_cast<float2*>(out + 8 * c) = make_float2(o[4 * c + 2 * half], o[4 * c + 2 * half + 1]);
  } else if (p.out_type == OutType::bf16) {
    __nv_bfloat16* out = static_cast<__nv_bfloat16*>(p.out) + base;
#pragma unroll
    for (int c = 0; c < NO / 4; ++c)
      if (8 * c < lim)
        *reinterpret_cast<__nv_bfloat162*>(out + 8 * c) =
            __floats2bfloat162_rn(o[4 * c + 2 * half], o[4 * c + 2 * half + 1]);
  } else {
    __half* out = static_cast<__half*>(p.out) + base;
#pragma unroll
    for (int c = 0; c < NO / 4; ++c)
      if (8 * c < lim)
        *reinterpret_cast<__half2*>(out + 8 * c) = __floats2half2_rn(o[4 * c + 2 * half], o[4 * c + 2 * half + 1]);
  }
}

// Half `half` of this thread's O as 16-byte stores to the row at out + base (column 0; 16-byte
// aligned: FwdParams::o_vec), written where `row_ok`. For each four 8-column groups 4k + j the
// quad's lanes t hold pair t of every group (a 4 x 4 matrix of 32-bit pairs, lane x group); two
// shfl.xor rounds transpose it (round 1 swaps the off-diagonal 2 x 2 blocks between lanes t and
// t ^ 2, round 2 the off-diagonal pairs inside each block between t and t ^ 1), after which lane
// t holds group 4k + t's four pairs in column order: one row's 64 bytes per quad and
// instruction where the pair stores took four instructions of half-used sectors. Every lane of
// the warp must call it (the shuffles); the stores alone are predicated. kCols: groups at or
// past p.o_cols (a multiple of 8) are not stored. NO % 16 == 0 (head dims multiple of 32).
template <class T, bool kCols, int NO>
__device__ __forceinline__ void store_o_half_v16(const FwdParams& p, const float (&o)[NO], int half, int64_t base,
                                                 bool row_ok, int lane) {
  static_assert(NO % 16 == 0, "four 8-column groups per round");
  auto pack = [](float a, float b) -> uint32_t {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      const __nv_bfloat162 v = __floats2bfloat162_rn(a, b);
      return *reinterpret_cast<const uint32_t*>(&v);
    } else {
      const __half2 v = __floats2half2_rn(a, b);
      return *reinterpret_cast<const uint32_t*>(&v);
    }
  };
  T* out = static_cast<T*>(p.out) + base;
  const int t = lane & 3;
  const bool b0 = (t & 1) != 0, b1 = (t & 2) != 0;
#pragma unroll
  for (int k = 0; k < NO / 16; ++k) {
    uint32_t v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = pack(o[4 * (4 * k + j) + 2 * half], o[4 * (4 * k + j) + 2 * half + 1]);
    uint32_t s0 = b1 ? v[0] : v[2], s1 = b1 ? v[1] : v[3];
    s0 = __shfl_xor_sync(0xffffffffu, s0, 2);
    s1 = __shfl_xor_sync(0xffffffffu, s1, 2);
    if (b1) {
      v[0] = s0;
      v[1] = s1;
    } else {
      v[2] = s0;
      v[3] = s1;
    }
    s0 = b0 ? v[0] : v[1];
    s1 = b0 ? v[2] : v[3];
    s0 = __shfl_xor_sync(0xffffffffu, s0, 1);
    s1 = __shfl_xor_sync(0xffffffffu, s1, 1);
    if (b0) {
      v[0] = s0;
      v[2] = s1;
    } else {
      v[1] = s0;
      v[3] = s1;
    }
    const int g = 4 * k + t;  // this lane's 8-column group
    if (row_ok && (!kCols || 8 * g < p.o_cols)) *reinterpret_cast<uint4*>(out + 8 * g) = make_uint4(v[0], v[1], v[2], v[3]);
  }
}

// Half `half` of O to the row at out + row_base (column 0), clipped where !row_ok: the 16-byte
// form where FwdParams::o_vec allows it, else the pairs. Every lane of the warp calls it.
template <bool kCols, int NO>
__device__ __forceinline__ void store_o_row(const FwdParams& p, const float (&o)[NO], int half, int64_t row_base,
                                            bool row_ok, int lane) {
  if constexpr (NO % 16 == 0) {
    if (p.o_vec && p.out_type != OutType::f32) {  // (split-KV's f32 partials clear o_vec too)
      if (p.out_type == OutType::bf16) {
        store_o_half_v16<__nv_bfloat16, kCols>(p, o, half, row_base, row_ok, lane);
      } else {
        store_o_half_v16<__half, kCols>(p, o, half, row_base, row_ok, lane);
      }
      return;
    }
  }
  if (row_ok) store_o_half<kCols>(p, o, half, row_base + 2 * (lane % 4), lane);
}

template <bool kCols, int NO>
__device__ __forceinline__ void store_o(const FwdParams& p, const float (&o)[NO], int64_t b,
                                        int64_t h, int64_t row0, int lane, int64_t row_end) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int64_t row = row0 + 8 * half;
    const bool row_ok = row >= 0 && row < row_end;  // below 0: virtual rows (params.h q_shift)
    store_o_row<kCols>(p, o, half, b * p.out_stride_b + row * p.out_stride_s + h * p.out_stride_h, row_ok, lane);
  }
}

// O through shared memory (FwdParams::o_tma): this warpgroup's 64 rows of O, as T pairs, into
// `slice` ([chunk][rows][128 B] with `chunk_bytes` between chunks, 128B-swizzled: 16-byte unit
// u of row r sits at unit u ^ (r % 8), the layout TMA reads back). One stmatrix x4 per 16
// columns: matrices (rows 0-7 | 8-15 of this warp) x (columns 8c | 8c + 8), whose fragments are
// exactly the accumulator's (lane T: row T / 4, columns 2 (T % 4) + {0, 1}); lane L addresses
// row L % 8 + 8 ((L / 8) % 2) of column group c + L / 16. The 8 rows of a matrix hit 8
// distinct units: no bank conflicts.
template <class T, int NO>
__device__ __forceinline__ void store_o_smem(const float (&o)[NO], uint8_t* slice, int chunk_bytes, int warp,
                                             int lane) {
  auto pack = [](float a, float b) -> uint32_t {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
      return *reinterpret_cast<const uint32_t*>(&h);
    } else {
      const __half2 h = __floats2half2_rn(a, b);
      return *reinterpret_cast<const uint32_t*>(&h);
    }
  };
  const int r = warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
  const uint32_t row_addr = uint32_t(__cvta_generic_to_shared(slice)) + uint32_t(r * 128);
#pragma unroll
  for (int c = 0; c < NO / 4; c += 2) {
    const int g = c + (lane >> 4);  // this lane's column group (8 columns)
    const uint32_t addr = row_addr + uint32_t((g / 8) * chunk_bytes) + uint32_t(((g % 8) ^ (r & 7)) << 4);
    const uint32_t regs[4] = {pack(o[4 * c], o[4 * c + 1]), pack(o[4 * c + 2], o[4 * c + 3]),
                              pack(o[4 * c + 4], o[4 * c + 5]), pack(o[4 * c + 6], o[4 * c + 7])};
    ptx::stmatrix_x4(addr, regs);
  }
}

// Packed GQA (pack_gqa.h): tile row r = r0 + 8 half is query position pos0 + r / g of head
// hk g + r % g (g = 2^p.pack_shift); positions at or past pos_end are clipped. Both O and LSE.
template <bool kCols, int NO>
__device__ __forceinline__ void store_packed(const FwdParams& p, const float (&o)[NO], const float (&lse)[2],
                                             int64_t b, int32_t hk, int64_t pos0, int r0, int lane,
                                             int64_t pos_end) {
  const int32_t sh = p.pack_shift, gm = (1 << sh) - 1;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int32_t r = r0 + 8 * half;
    const int64_t pos = pos0 + (r >> sh), h = (int64_t(hk) << sh) + (r & gm);
    store_o_row<kCols>(p, o, half, b * p.out_stride_b + pos * p.out_stride_s + h * p.out_stride_h, pos < pos_end, lane);
    if (pos >= pos_end) continue;
    if (p.lse != nullptr && lane % 4 == 0)
      p.lse[b * p.lse_stride_b + h * p.lse_stride_h + pos * p.lse_stride_s] = lse[half];
  }
}

__device__ __forceinline__ void store_lse(const FwdParams& p, const float (&lse)[2], int64_t b,
                                          int64_t h, int64_t row0, int lane, int64_t row_end) {
  if (p.lse == nullptr || lane % 4 != 0) return;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    int64_t row = row0 + 8 * half;
    if (row >= 0 && row < row_end)
      p.lse[b * p.lse_stride_b + h * p.lse_stride_h + row * p.lse_stride_s] = lse[half];
  }
}

}  // namespace longattn::cuda::sm90
