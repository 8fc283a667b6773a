// Paged K/V copied into dense (batch, keys, heads_kv, dim) tensors, for the calls no paged
// kernel serves: head dims that run on the hdim-256 kernel without being 256 / 256 (e.g. 200 /
// 200 or FA3's 64 / 256). Its paged kind has no column-addressed maps (kernel_config.cuh
// kColMaps: its 24-register producer spilled with them), while its dense kinds have them, so
// forward_sm90.cpp (paged_gather_forward) gathers the pages each sequence reads and runs the
// dense call with seqused_k. A correctness path: it costs a read and a write of the keys the
// call uses, not a fast path.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "longattn/longattn.h"

namespace longattn::cuda {

// dst (contiguous (batch, keys, pool.shape[2], pool.shape[3]), pool's dtype, 16-byte aligned)
// row (b, t) = slot t % page_size of page page_table[b, t / page_size] of `pool` (num_pages,
// page_size, heads, dim; last dim contiguous, rows 16-byte aligned, dim x element size a
// multiple of 16 bytes) for t < min(keys, seqused_k[b]) (seqused_k absent: keys); zeros for
// later t, for t past the page table's row and for entries outside [0, num_pages) (nothing is
// read out of bounds).
cudaError_t launch_gather_pages(const Tensor& pool, const Tensor& page_table, const Tensor& seqused_k, int64_t batch,
                                int64_t keys, void* dst, cudaStream_t stream);

}  // namespace longattn::cuda
