"""One call into the C++ core: longattn::forward with every argument explicit.

The public FlashAttention-style functions (interface.py) translate their arguments to this."""

from __future__ import annotations

from typing import Optional

from . import _arrays as A
from . import _longattn as _ext


def forward(
    q,
    k,
    v,
    *,
    out=None,
    return_lse=False,
    lse=None,
    cu_seqlens_q=None,
    cu_seqlens_k=None,
    seqused_q=None,
    seqused_k=None,
    page_table=None,
    max_seqlen_q: int = 0,
    max_seqlen_k: int = 0,
    sinks=None,
    q_descale=None,
    k_descale=None,
    v_descale=None,
    softmax_scale: Optional[float] = None,
    softcap: float = 0.0,
    causal: bool = False,
    top_left: bool = False,
    window_size=(-1, -1),
    attention_chunk: int = 0,
    backend: str = "auto",
    num_threads: int = 0,
    sm_margin: int = 0,
    check_page_table: bool = False,
    k_new=None,
    v_new=None,
    cu_seqlens_k_new=None,
    cache_batch_idx=None,
    cache_leftpad=None,
    rotary_cos=None,
    rotary_sin=None,
    rotary_seqlens=None,
    rotary_interleaved: bool = True,
    check_kvcache: bool = False,
    cp_world: int = 0,
    cp_rank: int = 0,
):
    """Attention forward on NumPy arrays or PyTorch tensors (see longattn/longattn.h).

    Dense q (batch, seq_q, heads_q, dim) or ragged (total_q, heads_q, dim) with cu_seqlens_q;
    k/v dense, ragged (cu_seqlens_k) or paged (page_table). seqused_q / seqused_k (int32,
    batch) limit the query rows / keys used per sequence; rows past seqused_q are not written.
    Returns out, or (out, lse) with return_lse. `out` (if given) must be q's layout with v's
    head dim. `lse` (if given) is a writable float32 LSE array of the documented shape, any
    strides with a contiguous last dim (it implies return_lse).

    KV cache serving (longattn.h KvCacheArgs; k / v are then the cache, seqused_k its
    cache_seqlens): k_new / v_new are appended into k / v in place (after rotary with
    rotary_cos / rotary_sin), cu_seqlens_k_new makes them ragged, cache_batch_idx picks each
    sequence's cache row, cache_leftpad its first slot, rotary_seqlens its rotary start.
    check_kvcache: the CUDA backend waits for its device-side checks and raises on a failure.
    sm_margin: SMs the CUDA kernel leaves free for work running beside it (communication;
    FlashAttention-3's sm_margin), >= 0; the other backends ignore it.
    cp_world / cp_rank (longattn.h Args::cp_world): q is rank cp_rank's zigzag shard of one
    sequence (batch 1, chunks cp_rank and 2 cp_world - 1 - cp_rank), k / v every rank's shard
    as gathered, (cp_world, 2c, heads_kv, dim); attention at global positions. 0: off.
    """
    for name, x in (("q", q), ("k", k), ("v", v)):
        A.check_array(name, x)
    q_dt = A.dtype_name(q)
    if out is None:
        out_dt = "bf16" if q_dt == "e4m3" else q_dt
        if out_dt not in ("bf16", "f16", "f32"):
            raise TypeError(f"q: unsupported dtype {q_dt} (use bfloat16, float16, float32 or float8_e4m3fn)")
        out = A.empty_like_framework(q, A.shape_of(q)[:-1] + (A.shape_of(v)[-1],), out_dt)
    else:
        A.check_array("out", out)
        if not A.is_writable(out):
            raise ValueError("out: array is read-only")
    if lse is not None:
        A.check_array("lse", lse)
        if not A.is_writable(lse):
            raise ValueError("lse: array is read-only")
        return_lse = True
    elif return_lse:
        qs = A.shape_of(q)
        lse_shape = (qs[1], qs[0]) if cu_seqlens_q is not None else (qs[0], qs[2], qs[1])
        if len(qs) < 3:
            lse_shape = (0,)  # rank errors are reported by the C++ validation
        lse = A.empty_like_framework(q, lse_shape, "f32")
    if sinks is not None:
        A.check_array("sinks", sinks)
    if k_new is not None:  # the cache is written in place
        for name, x in (("k", k), ("v", v)):
            if not A.is_writable(x):
                raise ValueError(f"{name}: array is read-only (k_new / v_new are appended into the cache in place)")
    if softmax_scale is not None:
        softmax_scale = float(softmax_scale)
    w = tuple(window_size) if window_size is not None else (-1, -1)
    if len(w) != 2:
        raise ValueError(f"window_size: expected (left, right), got {window_size!r}")

    tensors = {
        "q": A.to_ext(q),
        "k": A.to_ext(k),
        "v": A.to_ext(v),
        "out": A.to_ext(out),
        "lse": A.to_ext(lse),
        "cu_seqlens_q": A.to_ext(cu_seqlens_q),
        "cu_seqlens_k": A.to_ext(cu_seqlens_k),
        "seqused_q": A.to_ext(seqused_q),
        "seqused_k": A.to_ext(seqused_k),
        "page_table": A.to_ext(page_table),
        "sinks": A.to_ext(sinks),
        "q_descale": A.to_ext(q_descale),
        "k_descale": A.to_ext(k_descale),
        "v_descale": A.to_ext(v_descale),
    }
    for name, x in (("k_new", k_new), ("v_new", v_new), ("cu_seqlens_k_new", cu_seqlens_k_new),
                    ("cache_batch_idx", cache_batch_idx), ("cache_leftpad", cache_leftpad),
                    ("rotary_cos", rotary_cos), ("rotary_sin", rotary_sin), ("rotary_seqlens", rotary_seqlens)):
        if x is not None:
            A.check_array(name, x)
            tensors[name] = A.to_ext(x)
    _ext.forward(
        tensors,
        softmax_scale=softmax_scale,
        softcap=float(softcap or 0.0),
        causal=bool(causal),
        top_left=bool(top_left),
        window_left=int(w[0]),
        window_right=int(w[1]),
        chunk_size=int(attention_chunk or 0),
        max_seqlen_q=int(max_seqlen_q or 0),
        max_seqlen_k=int(max_seqlen_k or 0),
        backend=backend,
        stream=A.current_stream(q),
        num_threads=int(num_threads),
        sm_margin=A.int64(sm_margin),
        check_page_table=bool(check_page_table),
        rotary_interleaved=bool(rotary_interleaved),
        check_kvcache=bool(check_kvcache),
        cp_world=A.int64(cp_world),
        cp_rank=A.int64(cp_rank),
    )
    return (out, lse) if return_lse else out


