"""FlashAttention-3 compatible forward API (`flash_attn_interface`), for NumPy and PyTorch.

    import longattn.flash_attn_interface as flash_attn_interface   # FA3 code runs unchanged

Every function takes FA3's arguments with FA3's names, order, defaults and return values
(see python/README.md for the table). Options that only tune FA3's speed (num_splits,
pack_gqa, scheduler_metadata, deterministic -- a backward option --) are accepted and ignored:
longattn picks its own schedule. `sm_margin` is honoured: the CUDA kernel leaves that many SMs
free for work running beside it (e.g. communication kernels).
Features outside forward attention raise NotImplementedError naming the argument (`qv`,
and the backward pass). flash_attn_with_kvcache serves FA3's whole serving path: the append
of new keys / values into the cache (in place), rotary embedding, cache_batch_idx,
cache_leftpad and ragged new keys. Our extras are keyword-only: `sinks`
(float32 per-head logits), `out` (preallocated output), `backend` ("auto" | "cpu" | "cuda" |
"reference") and `num_threads` (CPU backend).

NumPy arrays run directly; torch tensors go through the custom ops of longattn.torch_ops
(torch.compile / export friendly). Outputs are allocated in the caller's framework on the
caller's device; PyTorch's current CUDA stream is used.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from . import _arrays as A
from ._core import combine as _combine
from ._core import forward as _forward

_TORCH_OPS = None


def _torch_ops():
    """longattn.torch_ops, imported on the first torch call (never for NumPy users)."""
    global _TORCH_OPS
    if _TORCH_OPS is None:
        from . import torch_ops

        _TORCH_OPS = torch_ops
    return _TORCH_OPS


def _unsupported(**kwargs):
    """Features outside forward attention: NotImplementedError naming the argument."""
    for name, value in kwargs.items():
        if value is not None:
            raise NotImplementedError(f"{name}: not supported by longattn (forward attention only)")


def _window(window_size, causal):
    """FA3 ignores the right window under causal (forcing it to 0). longattn rejects a right
    window that conflicts with causal, so drop it: causal alone already bounds the right."""
    w = tuple(window_size) if window_size is not None else (-1, -1)
    if len(w) != 2:
        raise ValueError(f"window_size: expected (left, right), got {window_size!r}")
    return (int(w[0]), -1) if causal else (int(w[0]), int(w[1]))


def _runner(q):
    """The forward for q's framework: NumPy arrays directly, anything else (torch) through
    longattn.torch_ops. Returned rather than called, so that the ~20 keyword arguments are
    passed once per call, not twice (host time)."""
    if isinstance(q, np.ndarray):
        return _run_numpy
    if not A.is_torch(q):
        A.check_array("q", q)  # TypeError naming q
    return _torch_ops().run


def _run_numpy(q, k, v, *, window, seqused_k, q_descale, k_descale, v_descale, cu_seqlens_q, kvcache=None, **kw):
    batch = (len(cu_seqlens_q) - 1) if cu_seqlens_q is not None else A.shape_of(q)[0]
    if seqused_k is not None and not isinstance(seqused_k, np.ndarray):  # cache_seqlens: int
        seqused_k = np.full(batch, int(seqused_k), dtype=np.int32)
    if A.dtype_name(q) == "e4m3":  # FA3 defaults every fp8 descale to 1.0
        ones = np.ones((batch, A.shape_of(k)[-2]), dtype=np.float32)
        q_descale = ones if q_descale is None else q_descale
        k_descale = ones if k_descale is None else k_descale
        v_descale = ones if v_descale is None else v_descale
    return _forward(q, k, v, window_size=window, seqused_k=seqused_k, q_descale=q_descale,
                    k_descale=k_descale, v_descale=v_descale, cu_seqlens_q=cu_seqlens_q, **(kvcache or {}), **kw)


def flash_attn_func(
    q,
    k,
    v,
    softmax_scale: Optional[float] = None,
    causal: bool = False,
    qv=None,
    q_descale=None,
    k_descale=None,
    v_descale=None,
    window_size: Sequence[int] = (-1, -1),
    attention_chunk: int = 0,
    softcap: float = 0.0,
    num_splits: int = 1,
    pack_gqa=None,
    deterministic: bool = False,
    sm_margin: int = 0,
    return_attn_probs: bool = False,
    *,
    sinks=None,
    out=None,
    backend: str = "auto",
    num_threads: int = 0,
):
    """Dense attention. q (batch, seqlen_q, nheads, headdim), k/v (batch, seqlen_k, nheads_k,
    headdim[_v]); nheads % nheads_k == 0 (GQA/MQA). Causal, window and chunk masks are aligned
    bottom-right like FA3 and combine (a chunk with a window: the keys both allow). Returns out
    (batch, seqlen_q, nheads, headdim_v), or (out, softmax_lse) with return_attn_probs=True,
    softmax_lse float32 (batch, nheads, seqlen_q). fp8 (float8_e4m3fn) q/k/v: q/k/v_descale
    float32 (batch, nheads_k), 1.0 when omitted; out is bf16.
    """
    ops = _TORCH_OPS  # set by the first torch call (the general path below imports it)
    if (ops is not None and out is None and sinks is None and q_descale is None and k_descale is None
            and v_descale is None and qv is None and not ops._is_compiling()):
        # Eager torch tensors: one C++ step (torch_ops.dense_forward), None where it does not apply.
        r = ops.dense_forward(q, k, v, softmax_scale, causal, window_size, attention_chunk, softcap,
                              return_attn_probs, backend, num_threads, sm_margin)
        if r is not None:
            return r
    if qv is not None:
        _unsupported(qv=qv)
    window = _window(window_size, causal)
    return _runner(q)(q, k, v, return_lse=return_attn_probs, out=out, cu_seqlens_q=None, cu_seqlens_k=None,
                      seqused_q=None, seqused_k=None, page_table=None, max_seqlen_q=0, max_seqlen_k=0,
                      sinks=sinks, q_descale=q_descale, k_descale=k_descale, v_descale=v_descale,
                      softmax_scale=softmax_scale, softcap=softcap, causal=causal, window=window,
                      attention_chunk=attention_chunk, backend=backend, num_threads=num_threads,
                      sm_margin=sm_margin)


def flash_attn_varlen_func(
    q,
    k,
    v,
    cu_seqlens_q,
    cu_seqlens_k,
    max_seqlen_q,
    max_seqlen_k,
    seqused_q=None,
    seqused_k=None,
    softmax_scale: Optional[float] = None,
    causal: bool = False,
    qv=None,
    q_descale=None,
    k_descale=None,
    v_descale=None,
    window_size: Sequence[int] = (-1, -1),
    attention_chunk: int = 0,
    softcap: float = 0.0,
    num_splits: int = 1,
    pack_gqa=None,
    deterministic: bool = False,
    sm_margin: int = 0,
    return_attn_probs: bool = False,
    *,
    sinks=None,
    out=None,
    backend: str = "auto",
    num_threads: int = 0,
):
    """Ragged (packed) batch. q (total_q, nheads, headdim), k/v (total_k, nheads_k, headdim);
    cu_seqlens_q/k int32 (batch + 1). seqused_q / seqused_k int32 (batch): query rows / keys
    actually used per sequence (FA3: rows past seqused_q are computed by no one and left as
    they were, out and softmax_lse alike; masks align to the used lengths). max_seqlen_k = 0:
    every key sequence is empty (zeros, softmax_lse -inf). Returns out (total_q, nheads,
    headdim_v), or (out, softmax_lse (nheads, total_q)) with return_attn_probs=True.
    """
    ops = _TORCH_OPS
    if (ops is not None and out is None and sinks is None and q_descale is None and k_descale is None
            and v_descale is None and qv is None and not ops._is_compiling()):
        # Eager torch tensors: one C++ step (torch_ops.torch_forward), None where it does not apply.
        r = ops.torch_forward(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k, None, None, None, None,
                              None, None, None, None, None, True, max_seqlen_q, max_seqlen_k, softmax_scale, causal,
                              window_size, attention_chunk, softcap, return_attn_probs, backend, num_threads,
                              sm_margin)
        if r is not None:
            return r
    if qv is not None:
        _unsupported(qv=qv)
    window = _window(window_size, causal)
    return _runner(q)(q, k, v, return_lse=return_attn_probs, out=out, cu_seqlens_q=cu_seqlens_q,
                      cu_seqlens_k=cu_seqlens_k, seqused_q=seqused_q, seqused_k=seqused_k, page_table=None,
                      max_seqlen_q=max_seqlen_q or 0, max_seqlen_k=max_seqlen_k or 0, sinks=sinks,
                      q_descale=q_descale, k_descale=k_descale, v_descale=v_descale,
                      softmax_scale=softmax_scale, softcap=softcap, causal=causal, window=window,
                      attention_chunk=attention_chunk, backend=backend, num_threads=num_threads,
                      sm_margin=sm_margin)


def _empty_accumulators(lse):
    """FA3's split-KV accumulators (out_accum, softmax_lse_accum) that flash_attn_with_kvcache
    returns after the LSE: empty, as FA3's are without splits (longattn never splits here)."""
    if isinstance(lse, np.ndarray):
        return np.empty(0, np.float32), np.empty(0, np.float32)
    return lse.new_empty((0,)), lse.new_empty((0,))


