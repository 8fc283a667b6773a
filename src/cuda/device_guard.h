// Selects a CUDA device for the duration of a call and restores the caller's choice.
#pragma once

#include <cuda_runtime.h>

namespace longattn::cuda {

// cudaDeviceGetAttribute, remembered per device for the SM count and the L2 size (device.cpp);
// `fallback` when the query fails.
int device_attribute(cudaDeviceAttr attr, int ordinal, int fallback);

class DeviceGuard {
 public:
  explicit DeviceGuard(int ordinal) {
    if (cudaGetDevice(&prev_) != cudaSuccess) prev_ = -1;
    ok_ = prev_ == ordinal || cudaSetDevice(ordinal) == cudaSuccess;
    dev_ = ordinal;
  }
  ~DeviceGuard() {
    if (prev_ >= 0 && prev_ != dev_) cudaSetDevice(prev_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  bool ok() const { return ok_; }
  int num_sms() const { return device_attribute(cudaDevAttrMultiProcessorCount, dev_, 132); }

 private:
  int prev_ = -1, dev_ = 0;
  bool ok_ = false;
};

}  // namespace longattn::cuda
