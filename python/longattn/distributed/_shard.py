"""Shard a whole sequence (or ragged batch) into the context-parallel layouts and back, so a
user can prepare inputs and check a setup against a single-process call."""

from __future__ import annotations

import sys
from typing import List, Optional, Sequence

from . import _plan as P


def _is_torch(x) -> bool:
    t = sys.modules.get("torch")
    return t is not None and isinstance(x, t.Tensor)


def _cat(parts, dim):
    if _is_torch(parts[0]):
        return sys.modules["torch"].cat(parts, dim=dim)
    import numpy as np

    return np.concatenate(parts, axis=dim)


def _take(x, dim: int, a: int, b: int):
    idx = [slice(None)] * x.ndim
    idx[dim] = slice(a, b)
    return x[tuple(idx)]


def _ints(cu) -> List[int]:
    if _is_torch(cu):
        return [int(v) for v in cu.detach().cpu().tolist()]
    return [int(v) for v in cu]


def _check_layout(layout: str, world_size: int):
    if layout not in P.LAYOUTS:
        raise ValueError(f"layout: expected one of {P.LAYOUTS}, got {layout!r}")
    if world_size < 1:
        raise ValueError(f"world_size: {world_size}, expected >= 1")


def _pieces(layout: str, world_size: int, length: int, what: str) -> int:
    """Chunk length c of a sequence of `length` tokens (it must split into equal chunks)."""
    n = P.chunks_per_rank(layout) * world_size
    if length % n:
        raise ValueError(
            f"{what}: length {length} is not a multiple of {n} ({layout} layout over {world_size} ranks "
            f"cuts every sequence into {n} equal chunks); pad the sequence"
        )
    return length // n


def local_cu_seqlens(cu_seqlens, world_size: int, layout: str = "zigzag"):
    """cu_seqlens of every rank's shard of a ragged batch with global `cu_seqlens` (each
    sequence keeps 1/world_size of its tokens; the result is the same on every rank).
    Returns the input's kind: int32 torch tensor on its device, or a list."""
    _check_layout(layout, world_size)
    cu = _ints(cu_seqlens)
    for i in range(len(cu) - 1):
        _pieces(layout, world_size, cu[i + 1] - cu[i], f"cu_seqlens sequence {i}")
    local = [x // world_size for x in cu]
    if _is_torch(cu_seqlens):
        t = sys.modules["torch"]
        return t.tensor(local, dtype=t.int32, device=cu_seqlens.device)
    return local


def shard(x, rank: int, world_size: int, *, layout: str = "zigzag", cu_seqlens=None, seq_dim: Optional[int] = None):
    """Rank `rank`'s shard of a whole tensor x (torch or NumPy; a copy).

    Dense: the sequence dimension is `seq_dim` (default 1: (batch, seq, heads, dim)).
    Ragged: pass the global `cu_seqlens`; tokens are along `seq_dim` (default 0:
    (total, heads, dim)). For an LSE pass seq_dim=-1 ((batch, heads, seq) or (heads, total)).
    zigzag: rank r holds chunks r and 2W-1-r of each sequence's 2W equal chunks;
    contiguous: chunk r of W."""
    _check_layout(layout, world_size)
    if not 0 <= rank < world_size:
        raise ValueError(f"rank: {rank}, expected 0 <= rank < {world_size}")
    dim = (0 if cu_seqlens is not None else 1) if seq_dim is None else seq_dim % x.ndim
    spans = [(0, x.shape[dim])] if cu_seqlens is None else list(zip(_ints(cu_seqlens)[:-1], _ints(cu_seqlens)[1:]))
    parts = []
    for i, (a, b) in enumerate(spans):
        c = _pieces(layout, world_size, b - a, "sequence" if cu_seqlens is None else f"cu_seqlens sequence {i}")
        for cid in P.chunk_ids(layout, rank, world_size):
            parts.append(_take(x, dim, a + cid * c, a + (cid + 1) * c))
    return _cat(parts, dim) if parts else _take(x, dim, 0, 0)


def unshard(shards: Sequence, *, layout: str = "zigzag", cu_seqlens=None, seq_dim: Optional[int] = None):
    """Inverse of `shard`: the whole tensor from the list of every rank's shard (rank order).
    cu_seqlens (ragged) is the global one."""
    world_size = len(shards)
    _check_layout(layout, world_size)
    x0 = shards[0]
    dim = (0 if cu_seqlens is not None else 1) if seq_dim is None else seq_dim % x0.ndim
    cpr = P.chunks_per_rank(layout)
    if cu_seqlens is None:
        local = [(0, x0.shape[dim])]
    else:
        local = [(a // world_size, b // world_size) for a, b in zip(_ints(cu_seqlens)[:-1], _ints(cu_seqlens)[1:])]
    parts = []
    for a, b in local:
        c = (b - a) // cpr
        where = {}
        for r in range(world_size):
            for slot, cid in enumerate(P.chunk_ids(layout, r, world_size)):
                where[cid] = (r, a + slot * c)
        for cid in range(cpr * world_size):
            r, s = where[cid]
            parts.append(_take(shards[r], dim, s, s + c))
    return _cat(parts, dim) if parts else _take(x0, dim, 0, 0)
