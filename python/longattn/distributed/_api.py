"""context_parallel_attn: argument handling, the cross-rank agreement, the default rule."""

from __future__ import annotations

import math
import sys
from typing import Optional, Sequence

from .. import _core
from . import _exec as E
from . import _meta as M
from . import _plan as P
from .cost_model import default_kv_groups, default_method


def _torch():
    t = sys.modules.get("torch")
    if t is None:
        import torch as t  # noqa: F811 - context parallelism needs torch.distributed
    return t


def _world(group):
    import torch.distributed as dist

    if group is None and not (dist.is_available() and dist.is_initialized()):
        return 1, 0
    return dist.get_world_size(group), dist.get_rank(group)


def _host_ints(cu):
    """cu_seqlens as a host list, or None when it is not a 1-D integer array."""
    t = _torch()
    try:
        if isinstance(cu, t.Tensor):
            if cu.dim() != 1 or cu.dtype not in (t.int32, t.int64):
                return None
            return [int(x) for x in cu.cpu().tolist()]
        vals = list(cu)
        if not all(isinstance(x, int) or (hasattr(x, "__index__") and not isinstance(x, float)) for x in vals):
            return None
        return [int(x) for x in vals]
    except Exception:
        return None


def _exchange_device(group, q):
    """Where the descriptors live: CUDA when the group has NCCL and CUDA is present (the
    same answer on every rank of a uniform job, whatever device a rank's q is on), else CPU."""
    import torch.distributed as dist

    t = _torch()
    backend = str(dist.get_backend(group)).lower()
    if "nccl" in backend and t.cuda.is_available():
        if isinstance(q, t.Tensor) and q.device.type == "cuda":
            return q.device
        return t.device("cuda", t.cuda.current_device())
    return t.device("cpu")


def _descales(q, k, cu_seqlens, q_descale, k_descale, v_descale):
    """fp8 inputs: the three descales, each defaulting to ones of (sequences, heads_kv) as FA3
    does; None for 16-bit inputs (given ones are then refused by _check)."""
    t = _torch()
    fp8 = isinstance(q, t.Tensor) and q.dtype == getattr(t, "float8_e4m3fn", None)
    given = (q_descale, k_descale, v_descale)
    if not fp8:
        return None if all(d is None for d in given) else given
    if any(d is None for d in given):
        # Runs before the agreement: nothing here may raise on one rank only (the others would
        # wait in the exchange), so a shape it cannot read leaves the descales absent and the
        # agreement reports the mismatch on every rank.
        try:
            nseq = (len(cu_seqlens) - 1) if cu_seqlens is not None else q.shape[0]
            ones = t.ones((nseq, k.shape[-2]), dtype=t.float32, device=q.device)
        except Exception:  # noqa: BLE001
            return given
        given = tuple(ones if d is None else d for d in given)
    return given


def _free_bytes(q) -> int:
    t = _torch()
    if isinstance(q, t.Tensor) and q.device.type == "cuda":
        try:
            return int(t.cuda.mem_get_info(q.device)[0])
        except Exception:
            return -1
    return -1


