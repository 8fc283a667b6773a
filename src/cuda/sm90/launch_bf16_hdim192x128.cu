// Instantiation: bf16 inputs, q / k head dim 192, v head dim 128 (DeepSeek-style heads).
#include "cuda/sm90/launch_impl.cuh"

namespace longattn::cuda::sm90 {
template cudaError_t launch_fwd<InType::bf16, 192, 128>(const LaunchArgs&);
}
