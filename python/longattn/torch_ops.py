"""PyTorch integration: longattn's forward and combine as torch.library custom ops.

Importing this module registers `torch.ops.longattn.fwd`, `torch.ops.longattn.fwd_kvcache`
(flash_attn_with_kvcache's append / rotary path; it mutates the caches) and
`torch.ops.longattn.combine`, each with a fake (meta) implementation, so graphs that call the FlashAttention-3 style
functions compile with `torch.compile(fullgraph=True)` and export without a graph break.
`longattn.flash_attn_*` route torch tensors here by themselves (this module is imported on
the first torch call); NumPy arrays never reach it, and `import longattn` never imports torch.

Host time per call decides how the ops are registered: with torch.library's Library API rather
than `torch.library.custom_op`, whose Python layers (autograd wrapper, redispatch, backend
wrapper, aliasing check) cost a compiled call more host time than the op's body. Each op's
Autograd kernel runs the op's body itself when no input needs a gradient and nothing but the
CPU / CUDA backend is left below autograd -- a compiled graph's call --; otherwise (an input
that requires grad, fake or functional tensors, dispatch modes) it redispatches, to the same
body registered as the backend kernel or to the fake. Eager calls on plain tensors skip the
dispatcher altogether (the same body, called directly). Under tracing (torch.compile, export)
or when an input requires grad, calls go through the op. The ops are forward-only: a backward
through one raises NotImplementedError, so a loss that reaches it fails loudly instead of
silently missing the attention gradients.
"""

from __future__ import annotations

import torch

from . import _arrays as A
from . import _longattn as _ext
from ._core import combine as _combine

__all__ = ["fwd", "fwd_kvcache", "combine", "run", "run_combine", "flash_attn_func", "flash_attn_varlen_func"]

_FP8 = getattr(torch, "float8_e4m3fn", None)
_DTYPE_NAMES = {torch.bfloat16: "bf16", torch.float16: "f16", torch.float32: "f32"}
_ALL_NAMES = {**_DTYPE_NAMES, torch.int32: "i32"}
if _FP8 is not None:
    _ALL_NAMES[_FP8] = "e4m3"
_is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", lambda: False)
# The current stream's cudaStream_t as an int, as inductor's generated code gets it: without
# building a torch.cuda.Stream object per call. Absent from CPU-only builds of torch.
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _stream(q) -> int:
    """cudaStream_t of PyTorch's current stream on q's device; 0 for CPU tensors."""
    if not q.is_cuda:
        return 0
    if _raw_stream is not None:
        return _raw_stream(q.get_device())
    return torch.cuda.current_stream(q.device).cuda_stream


