// CUDA device memory for the CLI, compiled to stubs that fail cleanly in CPU-only builds.
#pragma once

#include <cstddef>
#include <string>

namespace longattn::tools {

/// True when this binary was built with the CUDA runtime.
bool device_runtime_built();

/// One cudaMalloc'd allocation, freed on destruction. Throws std::runtime_error on failure.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  void upload(const void* host, size_t bytes);
  void copy_from(const DeviceBuffer& src, size_t bytes);
  void download(void* host, size_t bytes) const;

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

/// GPU-side time of work on the legacy default stream (where the CLI launches), measured
/// with CUDA events so host launch and synchronisation overheads are excluded.
class DeviceTimer {
 public:
  DeviceTimer();
  ~DeviceTimer();
  DeviceTimer(const DeviceTimer&) = delete;
  DeviceTimer& operator=(const DeviceTimer&) = delete;
  void start();
  /// Records the end, waits for it, returns milliseconds since start().
  double stop_ms();

 private:
  void* begin_ = nullptr;
  void* end_ = nullptr;
};

/// Makes CUDA device `ordinal` current for this thread. Throws on a CUDA error.
void set_device(int ordinal);

/// Waits for all work on the current device. Throws on a CUDA error.
void device_synchronize();
/// Last-level (L2) cache size of the current device in bytes (0 without CUDA).
size_t device_l2_bytes();
/// Name of the current CUDA device ("" without CUDA).
std::string device_name();

}  // namespace longattn::tools
