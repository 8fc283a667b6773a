// What the CUDA backend asks of a device on every call, asked of the runtime once per process:
// cuda_available() (this build has the CUDA backend and a compute capability 9.0 device) and
// the SM count / L2 size of a device (device_guard.h). These cannot change while the process
// runs (the visible devices are fixed when the runtime initialises); asked per call they were
// a visible part of a small call's host time (docs/PERFORMANCE.md, host time per call).
#include <cuda_runtime.h>

#include <atomic>

#include "cuda/device_guard.h"
#include "longattn/longattn.h"

namespace longattn {

bool cuda_available() {
  static const bool available = [] {
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
  }();
  return available;
}

namespace cuda {

int device_attribute(cudaDeviceAttr attr, int ordinal, int fallback) {
  // One slot per (attribute, device) for the two attributes asked per call; 0 = not asked yet
  // (both are positive). Racing first calls store the same value.
  constexpr int kDevices = 64;
  static std::atomic<int> sms[kDevices], l2[kDevices];
  std::atomic<int>* slot = nullptr;
  if (ordinal >= 0 && ordinal < kDevices) {
    if (attr == cudaDevAttrMultiProcessorCount) slot = &sms[ordinal];
    if (attr == cudaDevAttrL2CacheSize) slot = &l2[ordinal];
  }
  if (slot) {
    if (const int v = slot->load(std::memory_order_relaxed); v > 0) return v;
  }
  int v = 0;
  if (cudaDeviceGetAttribute(&v, attr, ordinal) != cudaSuccess || v <= 0) return fallback;
  if (slot) slot->store(v, std::memory_order_relaxed);
  return v;
}

}  // namespace cuda
}  // namespace longattn
