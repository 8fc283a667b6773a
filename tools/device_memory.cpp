#include "device_memory.h"

#include <stdexcept>

#if defined(LONGATTN_TOOLS_CUDA)
#include <cuda_runtime.h>
#endif

namespace longattn::tools {

#if defined(LONGATTN_TOOLS_CUDA)
namespace {
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
}  // namespace

bool device_runtime_built() { return true; }

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  // cudaMalloc(0) may return nullptr; keep a real pointer so the tensor counts as present.
  check(cudaMalloc(&ptr_, bytes ? bytes : 16), "cudaMalloc");
}
DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);
}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = nullptr;
  }
  return *this;
}
void DeviceBuffer::upload(const void* host, size_t bytes) {
  check(cudaMemcpy(ptr_, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device");
}
void DeviceBuffer::copy_from(const DeviceBuffer& src, size_t bytes) {
  check(cudaMemcpy(ptr_, src.ptr_, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy device to device");
}
void DeviceBuffer::download(void* host, size_t bytes) const {
  check(cudaMemcpy(host, ptr_, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
}
void device_synchronize() { check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }
void set_device(int ordinal) { check(cudaSetDevice(ordinal), "cudaSetDevice"); }
DeviceTimer::DeviceTimer() {
  check(cudaEventCreate(reinterpret_cast<cudaEvent_t*>(&begin_)), "cudaEventCreate");
  check(cudaEventCreate(reinterpret_cast<cudaEvent_t*>(&end_)), "cudaEventCreate");
}
DeviceTimer::~DeviceTimer() {
  cudaEventDestroy(static_cast<cudaEvent_t>(begin_));
  cudaEventDestroy(static_cast<cudaEvent_t>(end_));
}
void DeviceTimer::start() { check(cudaEventRecord(static_cast<cudaEvent_t>(begin_), nullptr), "cudaEventRecord"); }
double DeviceTimer::stop_ms() {
  check(cudaEventRecord(static_cast<cudaEvent_t>(end_), nullptr), "cudaEventRecord");
  check(cudaEventSynchronize(static_cast<cudaEvent_t>(end_)), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(begin_), static_cast<cudaEvent_t>(end_)),
        "cudaEventElapsedTime");
  return ms;
}
size_t device_l2_bytes() {
  int dev = 0, l2 = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev) != cudaSuccess)
    return 0;
  return static_cast<size_t>(l2);
}
std::string device_name() {
  int dev = 0;
  cudaDeviceProp p{};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&p, dev) != cudaSuccess) return "";
  return p.name;
}
#else
namespace {
[[noreturn]] void no_cuda() { throw std::runtime_error("this longattn binary was built without CUDA"); }
}  // namespace

bool device_runtime_built() { return false; }
DeviceBuffer::DeviceBuffer(size_t) { no_cuda(); }
DeviceBuffer::~DeviceBuffer() = default;
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  ptr_ = o.ptr_;
  bytes_ = o.bytes_;
  o.ptr_ = nullptr;
  return *this;
}
void DeviceBuffer::upload(const void*, size_t) { no_cuda(); }
void DeviceBuffer::download(void*, size_t) const { no_cuda(); }
void DeviceBuffer::copy_from(const DeviceBuffer&, size_t) { no_cuda(); }
size_t device_l2_bytes() { return 0; }
void device_synchronize() {}
void set_device(int) { no_cuda(); }
DeviceTimer::DeviceTimer() { no_cuda(); }
DeviceTimer::~DeviceTimer() = default;
void DeviceTimer::start() { no_cuda(); }
double DeviceTimer::stop_ms() { no_cuda(); }
std::string device_name() { return ""; }
#endif

}  // namespace longattn::tools
