// cuda_available(): this build has the CUDA backend and a compute capability 9.0 device.
#include <cuda_runtime.h>

#include "longattn/longattn.h"

namespace longattn {

bool cuda_available() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    cudaGetLastError();  // clear the sticky "no device" error for later callers
    return false;
  }
  for (int i = 0; i < n; ++i) {
    int major = 0, minor = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, i);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, i);
    if (major == 9 && minor == 0) return true;
  }
  return false;
}

}  // namespace longattn
