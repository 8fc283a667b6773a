"""Framework adaptation: what kind of array the caller passed, how to allocate outputs next
to it (same framework, same device), and how to hand it to the C++ extension.

Only NumPy and PyTorch are recognised; neither is imported unless the caller uses it
(PyTorch is never needed to build or import longattn)."""

from __future__ import annotations

import sys

import numpy as np

# NumPy has no bfloat16 / float8: ml_dtypes provides them. Optional.
try:  # pragma: no cover - depends on the environment
    import ml_dtypes as _ml
except ImportError:  # pragma: no cover
    _ml = None


def _torch():
    """The torch module if the caller's process already imported it (never imports it)."""
    return sys.modules.get("torch")


def is_torch(x) -> bool:
    t = _torch()
    return t is not None and isinstance(x, t.Tensor)


def is_numpy(x) -> bool:
    return isinstance(x, np.ndarray)


def check_array(name: str, x) -> None:
    if not (is_numpy(x) or is_torch(x)):
        raise TypeError(f"{name}: expected a numpy.ndarray or torch.Tensor, got {type(x).__name__}")


def dtype_name(x) -> str:
    """longattn's name for x's element type ('bf16', 'f16', 'f32', 'e4m3', 'i32', or repr)."""
    if is_torch(x):
        t = _torch()
        table = {t.bfloat16: "bf16", t.float16: "f16", t.float32: "f32", t.int32: "i32"}
        if hasattr(t, "float8_e4m3fn"):
            table[t.float8_e4m3fn] = "e4m3"
        return table.get(x.dtype, str(x.dtype))
    dt = x.dtype
    if dt == np.float32:
        return "f32"
    if dt == np.float16:
        return "f16"
    if dt == np.int32:
        return "i32"
    if _ml is not None:
        if dt == _ml.bfloat16:
            return "bf16"
        if dt == _ml.float8_e4m3fn:
            return "e4m3"
    return str(dt)


def to_ext(x):
    """(array, dtype override) for the extension; None stays None."""
    if x is None:
        return None
    name = dtype_name(x)
    if is_torch(x):
        t = _torch()
        # Forward only: DLPack refuses tensors that require grad, and we never record a graph.
        x = x.detach()
        override = ""
        if name == "e4m3":
            # DLPack float8 support varies across PyTorch versions: pass the raw bytes.
            x, override = x.view(t.uint8), "e4m3"
        if x.device.type == "cuda":
            # stream=-1: no producer-side synchronisation. We launch on PyTorch's current
            # stream ourselves; torch's default (stream=None) would also make the legacy
            # stream wait on it -- a hidden cross-stream dependency per tensor.
            try:
                return (x.__dlpack__(stream=-1), override)
            except (TypeError, BufferError, RuntimeError):
                pass
        return (x, override)
    if name == "bf16":
        return (x.view(np.uint16), "bf16")
    if name == "e4m3":
        return (x.view(np.uint8), "e4m3")
    return (x, "")


def empty_like_framework(ref, shape, dtype_name_: str):
    """Uninitialised array of `shape` in ref's framework and on ref's device."""
    if is_torch(ref):
        t = _torch()
        dt = {"bf16": t.bfloat16, "f16": t.float16, "f32": t.float32, "i32": t.int32}[dtype_name_]
        return t.empty(tuple(shape), dtype=dt, device=ref.device)
    return np.empty(tuple(shape), dtype=numpy_dtype(dtype_name_))


def numpy_dtype(name: str):
    if name == "f32":
        return np.float32
    if name == "f16":
        return np.float16
    if name == "i32":
        return np.int32
    if name in ("bf16", "e4m3"):
        if _ml is None:
            raise TypeError(f"{name} NumPy arrays need the ml_dtypes package (pip install ml_dtypes)")
        return _ml.bfloat16 if name == "bf16" else _ml.float8_e4m3fn
    raise TypeError(f"unsupported dtype {name}")


def numpy_dtype_name(dt) -> str:
    """longattn's name for a NumPy dtype (or a name already: 'bf16', 'f16', 'f32')."""
    if isinstance(dt, str) and dt in ("bf16", "f16", "f32"):
        return dt
    return dtype_name(np.empty(0, dtype=dt))


def int_array_like(ref, values):
    """int32 array holding `values`, in ref's framework and device (metadata tensors)."""
    if is_torch(ref):
        t = _torch()
        return t.tensor(list(values), dtype=t.int32, device=ref.device)
    return np.asarray(values, dtype=np.int32)


def full_like_framework(ref, shape, value, dtype_name_: str):
    a = empty_like_framework(ref, shape, dtype_name_)
    if is_torch(a):
        a.fill_(value)
    else:
        a[...] = value
    return a


def shape_of(x):
    return tuple(int(s) for s in x.shape)


def int64(x) -> int:
    """int(x) within int64, for the extension's int64 arguments (it clamps further where it
    must: sm_margin)."""
    return min(max(int(x), -(2**63)), 2**63 - 1)


def current_stream(x) -> int:
    """cudaStream_t (as int) of PyTorch's current stream on x's device; 0 for host arrays."""
    if is_torch(x) and x.device.type == "cuda":
        return int(_torch().cuda.current_stream(x.device).cuda_stream)
    return 0


def is_writable(x) -> bool:
    if is_numpy(x):
        return bool(x.flags.writeable)
    return True
