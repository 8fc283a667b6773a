// The longattn Python extension: DLPack tensors (NumPy, PyTorch CPU/CUDA, anything with
// __dlpack__) in, longattn::forward / combine out. Framework-free: the pure-Python layer
// (python/longattn/) allocates outputs in the caller's framework and passes them here.
//
// Each tensor argument is a pair (array, dtype) where dtype is "" (use the array's own
// dtype) or an override for element types DLPack producers cannot express: NumPy's
// ml_dtypes bfloat16 / float8 arrive as uint16 / uint8 views tagged "bf16" / "e4m3".
// PyTorch tensors may instead arrive as a descriptor (data_ptr, dtype name, device index
// (-1: cpu), shape, strides): the caller keeps them alive for the call, and skipping the
// DLPack capsule saves ~3 us per tensor (python/longattn/torch_ops.py).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <cstring>
#include <string>

#include "ext_errors.h"
#include "longattn/longattn.h"

namespace nb = nanobind;
using longattn::DType;
using longattn::Status;
using longattn::Tensor;

namespace longattn_py {
namespace {

[[noreturn]] void raise(PyObject* type, const std::string& msg) {
  PyErr_SetString(type, msg.c_str());
  throw nb::python_error();
}

}  // namespace

// C++ Status -> the Python exception the FlashAttention-style API documents.
void raise_if_error(const Status& s) {
  if (s.ok()) return;
  switch (s.code()) {
    case Status::Code::invalid_argument: raise(PyExc_ValueError, s.message());
    case Status::Code::not_supported: raise(PyExc_NotImplementedError, s.message());
    default: raise(PyExc_RuntimeError, s.message());
  }
}

void keep_present(Tensor& t) {
  static char empty_sentinel;
  if (t.data == nullptr && t.numel() == 0) t.data = &empty_sentinel;
}

longattn::Backend backend_from(const std::string& s) {
  if (s == "auto") return longattn::Backend::automatic;
  if (s == "reference") return longattn::Backend::reference;
  if (s == "cpu") return longattn::Backend::cpu;
  if (s == "cuda") return longattn::Backend::cuda;
  raise(PyExc_ValueError, "backend: expected auto, reference, cpu or cuda, got '" + s + "'");
}

namespace {

using Array = nb::ndarray<nb::ro>;

DType element_type(const Array& a, const std::string& override_name, const std::string& name) {
  const nb::dlpack::dtype t = a.dtype();
  const auto code = static_cast<nb::dlpack::dtype_code>(t.code);
  if (!override_name.empty()) {
    // The override reinterprets bits: the storage width must match.
    if (override_name == "bf16" && t.bits == 16) return DType::bf16;
    if (override_name == "e4m3" && t.bits == 8) return DType::e4m3;
    raise(PyExc_TypeError, name + ": cannot view a " + std::to_string(t.bits) + "-bit array as " +
                               override_name);
  }
  if (t.lanes == 1) {
    if (code == nb::dlpack::dtype_code::Float && t.bits == 32) return DType::f32;
    if (code == nb::dlpack::dtype_code::Float && t.bits == 16) return DType::f16;
    if (code == nb::dlpack::dtype_code::Bfloat && t.bits == 16) return DType::bf16;
    if (code == nb::dlpack::dtype_code::Float8_E4M3FN && t.bits == 8) return DType::e4m3;
    if (code == nb::dlpack::dtype_code::Int && t.bits == 32) return DType::i32;
  }
  raise(PyExc_TypeError, name + ": unsupported dtype (DLPack code " + std::to_string(t.code) +
                             ", " + std::to_string(t.bits) +
                             " bits); use float32, float16, bfloat16, float8_e4m3fn or int32");
}

DType dtype_from_name(const std::string& dt, const std::string& name) {
  if (dt == "bf16") return DType::bf16;
  if (dt == "f16") return DType::f16;
  if (dt == "f32") return DType::f32;
  if (dt == "e4m3") return DType::e4m3;
  if (dt == "i32") return DType::i32;
  raise(PyExc_TypeError, name + ": unsupported dtype " + dt +
                             "; use float32, float16, bfloat16, float8_e4m3fn or int32");
}

Tensor from_descriptor(const nb::tuple& d, const std::string& name) {
  Tensor t;
  t.data = reinterpret_cast<void*>(nb::cast<uintptr_t>(d[0]));
  t.dtype = dtype_from_name(nb::cast<std::string>(d[1]), name);
  const int dev = nb::cast<int>(d[2]);
  t.device = dev < 0 ? longattn::Device{longattn::DeviceKind::cpu, 0}
                     : longattn::Device{longattn::DeviceKind::cuda, dev};
  nb::tuple shape = nb::cast<nb::tuple>(d[3]), stride = nb::cast<nb::tuple>(d[4]);
  if (shape.size() > size_t(longattn::kMaxRank))
    raise(PyExc_ValueError, name + ": rank " + std::to_string(shape.size()) + " is above 4");
  if (stride.size() != shape.size()) raise(PyExc_ValueError, name + ": strides do not match the shape");
  t.rank = int(shape.size());
  for (int i = 0; i < t.rank; ++i) {
    t.shape[i] = nb::cast<int64_t>(shape[size_t(i)]);
    t.stride[i] = nb::cast<int64_t>(stride[size_t(i)]);
  }
  keep_present(t);
  return t;
}

Tensor to_tensor(nb::handle pair, const std::string& name) {
  if (pair.is_none()) return Tensor{};
  nb::tuple tp = nb::cast<nb::tuple>(pair);
  if (tp.size() == 5) return from_descriptor(tp, name);
  Array a = nb::cast<Array>(tp[0]);
  std::string override_name = nb::cast<std::string>(tp[1]);
  Tensor t;
  if (a.ndim() > static_cast<size_t>(longattn::kMaxRank))
    raise(PyExc_ValueError, name + ": rank " + std::to_string(a.ndim()) + " is above 4");
  t.dtype = element_type(a, override_name, name);
  switch (a.device_type()) {
    case nb::device::cpu::value:
    case nb::device::cuda_host::value: t.device = {longattn::DeviceKind::cpu, 0}; break;
    case nb::device::cuda::value:
    case nb::device::cuda_managed::value:
      t.device = {longattn::DeviceKind::cuda, static_cast<int>(a.device_id())};
      break;
    default: raise(PyExc_TypeError, name + ": tensors must live on the CPU or a CUDA device");
  }
  t.rank = static_cast<int>(a.ndim());
  for (int d = 0; d < t.rank; ++d) {
    t.shape[d] = static_cast<int64_t>(a.shape(static_cast<size_t>(d)));
    t.stride[d] = static_cast<int64_t>(a.stride(static_cast<size_t>(d)));
  }
  // Output tensors are written through this pointer; the Python layer only passes arrays
  // it allocated or that the caller handed in as writable `out=`.
  t.data = const_cast<void*>(a.data());
  // An empty array may have a null pointer; keep it "present" so validation reports shapes.
  keep_present(t);
  return t;
}

// The Python layer's {name: tensor} dict into the named Tensor fields: one pass over the
// entries present (a forward passes 4-6 of its 22 names), rather than a lookup per name, which
// builds and hashes a Python string for every absent name on every call. None values stay
// absent; an unknown name is a bug of the caller.
struct Slot {
  const char* name;
  Tensor* field;
};
template <size_t N>
void fill_tensors(const nb::dict& t, const Slot (&slots)[N]) {
  for (auto [key, value] : t) {
    if (!nb::isinstance<nb::str>(key)) raise(PyExc_TypeError, "tensor arguments: keys must be names (str)");
    const char* k = nb::borrow<nb::str>(key).c_str();
    const Slot* hit = nullptr;
    for (const Slot& s : slots)
      if (std::strcmp(s.name, k) == 0) hit = &s;
    if (!hit) raise(PyExc_ValueError, std::string("unknown tensor argument '") + k + "'");
    *hit->field = to_tensor(value, hit->name);
  }
}

// Runs the C++ call without the GIL (long CPU computations must not block other Python
// threads; the arrays stay referenced by the caller's dict), then raises on error.
template <typename Call>
void call_released(Call call) {
  Status s;
  {
    nb::gil_scoped_release release;
    s = call();
  }
  raise_if_error(s);
}

// All arguments by keyword from the Python layer (python/longattn/_core.py).
void forward(nb::dict t, std::optional<float> softmax_scale, float softcap, bool causal,
             bool top_left, int64_t window_left, int64_t window_right, int64_t chunk_size,
             int64_t max_seqlen_q, int64_t max_seqlen_k, const std::string& backend,
             uintptr_t stream, int num_threads, bool check_page_table, bool rotary_interleaved,
             bool check_kvcache, int64_t sm_margin, int64_t cp_world, int64_t cp_rank) {
  longattn::Args a;
  longattn::KvCacheArgs& kc = a.kvcache;  // FlashAttention-3's kvcache serving inputs
  const Slot slots[] = {{"q", &a.q},
                        {"k", &a.k},
                        {"v", &a.v},
                        {"out", &a.out},
                        {"lse", &a.lse},
                        {"cu_seqlens_q", &a.cu_seqlens_q},
                        {"cu_seqlens_k", &a.cu_seqlens_k},
                        {"seqused_q", &a.seqused_q},
                        {"seqused_k", &a.seqused_k},
                        {"page_table", &a.page_table},
                        {"sinks", &a.sinks},
                        {"q_descale", &a.q_descale},
                        {"k_descale", &a.k_descale},
                        {"v_descale", &a.v_descale},
                        {"k_new", &kc.k_new},
                        {"v_new", &kc.v_new},
                        {"cu_seqlens_k_new", &kc.cu_seqlens_k_new},
                        {"cache_batch_idx", &kc.cache_batch_idx},
                        {"cache_leftpad", &kc.cache_leftpad},
                        {"rotary_cos", &kc.rotary_cos},
                        {"rotary_sin", &kc.rotary_sin},
                        {"rotary_seqlens", &kc.rotary_seqlens}};
  fill_tensors(t, slots);
  a.max_seqlen_q = max_seqlen_q;
  a.max_seqlen_k = max_seqlen_k;
  a.softmax_scale = softmax_scale;
  a.softcap = softcap;
  a.mask.causal = causal;
  a.mask.align = top_left ? longattn::CausalAlign::top_left : longattn::CausalAlign::bottom_right;
  a.mask.window_left = window_left;
  a.mask.window_right = window_right;
  a.mask.chunk_size = chunk_size;
  a.backend = backend_from(backend);
  a.stream = reinterpret_cast<void*>(stream);
  a.num_threads = num_threads;
  a.sm_margin = int_clamped(sm_margin);
  a.cp_world = int_clamped(cp_world);
  a.cp_rank = int_clamped(cp_rank);
  a.check_page_table = check_page_table;
  kc.rotary_interleaved = rotary_interleaved;
  kc.check = check_kvcache;
  call_released([&] { return longattn::forward(a); });
}

void combine(nb::dict t, const std::string& backend, uintptr_t stream) {
  longattn::CombineArgs a;
  const Slot slots[] = {{"out_partial", &a.out_partial}, {"lse_partial", &a.lse_partial}, {"out", &a.out}, {"lse", &a.lse}};
  fill_tensors(t, slots);
  a.backend = backend_from(backend);
  a.stream = reinterpret_cast<void*>(stream);
  call_released([&] { return longattn::combine(a); });
}

}  // namespace
}  // namespace longattn_py

