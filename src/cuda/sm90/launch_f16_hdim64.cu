// Instantiation: f16 inputs, head dim 64.
#include "cuda/sm90/launch_impl.cuh"

namespace longattn::cuda::sm90 {
template cudaError_t launch_fwd<InType::f16, 64, 64>(const LaunchArgs&);
}
