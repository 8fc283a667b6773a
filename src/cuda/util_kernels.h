// Small helper kernels of the CUDA backend (host launchers).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "longattn/longattn.h"

namespace longattn::cuda {

// out = 0 and lse = -inf (or the head's sink, when `sinks` is present) for every (b, s, h):
// attention with no keys (seq_k == 0).
cudaError_t launch_fill_empty(const Tensor& out, const Tensor& lse, const Tensor& sinks,
                              cudaStream_t stream);

// longattn::combine on device tensors (validated shapes).
cudaError_t launch_combine(const CombineArgs& a, cudaStream_t stream);

}  // namespace longattn::cuda