def _check(q, k, v, sinks, cu, *, causal, window, layout, method, kv_groups, world, descales=None):
    """Checks of the agreed arguments: every rank holds the same shapes and options, so every
    rank raises the same error here (nothing below is rank-specific)."""
    t = _torch()
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, t.Tensor):
            raise TypeError(f"{name}: context parallelism needs torch tensors, got {type(x).__name__}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"k, v: must be on q's device {q.device}, got {k.device} and {v.device}")
    fp8 = getattr(t, "float8_e4m3fn", None)
    if q.dtype not in (t.bfloat16, t.float16, t.float32) and (fp8 is None or q.dtype != fp8):
        raise TypeError(f"q: unsupported dtype {q.dtype} (bfloat16, float16, float32 or float8_e4m3fn)")
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"k, v: dtypes {k.dtype}, {v.dtype} differ from q's {q.dtype}")
    nd = 3 if cu is not None else 4
    form = "(total, heads, dim) with cu_seqlens" if cu is not None else "(batch, seq, heads, dim)"
    for name, x in (("q", q), ("k", k), ("v", v)):
        if x.dim() != nd:
            raise ValueError(f"{name}: rank {x.dim()}, expected {nd}: {form}")
        if x.stride(-1) != 1 and x.shape[-1] > 1:
            raise ValueError(f"{name}: last dimension must be contiguous")
    if not (q.shape[:-2] == k.shape[:-2] == v.shape[:-2]):
        raise ValueError(
            f"q, k, v: token extents {tuple(q.shape[:-2])}, {tuple(k.shape[:-2])}, {tuple(v.shape[:-2])} differ "
            "(context parallelism is self-attention: every rank's K/V shard covers its query positions)"
        )
    hq, hk = q.shape[-2], k.shape[-2]
    if v.shape[-2] != hk or k.shape[-1] != q.shape[-1] or hk < 1 or hq % hk:
        raise ValueError(f"q, k, v: heads/dims {tuple(q.shape[-2:])}, {tuple(k.shape[-2:])}, {tuple(v.shape[-2:])} "
                         "need heads_q % heads_kv == 0, k and v with the same heads, k with q's head dim")
    if sinks is not None:
        if not isinstance(sinks, t.Tensor) or sinks.dtype != t.float32 or tuple(sinks.shape) != (hq,):
            raise ValueError(f"sinks: expected a float32 tensor of shape ({hq},)")
        if sinks.device != q.device:
            raise ValueError(f"sinks: on {sinks.device}, expected q's device {q.device}")
    if descales is not None:  # fp8: (sequences, heads_kv) float32 each (dense: the batch)
        nseq = len(cu) - 1 if cu is not None else q.shape[0]
        if q.dtype != getattr(t, "float8_e4m3fn", None):
            raise ValueError(f"q_descale, k_descale, v_descale: only with float8_e4m3fn inputs, q is {q.dtype}")
        for name, d in zip(("q_descale", "k_descale", "v_descale"), descales):
            if not isinstance(d, t.Tensor) or d.dtype != t.float32 or tuple(d.shape) != (nseq, hk):
                raise ValueError(f"{name}: expected a float32 tensor of shape ({nseq}, {hk}) (sequences, heads_kv)")
            if d.device != q.device:
                raise ValueError(f"{name}: on {d.device}, expected q's device {q.device}")
    if layout not in P.LAYOUTS:
        raise ValueError(f"layout: expected one of {P.LAYOUTS}, got {layout!r}")
    if method is not None and method not in P.METHODS:
        raise ValueError(f"method: expected None or one of {P.METHODS}, got {method!r}")
    if kv_groups is not None and (kv_groups < 1 or hk % kv_groups):
        raise ValueError(f"kv_groups: {kv_groups} does not divide the {hk} kv heads")
    wl, wr = window
    if wl < -1 or wr < -1:
        raise ValueError(f"window_size: {tuple(window)}, entries must be >= -1 (-1: unbounded)")
    cpr = P.chunks_per_rank(layout)
    if cu is not None:
        if len(cu) < 1 or cu[0] != 0 or any(b < a for a, b in zip(cu, cu[1:])) or cu[-1] != q.shape[0]:
            raise ValueError(f"cu_seqlens: expected non-decreasing offsets from 0 to the {q.shape[0]} local tokens")
        lens = [b - a for a, b in zip(cu, cu[1:])]
    else:
        lens = [q.shape[1]]
    for i, n in enumerate(lens):
        if n % cpr:
            raise ValueError(
                f"{'cu_seqlens sequence %d' % i if cu is not None else 'q'}: local length {n} is not a multiple "
                f"of {cpr}: the {layout} layout gives every rank {cpr} equal chunks of each sequence "
                f"(global lengths must be multiples of {cpr * world}; pad them)"
            )
    return lens


def rank_problem(q, k, v, layout, world, rank, cu, lens, *, causal, window, softcap, softmax_scale, sinks,
                 return_lse, backend, num_threads, kv_groups, descales=None, sm_margin=0) -> E.RankProblem:
    """One rank's agreed problem (shared with simulate.py)."""
    return E.RankProblem(
        layout=layout, world=world, rank=rank,
        segs=P.segments(layout, world, None if cu is not None else q.shape[0], lens),
        ragged=cu is not None, causal=bool(causal), window=(int(window[0]), -1 if causal else int(window[1])),
        softcap=float(softcap or 0.0),
        softmax_scale=float(softmax_scale) if softmax_scale is not None else 1.0 / math.sqrt(q.shape[-1]),
        sinks=sinks, return_lse=return_lse, backend=backend, num_threads=num_threads, sm_margin=int(sm_margin),
        kv_groups=kv_groups or default_kv_groups(k.shape[-2]), descales=descales,
    )


def alloc_outputs(q, v, cu, return_lse):
    t = _torch()
    odt = t.bfloat16 if q.dtype == getattr(t, "float8_e4m3fn", None) else q.dtype  # fp8: bf16 out
    out = t.empty(q.shape[:-1] + (v.shape[-1],), dtype=odt, device=q.device)
    lse = None
    if return_lse:
        hq = q.shape[-2]
        shape = (hq, q.shape[0]) if cu is not None else (q.shape[0], hq, q.shape[1])
        lse = t.empty(shape, dtype=t.float32, device=q.device)
    return out, lse