def _desc(name, t):
    """The extension's view of a live tensor: (data_ptr, dtype, device index (-1: cpu), shape,
    strides) -- no DLPack capsule (~3 us each); the caller keeps `t` alive over the call."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor (like q), got {type(t).__name__}")
    if t.is_cuda:
        dev = t.get_device()
    elif t.is_cpu:
        dev = -1
    else:
        raise TypeError(f"{name}: tensors must live on the CPU or a CUDA device, not {t.device}")
    dt = t.dtype
    return (t.data_ptr(), _ALL_NAMES.get(dt) or str(dt), dev, t.shape, t.stride())


_OPTIONAL = ("cu_seqlens_q", "cu_seqlens_k", "seqused_q", "seqused_k", "page_table", "sinks", "q_descale",
             "k_descale", "v_descale")


def _forward(q, k, v, *, out=None, return_lse=False, cu_seqlens_q=None, cu_seqlens_k=None,
             seqused_q=None, seqused_k=None, page_table=None, max_seqlen_q=0, max_seqlen_k=0,
             sinks=None, q_descale=None, k_descale=None, v_descale=None, softmax_scale=None,
             softcap=0.0, causal=False, window_size=(-1, -1), attention_chunk=0, backend="auto",
             num_threads=0, sm_margin=0, kvcache=None):
    """longattn.forward for torch tensors (the same contract as _core.forward), with outputs
    allocated by torch and the tensors described to the extension without DLPack. kvcache:
    {name: tensor} of the KV-cache serving inputs (k_new, v_new, cu_seqlens_k_new,
    cache_batch_idx, cache_leftpad, rotary_cos, rotary_sin, rotary_seqlens) and
    rotary_interleaved; k / v are then the cache, written in place by an append."""
    if out is None:
        qdt = q.dtype
        odt = torch.bfloat16 if qdt == _FP8 else qdt
        if odt not in _DTYPE_NAMES:
            raise TypeError(f"q: unsupported dtype {qdt} (use bfloat16, float16, float32 or float8_e4m3fn)")
        qs, dv = q.shape, v.shape[-1:]
        if odt is qdt and dv == qs[-1:]:  # q's shape and dtype: empty_like allocates in half the host time
            out = torch.empty_like(q, memory_format=torch.contiguous_format)
        else:
            out = torch.empty((*qs[:-1], *dv), dtype=odt, device=q.device)
    t = {"q": _desc("q", q), "k": _desc("k", k), "v": _desc("v", v), "out": _desc("out", out)}
    lse = None
    if return_lse:
        qs = q.shape
        shape = (qs[1], qs[0]) if cu_seqlens_q is not None else (qs[0], qs[2], qs[1])
        lse = torch.empty(shape if len(qs) >= 3 else (0,), dtype=torch.float32, device=q.device)
        t["lse"] = _desc("lse", lse)
    if not (cu_seqlens_q is None and cu_seqlens_k is None and seqused_q is None and seqused_k is None
            and page_table is None and sinks is None and q_descale is None and k_descale is None
            and v_descale is None):  # most calls pass none of them: nine identity tests, no loop
        for name, x in zip(_OPTIONAL, (cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, page_table, sinks,
                                       q_descale, k_descale, v_descale)):
            if x is not None:
                t[name] = _desc(name, x)
    interleaved = True
    if kvcache:
        for name, x in kvcache.items():
            if name == "rotary_interleaved":
                interleaved = bool(x)
            elif x is not None:
                t[name] = _desc(name, x)
    _ext.forward(t, None if softmax_scale is None else float(softmax_scale), float(softcap or 0.0),
                 bool(causal), False, int(window_size[0]), int(window_size[1]), int(attention_chunk or 0),
                 int(max_seqlen_q or 0), int(max_seqlen_k or 0), backend, _stream(q), int(num_threads), False,
                 interleaved, False, A.int64(sm_margin))
    return (out, lse) if return_lse else out


Tensor = torch.Tensor

# The FA3-style functions' common eager calls in one C++ step (python/src/torch_fastpath.cpp):
# plain torch tensors, nothing traced or recording a gradient, no out / sinks / descales.
# dense_forward (flash_attn_func) and torch_forward (varlen, kvcache) return None where the
# general path below must run the call. interface.py calls them directly.
_ext.init_torch_fastpath(torch.Tensor, torch.bfloat16, torch.float16, torch.float32, torch.int32, torch.empty_like,
                         torch.contiguous_format, _raw_stream, torch.is_grad_enabled)
dense_forward = _ext.dense_forward
torch_forward = _ext.torch_forward


# ---------------------------------------------------------------- the ops' bodies and fakes

def _fwd_impl(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, page_table, max_seqlen_q, max_seqlen_k,
              sinks, q_descale, k_descale, v_descale, softmax_scale, softcap, causal, window_left, window_right,
              attention_chunk, backend, num_threads, sm_margin):
    """(out, lse) of longattn.forward; every argument explicit (custom-op schema). Rows past
    seqused_q are left as allocated (uninitialised), as FA3 leaves them. The C++ fast path
    first (what compiled graphs call), the general path where it does not apply."""
    if (sinks is None and q_descale is None and k_descale is None and v_descale is None
            and not (causal and window_right >= 0)):
        r = torch_forward(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, page_table, None, None, None,
                          None, None, None, None, None, True, max_seqlen_q, max_seqlen_k, softmax_scale, causal,
                          (window_left, window_right), attention_chunk, softcap, True, backend, num_threads,
                          sm_margin)
        if r is not None:
            return r
    return _forward(
        q, k, v, return_lse=True, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
        seqused_q=seqused_q, seqused_k=seqused_k, page_table=page_table, max_seqlen_q=max_seqlen_q,
        max_seqlen_k=max_seqlen_k, sinks=sinks, q_descale=q_descale, k_descale=k_descale,
        v_descale=v_descale, softmax_scale=softmax_scale, softcap=softcap, causal=causal,
        window_size=(window_left, window_right), attention_chunk=attention_chunk, backend=backend,
        num_threads=num_threads, sm_margin=sm_margin,
    )


def _fwd_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, page_table, max_seqlen_q,
              max_seqlen_k, sinks, q_descale, k_descale, v_descale, softmax_scale, softcap, causal,
              window_left, window_right, attention_chunk, backend, num_threads, sm_margin):
    out_dtype = torch.bfloat16 if q.dtype == _FP8 else q.dtype
    out = q.new_empty(tuple(q.shape[:-1]) + (v.shape[-1],), dtype=out_dtype)
    if cu_seqlens_q is not None:  # ragged: (heads, total_q)
        lse = q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32)
    else:  # dense: (batch, heads, seq_q)
        lse = q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32)
    return out, lse


# FlashAttention-3's kvcache serving call: the append writes k_cache / v_cache in place, so this
# op declares them mutated (torch.compile / export then keep the write, functionalized). A
# separate op so that plain attention (longattn::fwd) stays mutation-free.
def _fwd_kvcache_impl(q, k_cache, v_cache, k_new, v_new, cu_seqlens_q, cu_seqlens_k_new, cache_seqlens,
                      cache_batch_idx, cache_leftpad, page_table, rotary_cos, rotary_sin, rotary_seqlens,
                      rotary_interleaved, max_seqlen_q, sinks, q_descale, k_descale, v_descale, softmax_scale,
                      softcap, causal, window_left, window_right, attention_chunk, backend, num_threads,
                      sm_margin):
    """(out, lse) of flash_attn_with_kvcache's serving path: k_new / v_new appended into
    k_cache / v_cache (in place), rotary, cache rows and left padding (longattn.h KvCacheArgs).
    The C++ fast path first, the general path where it does not apply."""
    if (sinks is None and q_descale is None and k_descale is None and v_descale is None
            and not (causal and window_right >= 0)):
        r = torch_forward(q, k_cache, v_cache, cu_seqlens_q, None, None, cache_seqlens, page_table, k_new, v_new,
                          cu_seqlens_k_new, cache_batch_idx, cache_leftpad, rotary_cos, rotary_sin, rotary_seqlens,
                          rotary_interleaved, max_seqlen_q, 0, softmax_scale, causal, (window_left, window_right),
                          attention_chunk, softcap, True, backend, num_threads, sm_margin)
        if r is not None:
            return r
    kv = {"k_new": k_new, "v_new": v_new, "cu_seqlens_k_new": cu_seqlens_k_new, "cache_batch_idx": cache_batch_idx,
          "cache_leftpad": cache_leftpad, "rotary_cos": rotary_cos, "rotary_sin": rotary_sin,
          "rotary_seqlens": rotary_seqlens, "rotary_interleaved": rotary_interleaved}
    return _forward(
        q, k_cache, v_cache, return_lse=True, cu_seqlens_q=cu_seqlens_q, seqused_k=cache_seqlens,
        page_table=page_table, max_seqlen_q=max_seqlen_q, sinks=sinks, q_descale=q_descale, k_descale=k_descale,
        v_descale=v_descale, softmax_scale=softmax_scale, softcap=softcap, causal=causal,
        window_size=(window_left, window_right), attention_chunk=attention_chunk, backend=backend,
        num_threads=num_threads, sm_margin=sm_margin, kvcache=kv,
    )


def _fwd_kvcache_fake(q, k_cache, v_cache, k_new, v_new, cu_seqlens_q, *rest):
    out_dtype = torch.bfloat16 if q.dtype == _FP8 else q.dtype
    out = q.new_empty(tuple(q.shape[:-1]) + (v_cache.shape[-1],), dtype=out_dtype)
    lse_shape = (q.shape[1], q.shape[0]) if cu_seqlens_q is not None else (q.shape[0], q.shape[2], q.shape[1])
    return out, q.new_empty(lse_shape, dtype=torch.float32)


def _combine_impl(out_partial, lse_partial, out_dtype, backend):
    """(out, lse) of longattn.combine: out_partial (splits, tokens, heads, dim_v), lse_partial
    float32 (splits, heads, tokens) -> out (tokens, heads, dim_v), lse (heads, tokens)."""
    name = _DTYPE_NAMES[out_dtype] if out_dtype is not None else None
    return _combine(out_partial, lse_partial, out_dtype=name, return_lse=True, backend=backend)


def _combine_fake(out_partial, lse_partial, out_dtype, backend):
    s = out_partial.shape
    out = out_partial.new_empty((s[1], s[2], s[3]), dtype=out_dtype or out_partial.dtype)
    return out, out_partial.new_empty((s[2], s[1]), dtype=torch.float32)


# ---------------------------------------------------------------- registration

_NO_BACKWARD = ("backward: longattn is forward-only (inference / prefill); it has no gradient for "
                "q, k, v or sinks. Use FlashAttention or SDPA to train.")
_C = torch._C
_AFTER_AUTOGRAD = _C._after_autograd_keyset
_AFTER_AD_INPLACE = _C._after_ADInplaceOrView_keyset
_BACKENDS = (_C.DispatchKey.CPU, _C.DispatchKey.CUDA)
_any_requires_grad = getattr(_C, "_any_requires_grad", None) or (
    lambda *args: any(isinstance(a, torch.Tensor) and a.requires_grad for a in args))


class _ForwardOnly(torch.autograd.Function):
    """An op's call when an input requires grad: the op below autograd, outputs that record
    a backward which raises."""

    @staticmethod
    def forward(ctx, op, keyset, *args):
        with _C._AutoDispatchBelowAutograd():
            return op.redispatch(keyset & _AFTER_AUTOGRAD, *args)

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError(_NO_BACKWARD)


def _autograd_kernel(op, body, mutated):
    """The op's Autograd kernel. The dispatcher passes every argument positionally (the schemas
    have no defaults and no keyword-only arguments)."""

    def kernel(keyset, *args):
        if _C.is_grad_enabled() and _any_requires_grad(*args):
            # An in-place write into a tensor that requires grad would not be recorded.
            if any(args[i] is not None and args[i].requires_grad for i in mutated):
                raise NotImplementedError(f"{op}: writes into an argument that requires grad; "
                                          "longattn is forward-only, pass caches that do not require grad")
            return _ForwardOnly.apply(op, keyset, *args)
        if (keyset & _AFTER_AD_INPLACE).highestPriorityTypeId() in _BACKENDS:  # plain tensors
            for i in mutated:
                torch.autograd.graph.increment_version(args[i])
            return body(*args)
        with _C._AutoDispatchBelowAutograd():
            return op.redispatch(keyset & _AFTER_AUTOGRAD, *args)

    return kernel


def _version_bump_kernel(op, mutated):
    """ADInplaceOrView kernel of a mutating op: bump the version counters of what it writes."""

    def kernel(keyset, *args):
        for i in mutated:
            torch.autograd.graph.increment_version(args[i])
        return op.redispatch(keyset & _AFTER_AD_INPLACE, *args)

    return kernel


_lib = torch.library.Library("longattn", "FRAGMENT")


def _register(name, schema, body, fake, mutated=()):
    """Defines longattn::name: body as the backend kernel (hidden from dynamo, as custom_op
    does), the fake, and the Autograd (plus, if it writes its inputs, ADInplaceOrView)
    kernels above. mutated: positions of the arguments the op writes."""
    _lib.define(name + schema, tags=(torch.Tag.pt2_compliant_tag,))
    op = getattr(torch.ops.longattn, name).default
    _lib.impl(name, torch._disable_dynamo(body), "CompositeExplicitAutograd")
    _lib.impl(name, _autograd_kernel(op, body, mutated), "Autograd", with_keyset=True)
    if mutated:
        _lib.impl(name, _version_bump_kernel(op, mutated), "ADInplaceOrView", with_keyset=True)
    torch.library.register_fake(f"longattn::{name}", fake, lib=_lib)
    return op


fwd = _register(
    "fwd", "(Tensor q, Tensor k, Tensor v, Tensor? cu_seqlens_q, Tensor? cu_seqlens_k, Tensor? seqused_q, "
    "Tensor? seqused_k, Tensor? page_table, SymInt max_seqlen_q, SymInt max_seqlen_k, Tensor? sinks, "
    "Tensor? q_descale, Tensor? k_descale, Tensor? v_descale, float? softmax_scale, float softcap, bool causal, "
    "SymInt window_left, SymInt window_right, SymInt attention_chunk, str backend, SymInt num_threads, "
    "SymInt sm_margin) -> (Tensor, Tensor)", _fwd_impl, _fwd_fake)
fwd_kvcache = _register(
    "fwd_kvcache", "(Tensor q, Tensor(a1!) k_cache, Tensor(a2!) v_cache, Tensor? k_new, Tensor? v_new, "
    "Tensor? cu_seqlens_q, Tensor? cu_seqlens_k_new, Tensor? cache_seqlens, Tensor? cache_batch_idx, "
    "Tensor? cache_leftpad, Tensor? page_table, Tensor? rotary_cos, Tensor? rotary_sin, Tensor? rotary_seqlens, "
    "bool rotary_interleaved, SymInt max_seqlen_q, Tensor? sinks, Tensor? q_descale, Tensor? k_descale, "
    "Tensor? v_descale, float? softmax_scale, float softcap, bool causal, SymInt window_left, "
    "SymInt window_right, SymInt attention_chunk, str backend, SymInt num_threads, SymInt sm_margin) "
    "-> (Tensor, Tensor)",
    _fwd_kvcache_impl, _fwd_kvcache_fake, mutated=(1, 2))
combine = _register(
    "combine", "(Tensor out_partial, Tensor lse_partial, ScalarType? out_dtype, str backend) -> (Tensor, Tensor)",
    _combine_impl, _combine_fake)


def _direct(*tensors) -> bool:
    """True when the op's body may be called without the dispatcher: eager mode, plain
    tensors, no gradient to record. Otherwise (tracing, fake / functional tensors, inputs
    that require grad) the call must be visible to PyTorch as the op."""
    if _is_compiling():
        return False
    grad = torch.is_grad_enabled()
    for t in tensors:
        if t is not None and (type(t) is not torch.Tensor or (grad and t.requires_grad)):
            return False
    return True


def _batch(q, cu_seqlens_q) -> int:
    return cu_seqlens_q.shape[0] - 1 if cu_seqlens_q is not None else q.shape[0]


def run(q, k, v, *, return_lse, out, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, page_table,
        max_seqlen_q, max_seqlen_k, sinks, q_descale, k_descale, v_descale, softmax_scale, softcap,
        causal, window, attention_chunk, backend, num_threads, sm_margin=0, kvcache=None):
    """One FA3-style forward on torch tensors (interface.py normalised the arguments):
    FA3 defaults filled in with torch ops (traceable), then the op or its body. kvcache: the
    serving inputs of flash_attn_with_kvcache (longattn::fwd_kvcache)."""
    if seqused_k is not None and not isinstance(seqused_k, torch.Tensor):  # cache_seqlens: int
        seqused_k = torch.full((_batch(q, cu_seqlens_q),), int(seqused_k), dtype=torch.int32, device=k.device)
    if not (isinstance(k, Tensor) and isinstance(v, Tensor) and (out is None or isinstance(out, Tensor))
            and (cu_seqlens_q is None or isinstance(cu_seqlens_q, Tensor))
            and (cu_seqlens_k is None or isinstance(cu_seqlens_k, Tensor))
            and (seqused_q is None or isinstance(seqused_q, Tensor))
            and (page_table is None or isinstance(page_table, Tensor))
            and (sinks is None or isinstance(sinks, Tensor))):  # the common case in one expression
        for name, x in (("k", k), ("v", v), ("out", out), ("cu_seqlens_q", cu_seqlens_q),
                        ("cu_seqlens_k", cu_seqlens_k), ("seqused_q", seqused_q), ("page_table", page_table),
                        ("sinks", sinks)):
            if x is not None and not isinstance(x, Tensor):
                raise TypeError(f"{name}: expected a torch.Tensor (like q), got {type(x).__name__}")
    if q.dtype == _FP8 and (q_descale is None or k_descale is None or v_descale is None):
        # FA3 defaults every fp8 descale to 1.0; the C++ API wants them explicit.
        ones = torch.ones((_batch(q, cu_seqlens_q), k.shape[-2]), dtype=torch.float32, device=q.device)
        q_descale = ones if q_descale is None else q_descale
        k_descale = ones if k_descale is None else k_descale
        v_descale = ones if v_descale is None else v_descale
    if cu_seqlens_k is not None and max_seqlen_k == 0 and k.device.type != "cpu":
        # FA3: max_seqlen_k = 0 promises every key sequence is empty. Device metadata cannot be
        # read, so say it with k / v of no rows (host metadata is simply read).
        k, v = k[:0], v[:0]
    if kvcache:
        return _run_kvcache(q, k, v, kvcache, return_lse=return_lse, out=out, cu_seqlens_q=cu_seqlens_q,
                            seqused_k=seqused_k, page_table=page_table, max_seqlen_q=max_seqlen_q, sinks=sinks,
                            q_descale=q_descale, k_descale=k_descale, v_descale=v_descale,
                            softmax_scale=softmax_scale, softcap=softcap, causal=causal, window=window,
                            attention_chunk=attention_chunk, backend=backend, num_threads=num_threads,
                            sm_margin=sm_margin)
    if _direct(q, k, v, sinks, q_descale, k_descale, v_descale, out):
        return _forward(
            q, k, v, out=out, return_lse=return_lse, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
            seqused_q=seqused_q, seqused_k=seqused_k, page_table=page_table, max_seqlen_q=max_seqlen_q,
            max_seqlen_k=max_seqlen_k, sinks=sinks, q_descale=q_descale, k_descale=k_descale,
            v_descale=v_descale, softmax_scale=softmax_scale, softcap=softcap, causal=causal,
            window_size=window, attention_chunk=attention_chunk, backend=backend, num_threads=num_threads,
            sm_margin=sm_margin)
    o, lse = fwd(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, page_table, int(max_seqlen_q),
                 int(max_seqlen_k), sinks, q_descale, k_descale, v_descale,
                 None if softmax_scale is None else float(softmax_scale), float(softcap), bool(causal),
                 int(window[0]), int(window[1]), int(attention_chunk), backend, int(num_threads), int(sm_margin))
    return _result(o, lse, out, return_lse)


def _result(o, lse, out, return_lse):
    """An op's outputs as the FA3-style call returns them: o copied into `out` when given
    (the op allocates its own under compile)."""
    if out is not None:
        out.copy_(o)
        o = out
    return (o, lse) if return_lse else o


def _run_kvcache(q, k, v, kv, *, return_lse, out, cu_seqlens_q, seqused_k, page_table, max_seqlen_q, sinks,
                 q_descale, k_descale, v_descale, softmax_scale, softcap, causal, window, attention_chunk,
                 backend, num_threads, sm_margin=0):
    """flash_attn_with_kvcache's serving call: the op's body directly in eager mode, else the op."""
    names = ("k_new", "v_new", "cu_seqlens_k_new", "cache_batch_idx", "cache_leftpad", "rotary_cos", "rotary_sin",
             "rotary_seqlens")
    for name in names:
        x = kv.get(name)
        if x is not None and not isinstance(x, torch.Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor (like q), got {type(x).__name__}")
    if _direct(q, k, v, sinks, q_descale, k_descale, v_descale, out, *(kv.get(n) for n in names)):
        return _forward(
            q, k, v, out=out, return_lse=return_lse, cu_seqlens_q=cu_seqlens_q, seqused_k=seqused_k,
            page_table=page_table, max_seqlen_q=max_seqlen_q, sinks=sinks, q_descale=q_descale, k_descale=k_descale,
            v_descale=v_descale, softmax_scale=softmax_scale, softcap=softcap, causal=causal, window_size=window,
            attention_chunk=attention_chunk, backend=backend, num_threads=num_threads, sm_margin=sm_margin,
            kvcache=kv)
    o, lse = fwd_kvcache(q, k, v, *(kv.get(n) for n in names[:2]), cu_seqlens_q, kv.get("cu_seqlens_k_new"), seqused_k,
                         kv.get("cache_batch_idx"), kv.get("cache_leftpad"), page_table, kv.get("rotary_cos"),
                         kv.get("rotary_sin"), kv.get("rotary_seqlens"), bool(kv.get("rotary_interleaved", True)),
                         int(max_seqlen_q), sinks, q_descale, k_descale, v_descale,
                         None if softmax_scale is None else float(softmax_scale), float(softcap), bool(causal),
                         int(window[0]), int(window[1]), int(attention_chunk), backend, int(num_threads),
                         int(sm_margin))
    return _result(o, lse, out, return_lse)


def run_combine(out_partial, lse_partial, out_dtype, backend):
    """combine on torch tensors in longattn's layout (interface.py maps FA3's layouts)."""
    if _direct(out_partial, lse_partial):
        name = _DTYPE_NAMES[out_dtype] if out_dtype is not None else None
        return _combine(out_partial, lse_partial, out_dtype=name, return_lse=True, backend=backend)
    return combine(out_partial, lse_partial, out_dtype, backend)


def flash_attn_func(*args, **kwargs):
    """Same as longattn.flash_attn_func (kept for code written against earlier versions)."""
    from .interface import flash_attn_func as f

    return f(*args, **kwargs)


def flash_attn_varlen_func(*args, **kwargs):
    """Same as longattn.flash_attn_varlen_func."""
    from .interface import flash_attn_varlen_func as f

    return f(*args, **kwargs)
