// Host side of the kvcache serving path on the CUDA backend (longattn.h KvCacheArgs): what the
// pre-kernels (append_rotary.h) need, and the attention-only arguments the forward kernels
// then run. The kernels cannot start a sequence's keys at a cache slot or read a cache row
// other than b, so cache_batch_idx / cache_leftpad become layouts they already serve:
//  - dense cache with cache_batch_idx or cache_leftpad: the cache viewed as ragged rows
//    (rows x slots, heads_kv, dim), cu_seqlens_k[b] = row * slots + leftpad, seqused_k = keys;
//  - paged cache with cache_batch_idx: the page-table rows gathered into a (batch, max_pages)
//    scratch table; paged with cache_leftpad is not served (NotSupported);
//  - seqused_k: the keys after the append (end - leftpad + new), computed on the device;
//  - q: the rotated copy in scratch (rotary), else the caller's.
// Scratch is one stream-ordered allocation (cudaMallocAsync), freed after the attention.
#pragma once

#include <cuda_runtime.h>

#include "common/problem.h"
#include "cuda/append_rotary.h"

namespace longattn::cuda {

struct KvcachePrepass {
  void* scratch = nullptr;
  KvMetaParams meta;
  AppendParams append;
  ElemType elem = ElemType::bf16;
  Args attn;                // attention-only arguments over the updated cache
  detail::Problem problem;  // built from attn
  // Frees the scratch (stream-ordered, after everything launched on `stream`).
  cudaError_t release(cudaStream_t stream);
};

// Refuses what the pre-kernels / kernels cannot serve (NotSupported naming the argument),
// allocates the scratch and fills `kv`. Launches nothing and writes no caller memory.
Status kvcache_prepare(const Args& a, const detail::Problem& p, cudaStream_t stream, KvcachePrepass* kv);

// Launches the metadata check, then (unless `report` finds a failed check: one stream
// synchronization, and Invalid naming the argument) the append + rotary kernel.
Status kvcache_run(KvcachePrepass& kv, int num_sms, bool report, cudaStream_t stream);

}  // namespace longattn::cuda