def context_parallel_attn(
    q,
    k,
    v,
    group=None,
    *,
    causal: bool = False,
    layout: str = "zigzag",
    method: Optional[str] = None,
    cu_seqlens=None,
    softmax_scale: Optional[float] = None,
    window_size: Sequence[int] = (-1, -1),
    softcap: float = 0.0,
    sinks=None,
    kv_groups: Optional[int] = None,
    return_lse: bool = False,
    backend: str = "auto",
    num_threads: int = 0,
    q_descale=None,
    k_descale=None,
    v_descale=None,
    sm_margin: int = 0,
):
    """Attention of one long sequence (or ragged batch) sharded over the ranks of `group`.

    Every rank passes its shard (see `shard`): q (batch, seq/W, heads_q, dim), k/v
    (batch, seq/W, heads_kv, dim[_v]); ragged: (tokens, heads, dim) with the rank's
    `cu_seqlens` (the same on every rank: `local_cu_seqlens`). zigzag: rank r holds chunks r
    and 2W-1-r of each sequence's 2W equal chunks; contiguous: chunk r of W. Masks use
    global positions: causal, `window_size` (left, right; causal ignores the right one, as
    FA3 does), `sinks` (float32 (heads_q,)), `softcap`. float8_e4m3fn q / k / v take
    `q_descale`, `k_descale`, `v_descale`, float32 (sequences, heads_kv) of the whole batch
    (dense: its batch; ragged: one row per sequence), the same on every rank; 1.0 when
    omitted (as FA3); the output is bf16. `sm_margin`: SMs each attention call leaves free
    (longattn.forward's sm_margin), so that the exchange's NCCL kernels can run beside it
    instead of waiting for the call to end; 0 (default) uses every SM.

    `method`: "all_gather_kv" (gather K/V by head groups, `kv_groups` of them, each local
    query chunk attends to the keys it may see) or "ring" (K/V shards travel around the
    ring; partials merged by LSE); None picks by the documented rule
    (cost_model.default_method: all_gather_kv, MHA included). kv_groups None:
    cost_model.default_kv_groups (2, more when the gathered K/V would not fit).

    Returns this rank's output (q's layout, v's head dim, q's dtype), or (out, lse) with
    return_lse (float32 (batch, heads_q, seq/W) or (heads_q, tokens)). Without an
    initialised process group (group None) or with one rank it is the plain
    longattn.forward call, bit for bit. Shards that differ across ranks (lengths, heads,
    dtypes, options) raise the same ValueError on every rank before any exchange.
    """
    world, rank = _world(group)
    window = (int(window_size[0]), -1 if causal else int(window_size[1]))
    descales = _descales(q, k, cu_seqlens, q_descale, k_descale, v_descale)
    if world == 1:
        cu_t, max_len = None, 0
        if cu_seqlens is not None:
            t = _torch()
            cu_t = cu_seqlens if isinstance(cu_seqlens, t.Tensor) else t.tensor(list(cu_seqlens), dtype=t.int32, device=q.device)
            ints = _host_ints(cu_seqlens) or [0]
            max_len = max([b - a for a, b in zip(ints, ints[1:])] or [0])
        return _core.forward(
            q, k, v, return_lse=return_lse, cu_seqlens_q=cu_t, cu_seqlens_k=cu_t, max_seqlen_q=max_len,
            max_seqlen_k=max_len, sinks=sinks, softmax_scale=softmax_scale, softcap=softcap, causal=causal,
            window_size=window, backend=backend, num_threads=num_threads, sm_margin=sm_margin,
            **(dict(zip(("q_descale", "k_descale", "v_descale"), descales)) if descales else {}),
        )

    cu = _host_ints(cu_seqlens) if cu_seqlens is not None else None
    layout_code = P.LAYOUTS.index(layout) if layout in P.LAYOUTS else 99
    method_code = -1 if method is None else (P.METHODS.index(method) if method in P.METHODS else 99)
    desc = M.describe(
        q, k, v, sinks, cu, cu_seqlens is None or cu is not None, causal=causal, window=window, softcap=softcap,
        softmax_scale=softmax_scale, layout_code=layout_code, method_code=method_code, kv_groups=kv_groups,
        return_lse=return_lse, free_bytes=_free_bytes(q), descales=descales,
    )
    table = M.exchange(desc, group, _exchange_device(group, q))
    err, free_min = M.verdict(table)
    if err:
        raise ValueError(err)
    if cu_seqlens is not None and cu is None:
        raise ValueError("cu_seqlens: expected a 1-D integer array (the rank's local offsets)")
    lens = _check(q, k, v, sinks, cu, causal=causal, window=window, layout=layout, method=method,
                  kv_groups=kv_groups, world=world, descales=descales)

    hq, hk, dim, dim_v = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    tokens_global = world * sum(lens) * (1 if cu is not None else q.shape[0])
    method = method or default_method(world, hq, hk)
    groups = kv_groups or default_kv_groups(hk, tokens_global, dim, dim_v, q.element_size(), free_min)
    prob = rank_problem(q, k, v, layout, world, rank, cu, lens, causal=causal, window=window, softcap=softcap,
                        softmax_scale=softmax_scale, sinks=sinks, return_lse=return_lse, backend=backend,
                        num_threads=num_threads, kv_groups=groups, descales=descales, sm_margin=sm_margin)
    out, lse = alloc_outputs(q, v, cu, return_lse)
    if prob.tokens == 0:  # nothing anywhere (the shapes agree): no exchange at all
        return (out, lse.fill_(float("-inf"))) if return_lse else out
    E.METHOD_RUNNERS[method](prob, E.TorchComm(group), q, k, v, out, lse)
    return (out, lse) if return_lse else out
