"""PyTorch integration: longattn's forward and combine as torch.library custom ops.

Importing this module registers `torch.ops.longattn.fwd`, `torch.ops.longattn.fwd_kvcache`
(flash_attn_with_kvcache's append / rotary path; it mutates the caches) and
`torch.ops.longattn.combine`, each with a fake (meta) implementation, so graphs that call the FlashAttention-3 style
functions compile with `torch.compile(fullgraph=True)` and export without a graph break.
`longattn.flash_attn_*` route torch tensors here by themselves (this module is imported on
the first torch call); NumPy arrays never reach it, and `import longattn` never imports torch.

Eager calls on plain tensors skip the dispatcher (the op's own body, called directly: the
same result with less host time per call). Under tracing (torch.compile, export, fake
tensors) or when an input requires grad, calls go through the op. The op is forward-only:
its backward raises NotImplementedError, so a loss that reaches it fails loudly instead of
silently missing the attention gradients.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch

from . import _longattn as _ext
from ._core import combine as _combine

__all__ = ["fwd", "fwd_kvcache", "combine", "run", "run_combine", "flash_attn_func", "flash_attn_varlen_func"]

_FP8 = getattr(torch, "float8_e4m3fn", None)
_DTYPE_NAMES = {torch.bfloat16: "bf16", torch.float16: "f16", torch.float32: "f32"}
_ALL_NAMES = {**_DTYPE_NAMES, torch.int32: "i32"}
if _FP8 is not None:
    _ALL_NAMES[_FP8] = "e4m3"
_is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", lambda: False)


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
    return (t.data_ptr(), _ALL_NAMES.get(t.dtype, str(t.dtype)), dev, t.shape, t.stride())


def _forward(q, k, v, *, out=None, return_lse=False, cu_seqlens_q=None, cu_seqlens_k=None,
             seqused_q=None, seqused_k=None, page_table=None, max_seqlen_q=0, max_seqlen_k=0,
             sinks=None, q_descale=None, k_descale=None, v_descale=None, softmax_scale=None,
             softcap=0.0, causal=False, window_size=(-1, -1), attention_chunk=0, backend="auto",
             num_threads=0, kvcache=None):
    """longattn.forward for torch tensors (the same contract as _core.forward), with outputs
    allocated by torch and the tensors described to the extension without DLPack. kvcache:
    {name: tensor} of the KV-cache serving inputs (k_new, v_new, cu_seqlens_k_new,
    cache_batch_idx, cache_leftpad, rotary_cos, rotary_sin, rotary_seqlens) and
    rotary_interleaved; k / v are then the cache, written in place by an append."""
    if out is None:
        odt = torch.bfloat16 if q.dtype == _FP8 else q.dtype
        if odt not in _DTYPE_NAMES:
            raise TypeError(f"q: unsupported dtype {q.dtype} (use bfloat16, float16, float32 or float8_e4m3fn)")
        out = torch.empty(q.shape[:-1] + v.shape[-1:], dtype=odt, device=q.device)
    t = {"q": _desc("q", q), "k": _desc("k", k), "v": _desc("v", v), "out": _desc("out", out)}
    lse = None
    if return_lse:
        qs = q.shape
        shape = (qs[1], qs[0]) if cu_seqlens_q is not None else (qs[0], qs[2], qs[1])
        lse = torch.empty(shape if len(qs) >= 3 else (0,), dtype=torch.float32, device=q.device)
        t["lse"] = _desc("lse", lse)
    for name, x in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k),
                    ("seqused_q", seqused_q), ("seqused_k", seqused_k), ("page_table", page_table),
                    ("sinks", sinks), ("q_descale", q_descale), ("k_descale", k_descale),
                    ("v_descale", v_descale)):
        if x is not None:
            t[name] = _desc(name, x)
    interleaved = True
    for name, x in (kvcache or {}).items():
        if name == "rotary_interleaved":
            interleaved = bool(x)
        elif x is not None:
            t[name] = _desc(name, x)
    stream = torch.cuda.current_stream(q.device).cuda_stream if q.is_cuda else 0
    _ext.forward(t, None if softmax_scale is None else float(softmax_scale), float(softcap or 0.0),
                 bool(causal), False, int(window_size[0]), int(window_size[1]), int(attention_chunk or 0),
                 int(max_seqlen_q or 0), int(max_seqlen_k or 0), backend, stream, int(num_threads), False,
                 interleaved)
    return (out, lse) if return_lse else out


@torch.library.custom_op("longattn::fwd", mutates_args=())
def fwd(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens_q: Optional[torch.Tensor],
    cu_seqlens_k: Optional[torch.Tensor],
    seqused_q: Optional[torch.Tensor],
    seqused_k: Optional[torch.Tensor],
    page_table: Optional[torch.Tensor],
    max_seqlen_q: int,
    max_seqlen_k: int,
    sinks: Optional[torch.Tensor],
    q_descale: Optional[torch.Tensor],
    k_descale: Optional[torch.Tensor],
    v_descale: Optional[torch.Tensor],
    softmax_scale: Optional[float],
    softcap: float,
    causal: bool,
    window_left: int,
    window_right: int,
    attention_chunk: int,
    backend: str,
    num_threads: int,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """(out, lse) of longattn.forward; every argument explicit (custom-op schema). Rows past
    seqused_q are left as allocated (uninitialised), as FA3 leaves them."""
    return _forward(
        q, k, v, return_lse=True, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
        seqused_q=seqused_q, seqused_k=seqused_k, page_table=page_table, max_seqlen_q=max_seqlen_q,
        max_seqlen_k=max_seqlen_k, sinks=sinks, q_descale=q_descale, k_descale=k_descale,
        v_descale=v_descale, softmax_scale=softmax_scale, softcap=softcap, causal=causal,
        window_size=(window_left, window_right), attention_chunk=attention_chunk, backend=backend,
        num_threads=num_threads,
    )


@fwd.register_fake
def _fwd_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, page_table, max_seqlen_q,
              max_seqlen_k, sinks, q_descale, k_descale, v_descale, softmax_scale, softcap, causal,
              window_left, window_right, attention_chunk, backend, num_threads):
    out_dtype = torch.bfloat16 if q.dtype == _FP8 else q.dtype
    out = q.new_empty(tuple(q.shape[:-1]) + (v.shape[-1],), dtype=out_dtype)
    if cu_seqlens_q is not None:  # ragged: (heads, total_q)
        lse = q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32)
    else:  # dense: (batch, heads, seq_q)
        lse = q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32)
    return out, lse


# FlashAttention-3's kvcache serving call: the append writes k_cache / v_cache in place, so this
# op declares them mutated (torch.compile / export then keep the write, functionalized). A
# separate op so that plain attention (longattn::fwd) stays mutation-free. Mutable custom ops
# take no autograd formula: it is inference-only by construction.
@torch.library.custom_op("longattn::fwd_kvcache", mutates_args=("k_cache", "v_cache"))
def fwd_kvcache(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    k_new: Optional[torch.Tensor],
    v_new: Optional[torch.Tensor],
    cu_seqlens_q: Optional[torch.Tensor],
    cu_seqlens_k_new: Optional[torch.Tensor],
    cache_seqlens: Optional[torch.Tensor],
    cache_batch_idx: Optional[torch.Tensor],
    cache_leftpad: Optional[torch.Tensor],
    page_table: Optional[torch.Tensor],
    rotary_cos: Optional[torch.Tensor],
    rotary_sin: Optional[torch.Tensor],
    rotary_seqlens: Optional[torch.Tensor],
    rotary_interleaved: bool,
    max_seqlen_q: int,
    sinks: Optional[torch.Tensor],
    q_descale: Optional[torch.Tensor],
    k_descale: Optional[torch.Tensor],
    v_descale: Optional[torch.Tensor],
    softmax_scale: Optional[float],
    softcap: float,
    causal: bool,
    window_left: int,
    window_right: int,
    attention_chunk: int,
    backend: str,
    num_threads: int,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """(out, lse) of flash_attn_with_kvcache's serving path: k_new / v_new appended into
    k_cache / v_cache (in place), rotary, cache rows and left padding (longattn.h KvCacheArgs)."""
    kv = {"k_new": k_new, "v_new": v_new, "cu_seqlens_k_new": cu_seqlens_k_new, "cache_batch_idx": cache_batch_idx,
          "cache_leftpad": cache_leftpad, "rotary_cos": rotary_cos, "rotary_sin": rotary_sin,
          "rotary_seqlens": rotary_seqlens, "rotary_interleaved": rotary_interleaved}
    return _forward(
        q, k_cache, v_cache, return_lse=True, cu_seqlens_q=cu_seqlens_q, seqused_k=cache_seqlens,
        page_table=page_table, max_seqlen_q=max_seqlen_q, sinks=sinks, q_descale=q_descale, k_descale=k_descale,
        v_descale=v_descale, softmax_scale=softmax_scale, softcap=softcap, causal=causal,
        window_size=(window_left, window_right), attention_chunk=attention_chunk, backend=backend,
        num_threads=num_threads, kvcache=kv,
    )


@fwd_kvcache.register_fake
def _fwd_kvcache_fake(q, k_cache, v_cache, k_new, v_new, cu_seqlens_q, *rest):
    out_dtype = torch.bfloat16 if q.dtype == _FP8 else q.dtype
    out = q.new_empty(tuple(q.shape[:-1]) + (v_cache.shape[-1],), dtype=out_dtype)
    lse_shape = (q.shape[1], q.shape[0]) if cu_seqlens_q is not None else (q.shape[0], q.shape[2], q.shape[1])
    return out, q.new_empty(lse_shape, dtype=torch.float32)


@torch.library.custom_op("longattn::combine", mutates_args=())
def combine(out_partial: torch.Tensor, lse_partial: torch.Tensor, out_dtype: Optional[torch.dtype],
            backend: str) -> Tuple[torch.Tensor, torch.Tensor]:
    """(out, lse) of longattn.combine: out_partial (splits, tokens, heads, dim_v), lse_partial
    float32 (splits, heads, tokens) -> out (tokens, heads, dim_v), lse (heads, tokens)."""
    name = _DTYPE_NAMES[out_dtype] if out_dtype is not None else None
    return _combine(out_partial, lse_partial, out_dtype=name, return_lse=True, backend=backend)


@combine.register_fake
def _combine_fake(out_partial, lse_partial, out_dtype, backend):
    s = out_partial.shape
    out = out_partial.new_empty((s[1], s[2], s[3]), dtype=out_dtype or out_partial.dtype)
    return out, out_partial.new_empty((s[2], s[1]), dtype=torch.float32)


def _no_context(ctx, inputs, output):
    pass


def _no_backward(ctx, *grads):
    raise NotImplementedError(
        "backward: longattn is forward-only (inference / prefill); it has no gradient for "
        "q, k, v or sinks. Use FlashAttention or SDPA to train.")


fwd.register_autograd(_no_backward, setup_context=_no_context)
combine.register_autograd(_no_backward, setup_context=_no_context)


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
        causal, window, attention_chunk, backend, num_threads, kvcache=None):
    """One FA3-style forward on torch tensors (interface.py normalised the arguments):
    FA3 defaults filled in with torch ops (traceable), then the op or its body. kvcache: the
    serving inputs of flash_attn_with_kvcache (longattn::fwd_kvcache)."""
    if seqused_k is not None and not isinstance(seqused_k, torch.Tensor):  # cache_seqlens: int
        seqused_k = torch.full((_batch(q, cu_seqlens_q),), int(seqused_k), dtype=torch.int32, device=k.device)
    for name, x in (("k", k), ("v", v), ("out", out), ("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k),
                    ("seqused_q", seqused_q), ("page_table", page_table), ("sinks", sinks)):
        if x is not None and not isinstance(x, torch.Tensor):
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
                            attention_chunk=attention_chunk, backend=backend, num_threads=num_threads)
    if _direct(q, k, v, sinks, q_descale, k_descale, v_descale, out):
        return _forward(
            q, k, v, out=out, return_lse=return_lse, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
            seqused_q=seqused_q, seqused_k=seqused_k, page_table=page_table, max_seqlen_q=max_seqlen_q,
            max_seqlen_k=max_seqlen_k, sinks=sinks, q_descale=q_descale, k_descale=k_descale,
            v_descale=v_descale, softmax_scale=softmax_scale, softcap=softcap, causal=causal,
            window_size=window, attention_chunk=attention_chunk, backend=backend, num_threads=num_threads)
    o, lse = fwd(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, page_table, int(max_seqlen_q),
                 int(max_seqlen_k), sinks, q_descale, k_descale, v_descale,
                 None if softmax_scale is None else float(softmax_scale), float(softcap), bool(causal),
                 int(window[0]), int(window[1]), int(attention_chunk), backend, int(num_threads))
    if out is not None:
        out.copy_(o)
        o = out
    return (o, lse) if return_lse else o


def _run_kvcache(q, k, v, kv, *, return_lse, out, cu_seqlens_q, seqused_k, page_table, max_seqlen_q, sinks,
                 q_descale, k_descale, v_descale, softmax_scale, softcap, causal, window, attention_chunk,
                 backend, num_threads):
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
            attention_chunk=attention_chunk, backend=backend, num_threads=num_threads, kvcache=kv)
    o, lse = fwd_kvcache(q, k, v, *(kv.get(n) for n in names[:2]), cu_seqlens_q, kv.get("cu_seqlens_k_new"), seqused_k,
                         kv.get("cache_batch_idx"), kv.get("cache_leftpad"), page_table, kv.get("rotary_cos"),
                         kv.get("rotary_sin"), kv.get("rotary_seqlens"), bool(kv.get("rotary_interleaved", True)),
                         int(max_seqlen_q), sinks, q_descale, k_descale, v_descale,
                         None if softmax_scale is None else float(softmax_scale), float(softcap), bool(causal),
                         int(window[0]), int(window[1]), int(attention_chunk), backend, int(num_threads))
    if out is not None:
        out.copy_(o)
        o = out
    return (o, lse) if return_lse else o


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
