// fp8 (e4m3) on the dense_vt kernels (256 / 256, and 128 where rows see many keys: tile_size.h
// fp8_vt_worth): V transposed in global memory before the forward (the kernel's P V needs V
// K-major, i.e. keys contiguous; sm90/kernel_config.cuh kVtGlobal).
//
// Vt is (batch, heads_kv, dim, keys_pad) contiguous, keys_pad = seq_k rounded up to 16 (TMA
// wants 16-byte row strides). Within each group of 16 keys, column c = 4 t + i holds key
// 8 (i / 2) + 2 t + i % 2: the permutation of sm90/fp8.cuh, which lets P stay in the registers
// of the S accumulator. Keys at or past seq_k are zeros (TMA zero-fills past keys_pad).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "longattn/longattn.h"

namespace longattn::cuda {

constexpr int64_t vt_keys_pad(int64_t seq_k) { return (seq_k + 15) / 16 * 16; }

// The transpose's grid (blocks of 128 keys of one (sequence, head)) in CUDA's limits: else the
// call takes the upcast path (forward_sm90.cpp).
constexpr bool fp8_vt_fits(int64_t batch, int64_t seq_k, int64_t heads_kv) {
  return heads_kv <= 65535 && batch * ((vt_keys_pad(seq_k) + 127) / 128) <= 0x7fffffff;
}

// vt (device, batch x heads_kv x dim x vt_keys_pad(seq_k) bytes) from v: e4m3 (batch, seq_k,
// heads_kv, dim), dim a multiple of 16 and contiguous, rows 16-byte aligned (the TMA operand
// rules the forward checked).
cudaError_t launch_transpose_v_e4m3(const Tensor& v, uint8_t* vt, cudaStream_t stream);

}  // namespace longattn::cuda
