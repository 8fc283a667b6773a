// Small helper kernels of the CUDA backend (host launchers).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "longattn/longattn.h"

namespace longattn::cuda {

// out = 0 and lse = -inf (or the head's sink, when `sinks` is present) for every (b, s, h):
// attention with no keys (seq_k == 0). With `seqused_q` (device int32 (batch)) only the rows
// each sequence uses: dense (b, s) with s < seqused_q[b]; ragged (`cu_seqlens_q` present)
// token t of sequence b with t - cu_seqlens_q[b] < seqused_q[b]. Other rows are not touched.
cudaError_t launch_fill_empty(const Tensor& out, const Tensor& lse, const Tensor& sinks,
                              const Tensor& cu_seqlens_q, const Tensor& seqused_q, cudaStream_t stream);

// Args::check_page_table: scans the page-table entries each sequence reads (the first
// ceil(keys / page_size), keys = seqused_k[b] or max_pages * page_size) and writes the first
// bad one as (b, i, entry) to *bad_host (b = -1: all in [0, num_pages)). Synchronizes
// `stream` (a debug check).
cudaError_t check_page_table(const Tensor& page_table, const Tensor& seqused_k, int64_t page_size,
                             int64_t num_pages, cudaStream_t stream, int64_t bad_host[3]);

// lse (batch, heads, seq; any strides) from `src`, the LSE of the same call as a batch of its
// chunks (chunk_batch.h): (batch x seq / rows, heads, rows) contiguous floats.
cudaError_t launch_lse_from_chunks(const float* src, const Tensor& lse, int64_t rows, cudaStream_t stream);

// dst (contiguous (rows x times, cols) floats) = each row of `src` (float32 (rows, cols), any
// strides) `times` over: dst row r x times + t is src row r.
cudaError_t launch_repeat_rows(const Tensor& src, int64_t times, float* dst, cudaStream_t stream);

// longattn::combine on device tensors (validated shapes).
cudaError_t launch_combine(const CombineArgs& a, cudaStream_t stream);

}  // namespace longattn::cuda
