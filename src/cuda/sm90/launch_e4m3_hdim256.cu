// Instantiation: e4m3 inputs, head dims 256 / 256 (the dense kind, V pre-transposed: fp8_vt.h).
#include "cuda/sm90/launch_impl.cuh"

namespace longattn::cuda::sm90 {
template cudaError_t launch_fwd<InType::e4m3, 256, 256>(const LaunchArgs&);
}
