"""FlashAttention-3 compatible forward API (`flash_attn_interface`), for NumPy and PyTorch.

Replace `from flash_attn_interface import flash_attn_func` with
`from longattn import flash_attn_func`. Signatures follow FA3's forward arguments; FA3
options that only tune speed (num_splits, pack_gqa, sm_margin, scheduler_metadata) or only
affect the backward pass (deterministic) are accepted and ignored. Features longattn does
not have raise NotImplementedError naming the argument. Our extras are keyword-only:
`sinks` (float32 per-head logits), `out` (preallocated output), `backend`
("auto" | "cpu" | "cuda" | "reference") and `num_threads` (CPU backend).

Outputs are allocated in the caller's framework on the caller's device; PyTorch's current
CUDA stream is used. There is no autograd: outputs do not require grad.
"""

from __future__ import annotations

from typing import Optional, Sequence

from . import _arrays as A
from ._core import forward


def _fa3_window(window_size, causal):
    """FA3 ignores the right window under causal (forcing it to 0). longattn rejects a right
    window that conflicts with causal, so drop it: causal alone already bounds the right."""
    w = tuple(window_size) if window_size is not None else (-1, -1)
    if len(w) != 2:
        raise ValueError(f"window_size: expected (left, right), got {window_size!r}")
    left, right = int(w[0]), int(w[1])
    return (left, -1) if causal else (left, right)


def _unsupported(**kwargs):
    for name, value in kwargs.items():
        if value is not None:
            raise NotImplementedError(f"{name}: not supported by longattn")


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
    """Dense attention. q (batch, seqlen_q, nheads, headdim), k/v (batch, seqlen_k,
    nheads_k, headdim[_v]); nheads % nheads_k == 0 (GQA/MQA). Causal and window are aligned
    bottom-right like FA3. Returns out (batch, seqlen_q, nheads, headdim_v), or
    (out, softmax_lse) with return_attn_probs=True, softmax_lse float32 (batch, nheads, seqlen_q).
    fp8 (float8_e4m3fn) q/k/v need q/k/v_descale float32 (batch, nheads_k); out is bf16.
    """
    _unsupported(qv=qv)
    return forward(
        q, k, v, out=out, return_lse=return_attn_probs, sinks=sinks,
        q_descale=q_descale, k_descale=k_descale, v_descale=v_descale,
        softmax_scale=softmax_scale, softcap=softcap, causal=causal, window_size=_fa3_window(window_size, causal),
        attention_chunk=attention_chunk, backend=backend, num_threads=num_threads,
    )


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
    cu_seqlens_q/k int32 (batch + 1); seqused_k int32 (batch) limits the keys used.
    Returns out (total_q, nheads, headdim_v), or (out, softmax_lse (nheads, total_q)).
    """
    _unsupported(qv=qv, seqused_q=seqused_q)
    return forward(
        q, k, v, out=out, return_lse=return_attn_probs,
        cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, seqused_k=seqused_k,
        max_seqlen_q=max_seqlen_q or 0, max_seqlen_k=max_seqlen_k or 0, sinks=sinks,
        q_descale=q_descale, k_descale=k_descale, v_descale=v_descale,
        softmax_scale=softmax_scale, softcap=softcap, causal=causal, window_size=_fa3_window(window_size, causal),
        attention_chunk=attention_chunk, backend=backend, num_threads=num_threads,
    )


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
    """Attention over a KV cache (prefill over a cached prefix: causal aligns bottom-right to
    each sequence's cache_seqlens). k_cache/v_cache dense (batch, seqlen_cache, nheads_k,
    headdim) or paged (num_pages, page_size, nheads_k, headdim) with page_table int32
    (batch, max_pages). cache_seqlens: int or int32 (batch). The cache is read, never
    updated: appending new k/v is not supported.
    """
    _unsupported(
        k=k, v=v, qv=qv, rotary_cos=rotary_cos, rotary_sin=rotary_sin,
        cache_batch_idx=cache_batch_idx, cache_leftpad=cache_leftpad,
        cu_seqlens_k_new=cu_seqlens_k_new, rotary_seqlens=rotary_seqlens,
    )
    seqused_k = cache_seqlens
    if cache_seqlens is not None and not (A.is_numpy(cache_seqlens) or A.is_torch(cache_seqlens)):
        batch = (len(cu_seqlens_q) - 1) if cu_seqlens_q is not None else A.shape_of(q)[0]
        seqused_k = A.int_array_like(k_cache, [int(cache_seqlens)] * batch)
    return forward(
        q, k_cache, v_cache, out=out, return_lse=return_softmax_lse,
        cu_seqlens_q=cu_seqlens_q, seqused_k=seqused_k, page_table=page_table,
        max_seqlen_q=max_seqlen_q or 0, sinks=sinks,
        q_descale=q_descale, k_descale=k_descale, v_descale=v_descale,
        softmax_scale=softmax_scale, softcap=softcap, causal=causal, window_size=_fa3_window(window_size, causal),
        attention_chunk=attention_chunk, backend=backend, num_threads=num_threads,
    )