def flash_attn_with_kvcache(
    q,
    k_cache,
    v_cache,
    k=None,
    v=None,
    qv=None,
    rotary_cos=None,
    rotary_sin=None,
    cache_seqlens=None,
    cache_batch_idx=None,
    cache_leftpad=None,
    page_table=None,
    cu_seqlens_q=None,
    cu_seqlens_k_new=None,
    max_seqlen_q: Optional[int] = None,
    rotary_seqlens=None,
    q_descale=None,
    k_descale=None,
    v_descale=None,
    softmax_scale: Optional[float] = None,
    causal: bool = False,
    window_size: Sequence[int] = (-1, -1),
    attention_chunk: int = 0,
    softcap: float = 0.0,
    rotary_interleaved: bool = True,
    scheduler_metadata=None,
    num_splits: int = 0,
    pack_gqa=None,
    sm_margin: int = 0,
    return_softmax_lse: bool = False,
    *,
    sinks=None,
    out=None,
    backend: str = "auto",
    num_threads: int = 0,
):
    """Attention over a KV cache, FlashAttention-3's serving call (decode and chunked prefill).

    k_cache/v_cache dense (batch_cache, seqlen_cache, nheads_k, headdim) or paged (num_pages,
    page_size, nheads_k, headdim) with page_table int32 (batch_cache, max_pages); q dense, or
    ragged with cu_seqlens_q (+ max_seqlen_q). cache_seqlens: int or int32 (batch), the cached
    keys of each sequence (None: the whole cache).

    As FA3: k / v (batch, seqlen_new, nheads_k, headdim), or ragged (total_new, ...) with
    cu_seqlens_k_new, are written *in place* into k_cache / v_cache at slots cache_seqlens[b]
    .. + new, then attention runs over the cache with them (causal aligned bottom-right). With
    rotary_cos / rotary_sin (seqlen_ro, rotary_dim / 2) (q's dtype or float32), the new keys
    are rotated at positions r0 + i and q at r0 + i (causal or local) or r0 (otherwise), where
    r0 = rotary_seqlens[b] if given else cache_seqlens[b]; rotary_interleaved: GPT-J pairs
    (0, 1), (2, 3)... else GPT-NeoX (i, i + rotary_dim / 2). The caller's q is never modified.
    cache_batch_idx (batch) picks each sequence's cache row (page_table row), cache_leftpad
    (batch) its first cache slot (keys are slots cache_leftpad[b] .. cache_seqlens[b] + new).
    Returns out, or with return_softmax_lse=True FA3's tuple (out, softmax_lse, out_accum,
    softmax_lse_accum), the last two empty (no split-KV accumulators).
    """
    _unsupported(qv=qv)
    if (k is None) != (v is None):
        raise ValueError("k: k and v (the new keys and values) must be given together" if k is None
                         else "v: k and v (the new keys and values) must be given together")
    rotary = rotary_cos is not None or rotary_sin is not None
    ops = _TORCH_OPS
    if (ops is not None and out is None and sinks is None and q_descale is None and k_descale is None
            and v_descale is None and (causal or not rotary) and not ops._is_compiling()):
        # Eager torch tensors: one C++ step (torch_ops.torch_forward), None where it does not apply
        # (cache_seqlens as an int among others). Not rotary without causal: its window rule below.
        r = ops.torch_forward(q, k_cache, v_cache, cu_seqlens_q, None, None, cache_seqlens, page_table, k, v,
                              cu_seqlens_k_new, cache_batch_idx, cache_leftpad, rotary_cos, rotary_sin, rotary_seqlens,
                              rotary_interleaved, max_seqlen_q, 0, softmax_scale, causal, window_size,
                              attention_chunk, softcap, return_softmax_lse, backend, num_threads, sm_margin)
        if r is not None:
            return (r[0], r[1]) + _empty_accumulators(r[1]) if return_softmax_lse else r
    kvcache = {}
    for name, x in (("k_new", k), ("v_new", v), ("cu_seqlens_k_new", cu_seqlens_k_new),
                    ("cache_batch_idx", cache_batch_idx), ("cache_leftpad", cache_leftpad),
                    ("rotary_cos", rotary_cos), ("rotary_sin", rotary_sin),
                    ("rotary_seqlens", rotary_seqlens if rotary else None)):  # FA3 ignores it without rotary
        if x is not None:
            kvcache[name] = x
    window = _window(window_size, causal)
    if rotary and not causal:
        # FA3 treats a window at least as wide as everything as no window (the keys it allows
        # are the same), and then rotates every query at r0: drop such windows likewise.
        ks = A.shape_of(k_cache)
        seqlen_k = ks[1] if page_table is None else ks[1] * A.shape_of(page_table)[1]
        seqlen_q = max_seqlen_q if cu_seqlens_q is not None else A.shape_of(q)[1]
        wl, wr = window
        window = (-1 if wl >= seqlen_k - 1 else wl, -1 if seqlen_q and wr >= seqlen_q - 1 else wr)
    if kvcache:
        kvcache["rotary_interleaved"] = bool(rotary_interleaved)
    res = _runner(q)(q, k_cache, v_cache, return_lse=return_softmax_lse, out=out, cu_seqlens_q=cu_seqlens_q,
                     cu_seqlens_k=None, seqused_q=None, seqused_k=cache_seqlens, page_table=page_table,
                     max_seqlen_q=max_seqlen_q or 0, max_seqlen_k=0, sinks=sinks,
                     q_descale=q_descale, k_descale=k_descale, v_descale=v_descale,
                     softmax_scale=softmax_scale, softcap=softcap, causal=causal,
                     window=window, attention_chunk=attention_chunk,
                     backend=backend, num_threads=num_threads, sm_margin=sm_margin, kvcache=kvcache or None)
    if not return_softmax_lse:
        return res
    return (res[0], res[1]) + _empty_accumulators(res[1])


