"""The cheap agreement step before any collective that could hang: every rank describes its
arguments as a fixed-length int64 vector, one all_gather exchanges them, and every rank
derives the same verdict from the same table. A mismatch (a shard of another length, other
heads, another dtype, other options) raises the same ValueError on every rank instead of a
hang or a garbled exchange later.
"""

from __future__ import annotations

import struct
import sys
from typing import List, Optional, Sequence, Tuple

_MAGIC = 0x4C41_4351  # "LACQ" (v2: descales): a rank running another version of this protocol shows up
_DTYPES = ("float32", "float16", "bfloat16", "float8_e4m3fn", "float64", "int32", "int64", "int8", "uint8")


def _torch():
    return sys.modules["torch"]


def dtype_code(x) -> int:
    t = _torch()
    if not isinstance(x, t.Tensor):
        return 0
    name = str(x.dtype).replace("torch.", "")
    return 1 + _DTYPES.index(name) if name in _DTYPES else 99


def dtype_label(code: int) -> str:
    if code == 0:
        return "not a tensor"
    return _DTYPES[code - 1] if 1 <= code <= len(_DTYPES) else "unsupported dtype"


def _shape(x) -> Tuple[int, ...]:
    """(ndim, 4 extents) with ndim -1 for a non-tensor."""
    t = _torch()
    if not isinstance(x, t.Tensor) or x.dim() > 4:
        return (-1 if not isinstance(x, t.Tensor) else x.dim(), 0, 0, 0, 0)
    s = list(x.shape) + [0] * (4 - x.dim())
    return (x.dim(), *s)


def _float_bits(x: Optional[float]) -> int:
    if x is None:
        return -1
    return struct.unpack("<q", struct.pack("<d", float(x)))[0]


def _bits_float(b: int) -> Optional[float]:
    return None if b == -1 else struct.unpack("<d", struct.pack("<q", b))[0]


def _cu_digest(cu: Optional[Sequence[int]]) -> Tuple[int, int, int]:
    """(entries, last, position-weighted sum mod 2^61): equal lists agree, and a shard with
    other sequence lengths almost surely differs in one of the three."""
    if cu is None:
        return (-1, 0, 0)
    h = 0
    for i, x in enumerate(cu):
        h = (h + (i + 1) * (int(x) + 1) * 0x9E3779B1) % (1 << 61)
    return (len(cu), int(cu[-1]) if len(cu) else 0, h)


# (label, width) of each compared field, in the order mismatches are reported.
FIELDS = (
    ("protocol", 1),
    ("cu_seqlens readable", 1),
    ("q shape", 5),
    ("k shape", 5),
    ("v shape", 5),
    ("q/k/v dtypes", 3),
    ("device type", 1),
    ("cu_seqlens", 3),
    ("sinks shape", 5),
    ("q_descale shape", 5),
    ("k_descale shape", 5),
    ("v_descale shape", 5),
    ("causal", 1),
    ("window_size", 2),
    ("softcap", 1),
    ("softmax_scale", 1),
    ("layout", 1),
    ("method", 1),
    ("kv_groups", 1),
    ("return_lse", 1),
)
_NOT_COMPARED = 1  # trailing: free device memory (min over ranks feeds the default rule)


def describe(q, k, v, sinks, cu, cu_ok, *, causal, window, softcap, softmax_scale, layout_code, method_code,
             kv_groups, return_lse, free_bytes, descales=None) -> List[int]:
    t = _torch()
    dev = q.device.type if isinstance(q, t.Tensor) else "none"
    vals = [
        (_MAGIC,),
        (int(bool(cu_ok)),),
        _shape(q),
        _shape(k),
        _shape(v),
        (dtype_code(q), dtype_code(k), dtype_code(v)),
        ({"cpu": 1, "cuda": 2}.get(dev, 3),),
        _cu_digest(cu),
        _shape(sinks) if sinks is not None else (-2, 0, 0, 0, 0),
        *((_shape(d) if d is not None else (-2, 0, 0, 0, 0)) for d in (descales or (None, None, None))),
        (int(bool(causal)),),
        (int(window[0]), int(window[1])),
        (_float_bits(softcap),),
        (_float_bits(softmax_scale),),
        (layout_code,),
        (method_code,),
        (-1 if kv_groups is None else int(kv_groups),),
        (int(bool(return_lse)),),
    ]
    flat = [int(x) for f in vals for x in f]
    return flat + [int(free_bytes)]


def _fmt(label: str, vals: Sequence[int]) -> str:
    if label.endswith("shape"):
        if vals[0] == -2:
            return "none"
        if vals[0] == -1:
            return "not a tensor"
        return "(" + ", ".join(str(x) for x in vals[1 : 1 + vals[0]]) + ")" if vals[0] <= 4 else f"rank {vals[0]}"
    if label == "q/k/v dtypes":
        return "/".join(dtype_label(c) for c in vals)
    if label == "cu_seqlens readable":
        return "yes" if vals[0] else "no (not a 1-D integer array)"
    if label == "device type":
        return {1: "cpu", 2: "cuda"}.get(vals[0], "other")
    if label == "cu_seqlens":
        if vals[0] == -1:
            return "none (dense)"
        return f"{vals[0]} entries ending at {vals[1]} (digest {vals[2]:#x})"
    if label in ("causal", "return_lse"):
        return str(bool(vals[0]))
    if label in ("layout", "method"):
        from ._plan import LAYOUTS, METHODS

        names = LAYOUTS if label == "layout" else METHODS
        return "default" if vals[0] == -1 else (repr(names[vals[0]]) if 0 <= vals[0] < len(names) else "unknown")
    if label == "kv_groups":
        return "default" if vals[0] == -1 else str(vals[0])
    if label in ("softcap", "softmax_scale"):
        x = _bits_float(vals[0])
        return "default" if x is None else repr(x)
    return str(tuple(vals) if len(vals) > 1 else vals[0])


def verdict(table: Sequence[Sequence[int]]) -> Tuple[Optional[str], int]:
    """(error message or None, min free bytes over ranks). Same inputs, same answer on every
    rank: the first field (in FIELDS order) where some rank differs from rank 0, naming the
    lowest such rank."""
    off = 0
    for label, width in FIELDS:
        ref = list(table[0][off : off + width])
        for r in range(1, len(table)):
            got = list(table[r][off : off + width])
            if got != ref:
                return (
                    f"context_parallel_attn: ranks disagree on {label}: rank 0 has {_fmt(label, ref)}, "
                    f"rank {r} has {_fmt(label, got)} (every rank must pass its shard of one problem "
                    f"with the same options)",
                    0,
                )
        off += width
    return None, min(int(row[off]) for row in table)


def exchange(desc: List[int], group, device) -> List[List[int]]:
    """One all_gather of the descriptors (on `device`: CUDA for NCCL, CPU for gloo)."""
    t = _torch()
    import torch.distributed as dist

    world = dist.get_world_size(group)
    mine = t.tensor(desc, dtype=t.int64, device=device)
    out = t.empty(world * len(desc), dtype=t.int64, device=device)
    dist.all_gather_into_tensor(out, mine, group=group)
    rows = out.view(world, len(desc)).cpu().tolist()
    return rows