NB_MODULE(_longattn, m) {
  using namespace longattn_py;
  m.doc() = "longattn C++ core (use the `longattn` package, not this module)";
  m.def("forward", &forward, nb::arg("tensors"), nb::arg("softmax_scale").none(),
        nb::arg("softcap"), nb::arg("causal"), nb::arg("top_left"), nb::arg("window_left"),
        nb::arg("window_right"), nb::arg("chunk_size"), nb::arg("max_seqlen_q"),
        nb::arg("max_seqlen_k"), nb::arg("backend"), nb::arg("stream"), nb::arg("num_threads"),
        nb::arg("check_page_table"), nb::arg("rotary_interleaved") = true, nb::arg("check_kvcache") = false,
        nb::arg("sm_margin") = 0, nb::arg("cp_world") = 0, nb::arg("cp_rank") = 0,
        "longattn::forward on DLPack tensors given as {name: (array, dtype override)}; the kvcache inputs "
        "(k_new, v_new, cu_seqlens_k_new, cache_batch_idx, cache_leftpad, rotary_cos, rotary_sin, "
        "rotary_seqlens) by the same names.");
  m.def("combine", &combine, nb::arg("tensors"), nb::arg("backend"), nb::arg("stream"),
        "longattn::combine on DLPack tensors.");
  m.def("cuda_available", &longattn::cuda_available,
        "True when this build has the CUDA backend and an sm_90 device is visible.");
  m.def("version", &longattn::version, "Library version string.");
  register_torch_fastpath(m);
}