def flash_attn_qkvpacked_func(
    qkv,
    softmax_scale: Optional[float] = None,
    causal: bool = False,
    q_descale=None,
    k_descale=None,
    v_descale=None,
    window_size: Sequence[int] = (-1, -1),
    attention_chunk: int = 0,
    softcap: float = 0.0,
    deterministic: bool = False,
    num_heads_q: Optional[int] = None,
    sm_margin: int = 0,
    return_attn_probs: bool = False,
    *,
    sinks=None,
    out=None,
    backend: str = "auto",
    num_threads: int = 0,
):
    """qkv (batch, seqlen, 3, nheads, headdim), or (batch, seqlen, nheads_q + 2 * nheads_k,
    headdim) with num_heads_q (GQA). Same as flash_attn_func on the unpacked views."""
    shape = A.shape_of(qkv)
    if len(shape) == 5:
        if shape[2] != 3:
            raise ValueError(f"qkv: shape {shape}, expected (batch, seqlen, 3, nheads, headdim)")
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
    else:
        if num_heads_q is None or len(shape) != 4 or (shape[2] - num_heads_q) % 2 or shape[2] <= num_heads_q:
            raise ValueError(f"qkv: shape {shape} needs num_heads_q with nheads_q + 2 * nheads_k heads")
        hk = (shape[2] - num_heads_q) // 2
        q, k, v = (qkv[:, :, :num_heads_q], qkv[:, :, num_heads_q:num_heads_q + hk],
                   qkv[:, :, num_heads_q + hk:])
    return flash_attn_func(q, k, v, softmax_scale, causal, None, q_descale, k_descale, v_descale,
                           window_size, attention_chunk, softcap, 1, None, deterministic, sm_margin,
                           return_attn_probs, sinks=sinks, out=out, backend=backend,
                           num_threads=num_threads)


