// fp8 (e4m3) calls whose head dims no fp8 kernel serves (above 128: tile_size.h kernel_dims),
// and the others forward_sm90.cpp fp8_upcast_needed names, run on the f16 kernels
// (forward_sm90.cpp fp8_upcast_forward). e4m3 -> f16 is exact (3 of 10 mantissa bits; e4m3's
// exponents 2^-9 .. 2^8 lie inside f16's), so K and V are converted as they are, whatever
// their layout (paged pools too). The descales move: Q is converted times
// q_descale x k_descale of its (sequence, kv head) (one f16 rounding of a logit input, 2^-11
// relative, far below the fp8 kernel's e4m3 rounding of P); V times v_descale where K / V are
// dense (each row's batch index is its sequence), else each output row is multiplied by its
// v_descale after the f16 forward (the LSE does not depend on V). Preconditions of the f16
// path: |q| x q_descale x k_descale < 65504 (f16's largest value, 146x e4m3's), and |v| x
// v_descale < 65504 for dense K / V. The copies carry the descales because the alternatives
// cost more: bf16 copies round Q x descales past the fp8 error bound, and descales applied by
// the 16-bit kernels need a register their paged consumers do not have (docs/PERFORMANCE.md,
// "What was tried and lost").
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "longattn/longattn.h"

namespace longattn::cuda {

// dst (contiguous, src's shape) = f16(src), src e4m3 of rank 3 or 4, any element strides. With
// `qd` / `kd` (float32 (batch, heads_kv), either may be absent) each element is multiplied by
// qd x kd of its (sequence, head / group) first: dense src (batch, seq, heads, dim), ragged
// (tokens, heads, dim) with `cu_seqlens` (its sequences' starts; the sequence by bisection).
cudaError_t launch_upcast_e4m3(const Tensor& src, __half* dst, const Tensor& qd, const Tensor& kd, int64_t group,
                               const Tensor& cu_seqlens, cudaStream_t stream);

// out (bf16 / f16 / f32, dense (batch, seq, heads, dv) or ragged (tokens, heads, dv) with
// `cu_seqlens_q`) *= vd[sequence, head / group] on the rows the forward wrote (seqused_q
// applied; ragged tokens past the last sequence untouched).
cudaError_t launch_scale_rows(const Tensor& out, const Tensor& vd, int64_t group, const Tensor& cu_seqlens_q,
                              const Tensor& seqused_q, cudaStream_t stream);

}  // namespace longattn::cuda
