// Instantiation: e4m3 inputs, head dim 128.
#include "cuda/sm90/launch_impl.cuh"

namespace longattn::cuda::sm90 {
template cudaError_t launch_fwd<InType::e4m3, 128, 128>(const LaunchArgs&);
}