def _contiguous_last(x):
    if isinstance(x, np.ndarray):
        return x if x.strides[-1] == x.itemsize or x.shape[-1] <= 1 else np.ascontiguousarray(x)
    return x if x.stride(-1) == 1 or x.shape[-1] <= 1 else x.contiguous()


def flash_attn_combine(out_partial, lse_partial, out=None, out_dtype=None, *, backend: str = "auto"):
    """Merge split-KV partial results by their LSEs, as FA3's flash_attn_combine.

    out_partial (num_splits, batch, seqlen, nheads, headdim) with lse_partial float32
    (num_splits, batch, seqlen, nheads) -> (out (batch, seqlen, nheads, headdim),
    softmax_lse (batch, seqlen, nheads)); or the varlen layout out_partial (num_splits,
    total_q, nheads, headdim) with lse_partial (num_splits, total_q, nheads) -> (out
    (total_q, nheads, headdim), softmax_lse (total_q, nheads)). out_dtype: FA3's (a torch
    dtype; NumPy: a dtype or 'bf16' / 'f16' / 'f32'), default out_partial's. Partials with
    LSE -inf contribute nothing; all -inf gives out 0 and LSE -inf.
    """
    s = A.shape_of(out_partial)
    if len(s) == 5:
        splits, batch, seqlen, heads, dim = s
        tokens = batch * seqlen
        op = out_partial.reshape(splits, tokens, heads, dim)
        lp = lse_partial.reshape(splits, tokens, heads)
    elif len(s) == 4:
        splits, tokens, heads, dim = s
        op, lp = out_partial, lse_partial
    else:
        raise ValueError(f"out_partial: shape {s}, expected (num_splits, batch, seqlen, nheads, "
                         "headdim) or (num_splits, total_q, nheads, headdim)")
    if A.shape_of(lse_partial) != s[:-1]:
        raise ValueError(f"lse_partial: shape {A.shape_of(lse_partial)}, expected {s[:-1]} "
                         "(out_partial's without the head dim)")
    lp = _contiguous_last(lp.swapaxes(1, 2))  # (splits, heads, tokens)
    op = _contiguous_last(op)
    if isinstance(op, np.ndarray):
        name = A.numpy_dtype_name(out_dtype) if out_dtype is not None else None
        o, lse = _combine(op, lp, out_dtype=name, return_lse=True, backend=backend)
    else:
        o, lse = _torch_ops().run_combine(op, lp, out_dtype, backend)
    if len(s) == 5:
        o = o.reshape(batch, seqlen, heads, dim)
        lse = lse.reshape(heads, batch, seqlen).swapaxes(0, 1).swapaxes(1, 2)
    else:
        lse = lse.swapaxes(0, 1)
    if out is not None:
        out[...] = o
        o = out
    return o, lse


def get_scheduler_metadata(
    batch_size,
    max_seqlen_q,
    max_seqlen_k,
    num_heads_q,
    num_heads_kv,
    headdim,
    cache_seqlens,
    qkv_dtype=None,
    headdim_v=None,
    cu_seqlens_q=None,
    cu_seqlens_k_new=None,
    cache_leftpad=None,
    page_size=None,
    max_seqlen_k_new=0,
    causal=False,
    window_size=(-1, -1),
    attention_chunk=0,
    has_softcap=False,
    num_splits=0,
    pack_gqa=None,
    sm_margin=0,
):
    """FA3's precomputed split-KV schedule for flash_attn_with_kvcache(scheduler_metadata=...).
    longattn schedules on its own: this accepts FA3's arguments (qkv_dtype defaults to
    torch.bfloat16 in FA3; None here, so that importing longattn never needs torch) and returns
    an empty int32 array/tensor next to cache_seqlens, which flash_attn_with_kvcache accepts
    and ignores."""
    return A.int_array_like(cache_seqlens, [])