def combine(out_partial, lse_partial, out=None, out_dtype=None, return_lse=False, backend="auto", lse=None):
    """Merge partial results over disjoint key sets by their LSEs (longattn::combine).

    out_partial (splits, tokens, heads, dim_v), lse_partial float32 (splits, heads, tokens).
    Returns out (tokens, heads, dim_v), or (out, lse) with return_lse. `lse` (if given) is a
    writable float32 (heads, tokens) array for the merged LSE (it implies return_lse).
    """
    A.check_array("out_partial", out_partial)
    A.check_array("lse_partial", lse_partial)
    s = A.shape_of(out_partial)
    if out is None:
        dt = out_dtype or A.dtype_name(out_partial)
        out = A.empty_like_framework(out_partial, s[1:], dt)
    if lse is not None:
        A.check_array("lse", lse)
        return_lse = True
    elif return_lse and len(s) == 4:
        lse = A.empty_like_framework(out_partial, (s[2], s[1]), "f32")
    _ext.combine(
        {
            "out_partial": A.to_ext(out_partial),
            "lse_partial": A.to_ext(lse_partial),
            "out": A.to_ext(out),
            "lse": A.to_ext(lse),
        },
        backend=backend,
        stream=A.current_stream(out_partial),
    )
    return (out, lse) if return_lse else out
