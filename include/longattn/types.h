// longattn public types: dtypes, devices, tensor views, masks, status.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

namespace longattn {

/// Element type of a tensor.
enum class DType : uint8_t {
  f32,   ///< IEEE float32
  f16,   ///< IEEE float16
  bf16,  ///< bfloat16
  e4m3,  ///< fp8 e4m3 (OCP "fn" variant: no inf, max 448)
  i32,   ///< int32 (index tensors: cu_seqlens, seqused_q / seqused_k, page tables)
};

/// Size in bytes of one element of `t`.
int64_t dtype_size(DType t);
/// Short name of `t` ("bf16", "f32", ...).
const char* dtype_name(DType t);

/// Where a tensor's memory lives.
enum class DeviceKind : uint8_t {
  cpu,   ///< host memory
  cuda,  ///< device memory of CUDA device `ordinal`
};

/// A device: kind plus ordinal (ignored for cpu).
struct Device {
  DeviceKind kind = DeviceKind::cpu;  ///< host or CUDA
  int ordinal = 0;                    ///< CUDA device ordinal
};

/// Largest tensor rank the API uses.
inline constexpr int kMaxRank = 4;

/// A non-owning view of a strided tensor. Shapes and strides are in elements and 64-bit.
/// A view with `data == nullptr` means "absent" for optional arguments.
struct Tensor {
  void* data = nullptr;              ///< first element (nullptr: absent)
  DType dtype = DType::bf16;         ///< element type
  Device device{};                   ///< where `data` lives
  int rank = 0;                      ///< number of dimensions
  int64_t shape[kMaxRank] = {};      ///< extent of each dimension
  int64_t stride[kMaxRank] = {};     ///< stride of each dimension, in elements

  /// True when the view points at something.
  bool present() const { return data != nullptr; }
  /// Number of elements (product of the shape).
  int64_t numel() const;
};

/// Build a contiguous (row-major) view of `data` with the given shape.
Tensor make_tensor(void* data, DType dtype, std::initializer_list<int64_t> shape,
                   Device device = {});

/// How a causal mask aligns queries with keys when seq_q != seq_k.
enum class CausalAlign : uint8_t {
  bottom_right,  ///< query i sees keys <= i + seq_k - seq_q (default; KV prefix / chunked prefill)
  top_left,      ///< query i sees keys <= i
};

/// Which keys each query sees. With `offset` = seq_k - seq_q (bottom-right) or 0 (top-left)
/// and p = i + offset the query's position in key coordinates, key j is visible iff all hold:
///  - causal:            j <= p
///  - window_left >= 0:  j >= p - window_left
///  - window_right >= 0: j <= p + window_right
///  - chunk_size > 0:    floor(j / chunk_size) == floor(p / chunk_size)   (llama4 chunked)
/// Windows and chunks use the same alignment as the causal mask. Any combination is allowed
/// (e.g. a chunk with a sliding window: the keys both allow).
struct Mask {
  bool causal = false;                           ///< apply the causal rule
  CausalAlign align = CausalAlign::bottom_right;  ///< alignment of causal/window/chunk
  int64_t window_left = -1;                      ///< keys to the left a query sees (-1: all)
  int64_t window_right = -1;                     ///< keys to the right a query sees (-1: all)
  int64_t chunk_size = 0;                        ///< chunked attention size (0: off)
};

/// Which implementation computes the result.
enum class Backend : uint8_t {
  automatic,  ///< CUDA for device-resident inputs on sm_90, else CPU
  reference,  ///< float64 oracle (slow, exact, every feature)
  cpu,        ///< fast x86-64 backend
  cuda,       ///< Hopper backend
};

/// Short name of a backend ("auto", "reference", "cpu", "cuda").
const char* backend_name(Backend b);

/// Instruction set of the CPU backend's kernels (`Args::cpu_isa`). Every value gives the
/// same results within the accuracy contract; they differ in speed and in which execution
/// units they occupy.
enum class CpuIsa : uint8_t {
  automatic,  ///< the widest this CPU and operating system support (amx, else avx512, ...)
  portable,   ///< plain C++, any x86-64 (or other) CPU
  avx2,       ///< AVX2 + FMA + F16C
  avx512,     ///< AVX-512F (+ AVX2/FMA/F16C) FMA kernel, every dtype; never uses the AMX tile unit
  amx,        ///< AMX-BF16 tiles for bf16, e4m3 and f32 inputs (f32 as three bf16 planes, fp32
              ///< accuracy); f16 inputs run on the AVX-512 kernel
};

/// Short name of a CPU instruction set ("auto", "portable", "avx2", "avx512", "amx").
const char* cpu_isa_name(CpuIsa isa);

/// Result of an API call. `ok()` or a readable message naming the argument at fault.
class Status {
 public:
  /// Kind of failure.
  enum class Code : uint8_t {
    ok,                ///< success
    invalid_argument,  ///< caller error: nothing was written
    not_supported,     ///< valid request this backend cannot serve (yet)
    runtime_error,     ///< failure while running (CUDA error, ...)
  };
  /// Success (same as Ok()).
  Status() = default;
  /// Success.
  static Status Ok() { return Status(); }
  /// Caller error.
  static Status Invalid(std::string msg) { return Status(Code::invalid_argument, std::move(msg)); }
  /// Unsupported feature for the chosen backend.
  static Status NotSupported(std::string msg) { return Status(Code::not_supported, std::move(msg)); }
  /// Runtime failure.
  static Status Error(std::string msg) { return Status(Code::runtime_error, std::move(msg)); }

  bool ok() const { return code_ == Code::ok; }       ///< true on success
  Code code() const { return code_; }                 ///< failure kind
  const std::string& message() const { return msg_; } ///< human-readable message ("" on success)

 private:
  Status(Code c, std::string m) : code_(c), msg_(std::move(m)) {}
  Code code_ = Code::ok;
  std::string msg_;
};

}  // namespace longattn
