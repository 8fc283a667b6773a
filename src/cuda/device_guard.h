// Selects a CUDA device for the duration of a call and restores the caller's choice.
#pragma once

#include <cuda_runtime.h>

namespace longattn::cuda {

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
  int num_sms() const {
    int n = 0;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev_) != cudaSuccess || n <= 0) n = 132;
    return n;
  }

 private:
  int prev_ = -1, dev_ = 0;
  bool ok_ = false;
};

}  // namespace longattn::cuda
