// The eager fast path of the FlashAttention-3 style functions for plain PyTorch tensors (host
// time per call, issue 16): the tensors' attributes read through the Python C API, out (and the
// LSE) allocated by torch, then longattn::forward -- one C++ call instead of the Python layer's
// descriptors, dicts and keyword arguments. Framework-free like the rest of the extension: no
// torch headers; torch_ops.py hands over the few torch objects it uses (init_torch_fastpath).
//
// It serves exact torch.Tensor arguments (no subclass) on one CPU or CUDA device, q / k / v of
// one 16- or 32-bit dtype, nothing recording a gradient, no `out`, sinks or descales:
// flash_attn_func (dense_forward), flash_attn_varlen_func and flash_attn_with_kvcache
// (torch_forward: ragged, seqused, paged, and the cache append / rotary inputs). Anything else
// -- and any argument it cannot read -- returns None, and the Python layer takes the general
// path, which handles it or raises the error naming the argument. Errors of longattn::forward
// itself (shapes, head dims, devices, ...) raise here as there.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <string>

#include "ext_errors.h"
#include "longattn/longattn.h"

namespace nb = nanobind;

namespace longattn_py {


namespace {

using longattn::DType;
using longattn::Tensor;

// torch's objects, set once by init_torch_fastpath (kept for the process: never released, so
// no destructor runs after the interpreter is gone).
struct TorchRefs {
  PyObject* tensor_type = nullptr;  // torch.Tensor
  PyObject* bf16 = nullptr;         // torch.bfloat16 / float16 / float32
  PyObject* f16 = nullptr;
  PyObject* f32 = nullptr;
  PyObject* i32 = nullptr;          // torch.int32 (metadata tensors)
  PyObject* empty_like = nullptr;   // torch.empty_like
  PyObject* contiguous = nullptr;   // torch.contiguous_format
  PyObject* raw_stream = nullptr;   // torch._C._cuda_getCurrentRawStream (None without CUDA)
  PyObject* grad_enabled = nullptr; // torch.is_grad_enabled
  // Interned attribute names and the keyword-name tuples of the allocations.
  PyObject *s_data_ptr, *s_shape, *s_stride, *s_dtype, *s_is_cuda, *s_is_cpu, *s_get_device, *s_requires_grad,
      *s_new_empty, *kw_memory_format, *kw_dtype;
};
TorchRefs g;

// One tensor argument: its view, dtype object and whether it records a gradient. False when
// it is not a plain torch.Tensor the fast path serves (rank 1-4, bf16 / f16 / f32 / int32, on
// the CPU or a CUDA device); a Python error is never left set.
struct Read {
  Tensor t;
  PyObject* dtype = nullptr;  // borrowed: torch's dtype objects are immortal singletons
  bool requires_grad = false;
};

bool read_tensor(PyObject* x, Read* r) {
  if (Py_TYPE(x) != reinterpret_cast<PyTypeObject*>(g.tensor_type)) return false;
  nb::object cuda = nb::steal(PyObject_GetAttr(x, g.s_is_cuda));
  if (!cuda.is_valid()) return PyErr_Clear(), false;
  if (cuda.ptr() == Py_True) {
    PyObject* self[] = {x};
    nb::object d = nb::steal(PyObject_VectorcallMethod(g.s_get_device, self, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr));
    if (!d.is_valid()) return PyErr_Clear(), false;
    const int device = int(PyLong_AsLong(d.ptr()));
    if (device < 0) return PyErr_Clear(), false;
    r->t.device = {longattn::DeviceKind::cuda, device};
  } else {
    nb::object cpu = nb::steal(PyObject_GetAttr(x, g.s_is_cpu));
    if (!cpu.is_valid()) return PyErr_Clear(), false;
    if (cpu.ptr() != Py_True) return false;  // meta, mps, ...: the general path names them
    r->t.device = {longattn::DeviceKind::cpu, 0};
  }
  nb::object dtype = nb::steal(PyObject_GetAttr(x, g.s_dtype));
  if (!dtype.is_valid()) return PyErr_Clear(), false;
  r->dtype = dtype.ptr();
  if (r->dtype == g.bf16) r->t.dtype = DType::bf16;
  else if (r->dtype == g.f16) r->t.dtype = DType::f16;
  else if (r->dtype == g.f32) r->t.dtype = DType::f32;
  else if (r->dtype == g.i32) r->t.dtype = DType::i32;
  else return false;
  PyObject* self[] = {x};
  nb::object shape = nb::steal(PyObject_GetAttr(x, g.s_shape));
  nb::object stride = nb::steal(PyObject_VectorcallMethod(g.s_stride, self, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr));
  nb::object ptr = nb::steal(PyObject_VectorcallMethod(g.s_data_ptr, self, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr));
  // Integer tensors (the metadata) cannot require grad: no read.
  nb::object grad = r->t.dtype == DType::i32 ? nb::borrow(Py_False) : nb::steal(PyObject_GetAttr(x, g.s_requires_grad));
  if (!shape.is_valid() || !stride.is_valid() || !ptr.is_valid() || !grad.is_valid()) return PyErr_Clear(), false;
  if (!PyTuple_Check(shape.ptr()) || !PyTuple_Check(stride.ptr())) return false;
  const Py_ssize_t rank = PyTuple_GET_SIZE(shape.ptr());
  if (rank < 1 || rank > longattn::kMaxRank || PyTuple_GET_SIZE(stride.ptr()) != rank) return false;
  r->t.rank = int(rank);
  for (int i = 0; i < r->t.rank; ++i) {
    r->t.shape[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape.ptr(), i));
    r->t.stride[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(stride.ptr(), i));
  }
  r->t.data = PyLong_AsVoidPtr(ptr.ptr());
  r->requires_grad = grad.ptr() == Py_True;
  if (PyErr_Occurred()) return PyErr_Clear(), false;
  keep_present(r->t);
  return true;
}

// A new contiguous tensor like `q` (its dtype and device) of `shape`; `dtype` overrides the
// dtype (nullptr: q's). Its data pointer into `data`.
nb::object new_tensor(PyObject* q, const int64_t* shape, int rank, PyObject* dtype, bool same_shape_as_q,
                      void** data) {
  nb::object t;
  if (same_shape_as_q && !dtype) {  // torch.empty_like(q, memory_format=torch.contiguous_format)
    PyObject* args[] = {nullptr, q, g.contiguous};
    t = nb::steal(PyObject_Vectorcall(g.empty_like, args + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, g.kw_memory_format));
  } else {  // q.new_empty(shape[, dtype=dtype])
    nb::object size = nb::steal(PyTuple_New(rank));
    for (int i = 0; i < rank; ++i) PyTuple_SET_ITEM(size.ptr(), i, PyLong_FromLongLong(shape[i]));
    PyObject* args[] = {q, size.ptr(), dtype};
    t = nb::steal(PyObject_VectorcallMethod(g.s_new_empty, args, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                            dtype ? g.kw_dtype : nullptr));
  }
  if (!t.is_valid()) throw nb::python_error();
  PyObject* self[] = {t.ptr()};
  nb::object ptr = nb::steal(PyObject_VectorcallMethod(g.s_data_ptr, self, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr));
  if (!ptr.is_valid()) throw nb::python_error();
  *data = PyLong_AsVoidPtr(ptr.ptr());
  return t;
}

// window_size as (left, right): a 2-tuple or 2-list of ints, else false (the general path
// raises on it).
bool read_window(nb::handle w, int64_t* left, int64_t* right) {
  PyObject* o = w.ptr();
  if (!(PyTuple_Check(o) && PyTuple_GET_SIZE(o) == 2) && !(PyList_Check(o) && PyList_GET_SIZE(o) == 2)) return false;
  PyObject* l = PySequence_Fast_GET_ITEM(o, 0);
  PyObject* r = PySequence_Fast_GET_ITEM(o, 1);
  if (!PyLong_Check(l) || !PyLong_Check(r)) return false;
  *left = PyLong_AsLongLong(l);
  *right = PyLong_AsLongLong(r);
  if (PyErr_Occurred()) return PyErr_Clear(), false;
  return true;
}

void init(nb::handle tensor_type, nb::handle bf16, nb::handle f16, nb::handle f32, nb::handle i32, nb::handle empty_like,
          nb::handle contiguous, nb::handle raw_stream, nb::handle grad_enabled) {
  auto keep = [](nb::handle h) { return h.inc_ref().ptr(); };
  g.tensor_type = keep(tensor_type);
  g.bf16 = keep(bf16);
  g.f16 = keep(f16);
  g.f32 = keep(f32);
  g.i32 = keep(i32);
  g.empty_like = keep(empty_like);
  g.contiguous = keep(contiguous);
  g.raw_stream = keep(raw_stream);
  g.grad_enabled = keep(grad_enabled);
  auto name = [](const char* s) { return PyUnicode_InternFromString(s); };
  g.s_data_ptr = name("data_ptr");
  g.s_shape = name("shape");
  g.s_stride = name("stride");
  g.s_dtype = name("dtype");
  g.s_is_cuda = name("is_cuda");
  g.s_is_cpu = name("is_cpu");
  g.s_get_device = name("get_device");
  g.s_requires_grad = name("requires_grad");
  g.s_new_empty = name("new_empty");
  g.kw_memory_format = Py_BuildValue("(s)", "memory_format");
  g.kw_dtype = Py_BuildValue("(s)", "dtype");
}

// Scalars as the general path converts them (bool(), int(), float()); false where that fails
// (the general path then raises on it).
bool read_bool(nb::handle h, bool* out) {
  const int t = PyObject_IsTrue(h.ptr());
  if (t < 0) return PyErr_Clear(), false;
  *out = t != 0;
  return true;
}
bool read_int(nb::handle h, int64_t* out) {
  *out = PyLong_AsLongLong(h.ptr());
  if (*out == -1 && PyErr_Occurred()) return PyErr_Clear(), false;
  return true;
}
bool read_float(nb::handle h, double* out) {
  *out = PyFloat_AsDouble(h.ptr());
  if (*out == -1.0 && PyErr_Occurred()) return PyErr_Clear(), false;
  return true;
}

// The handles of one call (None where absent), in torch_forward's order.
enum Opt { kCuSeqlensQ, kCuSeqlensK, kSequsedQ, kSequsedK, kPageTable, kKNew, kVNew, kCuSeqlensKNew,
           kCacheBatchIdx, kCacheLeftpad, kRotaryCos, kRotarySin, kRotarySeqlens, kNumOpt };
struct Call {
  nb::handle q, k, v;
  nb::handle opt[kNumOpt];
  nb::handle rotary_interleaved, max_seqlen_q, max_seqlen_k, softmax_scale, causal, window_size, chunk, softcap,
      return_lse, backend, num_threads, sm_margin;
};

// A contiguous view of `rank` / `shape` like `like` (device), dtype dt, data to come.
Tensor contiguous_like(const Tensor& like, DType dt, int rank, const int64_t* shape) {
  Tensor t;
  t.device = like.device;
  t.dtype = dt;
  t.rank = rank;
  int64_t st = 1;
  for (int i = rank - 1; i >= 0; --i) {
    t.shape[i] = shape[i];
    t.stride[i] = st;
    st *= shape[i];
  }
  return t;
}

nb::object run(const Call& c) {
  if (!g.tensor_type) return nb::none();
  bool causal = false, return_lse = false, interleaved = true;
  int64_t chunk = 0, num_threads = 0, sm_margin = 0, max_q = 0, max_k = 0;
  double softcap = 0.0;
  if (!read_bool(c.causal, &causal) || !read_bool(c.return_lse, &return_lse) ||
      !read_bool(c.rotary_interleaved, &interleaved) || !read_int(c.chunk, &chunk) ||
      !read_int(c.num_threads, &num_threads) || !read_int(c.sm_margin, &sm_margin) ||
      !PyUnicode_Check(c.backend.ptr()) ||
      (!c.softcap.is_none() && !read_float(c.softcap, &softcap)) ||
      (!c.max_seqlen_q.is_none() && !read_int(c.max_seqlen_q, &max_q)) ||
      (!c.max_seqlen_k.is_none() && !read_int(c.max_seqlen_k, &max_k)))
    return nb::none();
  // The general path's cases that are cheap to see, before any tensor is read: an argument that
  // is not a tensor (cache_seqlens as an int), max_seqlen_k = 0 with ragged keys (it says "every
  // key sequence is empty" with k / v of no rows).
  for (const nb::handle& h : c.opt)
    if (!h.is_none() && Py_TYPE(h.ptr()) != reinterpret_cast<PyTypeObject*>(g.tensor_type)) return nb::none();
  if (!c.opt[kCuSeqlensK].is_none() && max_k == 0) return nb::none();
  Read rq, rk, rv;
  if (!read_tensor(c.q.ptr(), &rq) || !read_tensor(c.k.ptr(), &rk) || !read_tensor(c.v.ptr(), &rv)) return nb::none();
  if (rk.dtype != rq.dtype || rv.dtype != rq.dtype || rq.t.dtype == DType::i32) return nb::none();
  bool grad = rq.requires_grad || rk.requires_grad || rv.requires_grad;
  longattn::Args a;
  longattn::KvCacheArgs& kc = a.kvcache;
  Tensor* fields[kNumOpt] = {&a.cu_seqlens_q,    &a.cu_seqlens_k,     &a.seqused_q,      &a.seqused_k,
                             &a.page_table,      &kc.k_new,           &kc.v_new,         &kc.cu_seqlens_k_new,
                             &kc.cache_batch_idx, &kc.cache_leftpad,  &kc.rotary_cos,    &kc.rotary_sin,
                             &kc.rotary_seqlens};
  const bool rotary = !c.opt[kRotaryCos].is_none() || !c.opt[kRotarySin].is_none();
  for (int i = 0; i < kNumOpt; ++i) {
    if (c.opt[i].is_none() || (i == kRotarySeqlens && !rotary)) continue;  // FA3 ignores it without rotary
    Read r;
    if (!read_tensor(c.opt[i].ptr(), &r)) return nb::none();  // e.g. cache_seqlens as an int
    *fields[i] = r.t;
    grad = grad || r.requires_grad;
  }
  if (grad) {
    nb::object on = nb::steal(PyObject_CallNoArgs(g.grad_enabled));
    if (!on.is_valid()) return PyErr_Clear(), nb::none();
    if (on.ptr() == Py_True) return nb::none();  // the op records a backward that raises
  }
  const bool ragged_q = a.cu_seqlens_q.present();
  if ((!ragged_q && rq.t.rank != 4) || (ragged_q && rq.t.rank != 3)) return nb::none();  // the general path names it
  int64_t wl = -1, wr = -1;
  if (!read_window(c.window_size, &wl, &wr)) return nb::none();
  if (causal) wr = -1;  // as interface._window: causal already bounds the right
  a.q = rq.t;
  a.k = rk.t;
  a.v = rv.t;
  a.max_seqlen_q = max_q;
  a.max_seqlen_k = max_k;
  kc.rotary_interleaved = interleaved;
  if (!c.softmax_scale.is_none()) {
    double sc = 0.0;
    if (!read_float(c.softmax_scale, &sc)) return nb::none();
    a.softmax_scale = float(sc);
  }
  a.softcap = float(softcap);
  a.mask.causal = causal;
  a.mask.window_left = wl;
  a.mask.window_right = wr;
  a.mask.chunk_size = chunk;
  a.backend = backend_from(nb::borrow<nb::str>(c.backend).c_str());
  a.num_threads = int(num_threads);
  a.sm_margin = int_clamped(sm_margin);
  const bool on_cuda = rq.t.device.kind == longattn::DeviceKind::cuda;
  if (on_cuda) {
    if (g.raw_stream == Py_None) return nb::none();
    nb::object dev = nb::steal(PyLong_FromLong(rq.t.device.ordinal));
    PyObject* args[] = {nullptr, dev.ptr()};
    nb::object st = nb::steal(PyObject_Vectorcall(g.raw_stream, args + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr));
    if (!st.is_valid()) throw nb::python_error();
    a.stream = PyLong_AsVoidPtr(st.ptr());
  }
  // out: q's leading dims, v's head dim, q's dtype, contiguous. LSE float32: ragged (heads_q,
  // total_q), dense (batch, heads_q, seq_q).
  const int qr = rq.t.rank;
  int64_t os[4];
  for (int i = 0; i < qr; ++i) os[i] = rq.t.shape[i];
  os[qr - 1] = rv.t.shape[rv.t.rank - 1];
  a.out = contiguous_like(rq.t, rq.t.dtype, qr, os);
  nb::object out = new_tensor(c.q.ptr(), os, qr, nullptr, os[qr - 1] == rq.t.shape[qr - 1], &a.out.data);
  nb::object lse;
  if (return_lse) {
    const int64_t ls[3] = {ragged_q ? os[1] : os[0], ragged_q ? os[0] : os[2], os[1]};
    a.lse = contiguous_like(rq.t, DType::f32, ragged_q ? 2 : 3, ls);
    lse = new_tensor(c.q.ptr(), ls, a.lse.rank, g.f32, false, &a.lse.data);
  }
  keep_present(a.out);
  if (return_lse) keep_present(a.lse);
  longattn::Status st;
  if (on_cuda) {
    st = longattn::forward(a);  // launches: short, with the GIL held (as torch's own launches)
  } else {
    nb::gil_scoped_release release;  // the CPU backend computes here
    st = longattn::forward(a);
  }
  raise_if_error(st);
  if (return_lse) return nb::make_tuple(out, lse);
  return out;
}

// flash_attn_func's call: dense q / k / v, no metadata.
nb::object dense_forward(nb::handle q, nb::handle k, nb::handle v, nb::handle softmax_scale, nb::handle causal,
                         nb::handle window_size, nb::handle chunk, nb::handle softcap, nb::handle return_lse,
                         nb::handle backend, nb::handle num_threads, nb::handle sm_margin) {
  Call c{q, k, v, {}, nb::handle(Py_True), nb::none(), nb::none(), softmax_scale, causal, window_size, chunk,
         softcap, return_lse, backend, num_threads, sm_margin};
  for (nb::handle& h : c.opt) h = nb::none();
  return run(c);
}

// Every argument: flash_attn_varlen_func's and flash_attn_with_kvcache's calls.
nb::object torch_forward(nb::args args) {
  constexpr size_t kArgs = 3 + kNumOpt + 12;
  if (args.size() != kArgs)
    throw nb::type_error(("torch_forward: expected " + std::to_string(kArgs) + " arguments").c_str());
  Call c;
  size_t i = 0;
  c.q = args[i++];
  c.k = args[i++];
  c.v = args[i++];
  for (nb::handle& h : c.opt) h = args[i++];
  for (nb::handle* h : {&c.rotary_interleaved, &c.max_seqlen_q, &c.max_seqlen_k, &c.softmax_scale, &c.causal,
                        &c.window_size, &c.chunk, &c.softcap, &c.return_lse, &c.backend, &c.num_threads,
                        &c.sm_margin})
    *h = args[i++];
  return run(c);
}

}  // namespace

void register_torch_fastpath(nb::module_& m) {
  m.def("init_torch_fastpath", &init, "torch's objects for dense_forward (python/longattn/torch_ops.py).");
  m.def("dense_forward", &dense_forward, nb::arg("q").none(), nb::arg("k").none(), nb::arg("v").none(),
        nb::arg("softmax_scale").none(), nb::arg("causal").none(), nb::arg("window_size").none(),
        nb::arg("attention_chunk").none(), nb::arg("softcap").none(), nb::arg("return_lse").none(),
        nb::arg("backend").none(), nb::arg("num_threads").none(), nb::arg("sm_margin").none(),
        "flash_attn_func's eager call on plain torch tensors, or None where the general path must run it.");
  m.def("torch_forward", &torch_forward,
        "torch_forward(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, page_table, k_new, v_new, "
        "cu_seqlens_k_new, cache_batch_idx, cache_leftpad, rotary_cos, rotary_sin, rotary_seqlens, "
        "rotary_interleaved, max_seqlen_q, max_seqlen_k, softmax_scale, causal, window_size, attention_chunk, "
        "softcap, return_lse, backend, num_threads, sm_margin): the varlen / kvcache eager call, or None where the general "
        "path must run it.");
}

}  // namespace longattn_py
