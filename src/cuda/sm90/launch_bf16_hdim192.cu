// Instantiation: bf16 inputs, head dim 192.
#include "cuda/sm90/launch_impl.cuh"

namespace longattn::cuda::sm90 {
template cudaError_t launch_fwd<InType::bf16, 192, 192>(const LaunchArgs&);
}
