"""One rank's work for each method, over an exchange object (`TorchComm` for real process
groups, `simulate.SimComm` for W ranks in one process). Every attention call is a dense
longattn.forward on strided views of the shard (segments, _plan.py); ragged batches are
one segment per sequence.

Overlap. Exchanges are started asynchronously before the compute that does not need them:
with NCCL, torch runs every collective and p2p on the process group's own CUDA stream, and
`wait()` only makes the caller's current stream wait for it, so the kernels enqueued on
the current stream meanwhile overlap the transfer; no host synchronisation. With gloo the
transfer runs on gloo's threads while longattn computes with the GIL released.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from .. import _core
from . import _plan as P


def _torch():
    return sys.modules["torch"]


@dataclass
class RankProblem:
    """Everything one rank needs, after the ranks agreed (see _api.py)."""

    layout: str
    world: int
    rank: int
    segs: List[P.Segment]
    ragged: bool
    causal: bool
    window: Tuple[int, int]
    softcap: float
    softmax_scale: float
    sinks: Optional[object]
    return_lse: bool
    backend: str = "auto"
    num_threads: int = 0
    sm_margin: int = 0  # Args::sm_margin of every call (SMs left to the exchange's kernels)
    kv_groups: int = 1
    descales: Optional[Tuple[object, object, object]] = None  # fp8: q, k, v descales (sequences, heads_kv)

    @property
    def tokens(self) -> int:
        return sum(s.nb * s.local_len for s in self.segs)


# ----------------------------------------------------------------------------- views


def q_view(x, p: RankProblem, seg: P.Segment, r0: int, r1: int, heads=slice(None)):
    """Rows [r0, r1) of a segment of q / out: dense (b, s, h, d) or ragged (T, h, d)."""
    if p.ragged:
        return x[seg.tok0 + r0 : seg.tok0 + r1, heads].unsqueeze(0)
    return x[:, r0:r1, heads]


def lse_view(x, p: RankProblem, seg: P.Segment, r0: int, r1: int, heads=slice(None)):
    """Same rows of the LSE: dense (b, h, s) or ragged (h, T)."""
    if p.ragged:
        return x[heads, seg.tok0 + r0 : seg.tok0 + r1].unsqueeze(0)
    return x[:, heads, r0:r1]


def packed_rows(x, seg: P.Segment, length: int, scale: int, r0: int, r1: int):
    """Rows [r0, r1) of a segment in a packed (tokens, heads, dim) buffer whose sequences are
    `length` rows long and start at `scale` * tok0 (1: local shard, W: global order)."""
    t0 = scale * seg.tok0
    return x[t0 : t0 + seg.nb * length].view(seg.nb, length, *x.shape[1:])[:, r0:r1]


def partial_views(p_out, p_lse, seg: P.Segment, slot: int, r0: int, r1: int):
    """Ring partials: out (slots, T, h, dv) and LSE (slots, h, T), T in packed token order."""
    t0, n = seg.tok0, seg.nb * seg.local_len
    o = p_out[slot, t0 : t0 + n].view(seg.nb, seg.local_len, *p_out.shape[2:])[:, r0:r1]
    l = p_lse[slot, :, t0 : t0 + n].view(p_lse.shape[1], seg.nb, seg.local_len).permute(1, 0, 2)[:, :, r0:r1]
    return o, l


def packed(x, p: RankProblem):
    """The shard as (tokens, heads, dim) (a view for contiguous dense inputs)."""
    return x if p.ragged else x.reshape(-1, *x.shape[2:])


def pack_kv(kp, vp, h0: int, h1: int):
    """K then V of kv heads [h0, h1), flattened into one uint8 message."""
    t = _torch()
    return t.cat([kp[:, h0:h1].reshape(-1), vp[:, h0:h1].reshape(-1)]).view(t.uint8)


def unpack_kv(flat, ranks: int, tokens: int, heads: int, dim: int, dim_v: int, dtype):
    """Inverse of pack_kv for `ranks` messages back to back: K, V as (ranks, tokens, heads, dim)."""
    e = flat.view(dtype).view(ranks, -1)
    nk = tokens * heads * dim
    k = e[:, :nk].unflatten(1, (tokens, heads, dim))
    v = e[:, nk:].unflatten(1, (tokens, heads, dim_v))
    return k, v


def call_descales(p: RankProblem, si: int, kv_heads=slice(None)):
    """fp8: the q, k, v descales of a call on segment si's sequences (a dense segment: the whole
    batch; a ragged one: its sequence), kv heads `kv_heads`; {} for 16-bit inputs."""
    if p.descales is None:
        return {}
    rows = slice(si, si + 1) if p.ragged else slice(None)
    qd, kd, vd = (d[rows, kv_heads] for d in p.descales)
    return dict(q_descale=qd, k_descale=kd, v_descale=vd)


def _call(p: RankProblem, c: P.Call, q, k, v, out, lse, sinks, descales):
    m = c.mask
    _core.forward(
        q, k, v, out=out, lse=lse, causal=m.causal, top_left=m.top_left, window_size=m.window,
        softcap=p.softcap, softmax_scale=p.softmax_scale, sinks=sinks if c.sinks else None,
        backend=p.backend, num_threads=p.num_threads, sm_margin=p.sm_margin, **descales,
    )


class _Guard:
    """Waits for an exchange still in flight when compute raises, so every rank leaves the
    collective sequence in step (the ranks agreed on the shapes, so they raise alike)."""

    def __init__(self):
        self.pending = None

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        if et is not None and self.pending is not None:
            try:
                self.pending.wait()
            except Exception:  # the original error is the one to report
                pass
        return False


# ----------------------------------------------------------------------------- all_gather_kv

_PERM_CACHE = {}


def global_order(p: RankProblem, device):
    """(rank, local token) of every global token, for reordering gathered shards into
    sequence order (cached per geometry and device)."""
    t = _torch()
    key = (p.layout, p.world, tuple(p.segs), str(device))
    hit = _PERM_CACHE.get(key)
    if hit is not None:
        return hit
    import numpy as np

    n = p.world * p.tokens
    ranks = np.empty(n, dtype=np.int64)
    toks = np.empty(n, dtype=np.int64)
    for seg in p.segs:
        c, lg = seg.chunk, p.world * seg.local_len
        for b in range(seg.nb):
            g0 = p.world * seg.tok0 + b * lg
            l0 = seg.tok0 + b * seg.local_len
            for w in range(p.world):
                for slot, cid in enumerate(P.chunk_ids(p.layout, w, p.world)):
                    dst = slice(g0 + cid * c, g0 + (cid + 1) * c)
                    ranks[dst] = w
                    toks[dst] = np.arange(l0 + slot * c, l0 + (slot + 1) * c)
    if len(_PERM_CACHE) > 16:
        _PERM_CACHE.clear()
    hit = (t.from_numpy(ranks).to(device), t.from_numpy(toks).to(device))
    _PERM_CACHE[key] = hit
    return hit


# Block copies per reorder above which the index gather (one kernel whatever the count) is
# used instead: many short sequences would pay a launch per block.
MAX_REORDER_COPIES = 64


def reorder_copies(p: RankProblem):
    """The gathered shards' reorder into sequence order as block copies (segment, row within
    a sequence, first source rank, row within a sequence's shard, ranks): every sequence of a
    segment in one copy, and ranks whose chunks follow each other in one copy. None past
    MAX_REORDER_COPIES copies."""
    out = []
    for seg in p.segs:
        c = seg.chunk
        per_slot = []
        for w in range(p.world):
            for slot, cid in enumerate(P.chunk_ids(p.layout, w, p.world)):
                per_slot.append((slot, w, cid))
        per_slot.sort()
        runs = []  # [slot, first rank, first chunk, ranks]
        for slot, w, cid in per_slot:
            last = runs[-1] if runs else None
            if last and last[0] == slot and w == last[1] + last[3] and cid == last[2] + last[3]:
                last[3] += 1
            else:
                runs.append([slot, w, cid, 1])
        for slot, w, cid, n in runs:
            out.append((seg, cid * c, w, slot * c, n))
    return out if len(out) <= MAX_REORDER_COPIES else None


def to_sequence_order(x, p: RankProblem, copies, index):
    """Gathered shards x (W, T, h, d), rows of h x d contiguous -> (W * T, h, d) in sequence
    order: strided block copies (each a copy kernel at memory speed; views by as_strided, few
    host operations per copy), else one index gather (`index`: global_order's, or None)."""
    inner = 1
    for i in range(x.dim() - 1, 1, -1):
        copies = copies if x.stride(i) == inner else None
        inner *= x.shape[i]
    if copies is None:
        return x[index if index is not None else global_order(p, x.device)]
    t = _torch()
    world, tokens = x.shape[0], x.shape[1]
    y = t.empty((world * tokens,) + tuple(x.shape[2:]), dtype=x.dtype, device=x.device)
    row = x.shape[2:].numel()
    xs0, xs1, x0 = x.stride(0), x.stride(1), x.storage_offset()
    for seg, dst0, w, off, n in copies:
        nb, ll, c = seg.nb, seg.local_len, seg.chunk
        if nb == 0 or c == 0:
            continue
        size = (nb, n, c, row)
        # Source: ranks w..w+n-1, rows off..off+c of each of the nb sequences' shards (ll rows
        # apart); destination: n chunks in a row from row dst0 of each sequence (W ll apart).
        src = x.as_strided(size, (ll * xs1, xs0, xs1, 1), x0 + w * xs0 + (seg.tok0 + off) * xs1)
        dst = y.as_strided(size, (world * ll * row, c * row, row, 1), (world * seg.tok0 + dst0) * row)
        dst.copy_(src)
    return y


def zigzag_native(p: RankProblem) -> bool:
    """Whether the zigzag shards can attend to the gathered K/V in place (longattn.h
    Args::cp_world: the kernel reads the rank-major buffer at global positions; one call per
    sequence, no reorder). Windows keep the reorder and the per-chunk calls."""
    return p.layout == "zigzag" and p.window == (-1, -1) and p.world > 0


def _native_call(p: RankProblem, seg: P.Segment, si: int, b: int, q, kw, vw, out, lse, qh, kh, sinks):
    """Sequence b of segment si over the gathered shards kw / vw (W, T, h, d) in place. A
    dense batch takes one call per sequence (the cp_world call is batch 1), where the reorder
    path took one per chunk for the whole batch: context parallelism is for long sequences."""
    n = 2 * seg.chunk
    if p.ragged:
        r0 = seg.tok0
        qv, ov = q[r0 : r0 + n, qh].unsqueeze(0), out[r0 : r0 + n, qh].unsqueeze(0)
        lv = lse[qh, r0 : r0 + n].unsqueeze(0) if lse is not None else None
    else:
        r0 = seg.tok0 + b * n
        qv, ov = q[b : b + 1, :, qh], out[b : b + 1, :, qh]
        lv = lse[b : b + 1, qh] if lse is not None else None
    descales = {}
    if p.descales is not None:
        rows = slice(si, si + 1) if p.ragged else slice(b, b + 1)
        qd, kd, vd = (d[rows, kh] for d in p.descales)
        descales = dict(q_descale=qd, k_descale=kd, v_descale=vd)
    _core.forward(
        qv, kw[:, r0 : r0 + n], vw[:, r0 : r0 + n], out=ov, lse=lv, causal=p.causal,
        softcap=p.softcap, softmax_scale=p.softmax_scale, sinks=sinks, backend=p.backend,
        num_threads=p.num_threads, sm_margin=p.sm_margin, cp_world=p.world, cp_rank=p.rank, **descales,
    )


def run_all_gather_kv(p: RankProblem, comm, q, k, v, out, lse):
    """Pass-KV all-gather (Llama-3 style): gather K/V of one group of kv heads at a time
    (the next group's gather overlaps this group's compute), and let each local query chunk
    attend to the keys it may see. The zigzag layout without windows reads the gathered
    shards in place, one call per sequence (zigzag_native; where a backend refuses that call,
    e.g. a chunk that is not a multiple of the CUDA kernel's tiles, that segment falls back);
    otherwise the shards are reordered into sequence order and each chunk is one call. The
    calls write `out` and `lse` directly, no combine."""
    hq, hk = q.shape[-2], k.shape[-2]
    groups = p.kv_groups
    hkg, hqg = hk // groups, hq // groups
    kp, vp = packed(k, p), packed(v, p)
    dim, dim_v = k.shape[-1], v.shape[-1]
    calls = P.all_gather_calls(p.layout, p.rank, p.world, tuple(p.segs), p.causal, p.window)
    native, refused = zigzag_native(p), set()
    copies = reorder_copies(p)
    index = None if copies is not None or native else global_order(p, q.device)
    with _Guard() as guard:
        guard.pending = comm.all_gather_start(pack_kv(kp, vp, 0, hkg), (0, hkg))
        for g in range(groups):
            flat = guard.pending.wait()
            guard.pending = None
            if g + 1 < groups:
                h0 = (g + 1) * hkg
                guard.pending = comm.all_gather_start(pack_kv(kp, vp, h0, h0 + hkg), (h0, h0 + hkg))
            kw, vw = unpack_kv(flat, p.world, p.tokens, hkg, dim, dim_v, k.dtype)
            qh, kh = slice(g * hqg, (g + 1) * hqg), slice(g * hkg, (g + 1) * hkg)
            sinks = p.sinks[qh] if p.sinks is not None else None
            fallback = set(range(len(p.segs)))
            if native:
                for si, seg in enumerate(p.segs):
                    if seg.chunk == 0:  # an empty sequence: no call either way
                        fallback.discard(si)
                        continue
                    if si in refused:
                        continue
                    try:
                        for b in range(seg.nb):
                            _native_call(p, seg, si, b, q, kw, vw, out, lse, qh, kh, sinks)
                    except NotImplementedError:
                        # A refusal comes before its call writes anything (validation, plan);
                        # the segment's per-chunk calls below rewrite every row of it.
                        refused.add(si)
                        continue
                    fallback.discard(si)
            if not fallback:
                continue
            kg, vg = to_sequence_order(kw, p, copies, index), to_sequence_order(vw, p, copies, index)
            for c in calls:
                if c.seg not in fallback:
                    continue
                seg = p.segs[c.seg]
                lg = p.world * seg.local_len
                _call(
                    p, c,
                    q_view(q, p, seg, c.q0, c.q1, qh),
                    packed_rows(kg, seg, lg, p.world, c.k0, c.k1),
                    packed_rows(vg, seg, lg, p.world, c.k0, c.k1),
                    q_view(out, p, seg, c.q0, c.q1, qh),
                    lse_view(lse, p, seg, c.q0, c.q1, qh) if lse is not None else None,
                    sinks, call_descales(p, c.seg, kh),
                )


# ----------------------------------------------------------------------------- ring


def run_ring(p: RankProblem, comm, q, k, v, out, lse):
    """Pass-KV ring: W steps; at step t the K/V shard of rank (rank - t) mod W is here while
    the next one is in flight (two receive buffers). Each step's calls write float32
    partials with their LSE into their slots; one `combine` merges the slots at the end."""
    t = _torch()
    steps, nslots = P.ring_steps(p.layout, p.rank, p.world, tuple(p.segs), p.causal, p.window)
    hq, hk = q.shape[-2], k.shape[-2]
    dim, dim_v = k.shape[-1], v.shape[-1]
    tokens = p.tokens
    p_out = t.empty((nslots, tokens, hq, dim_v), dtype=t.float32, device=q.device)
    p_lse = t.full((nslots, hq, tokens), float("-inf"), dtype=t.float32, device=q.device)
    cur = pack_kv(packed(k, p), packed(v, p), 0, hk)
    bufs = [t.empty_like(cur) for _ in range(min(2, p.world - 1))]  # W = 2 receives once
    with _Guard() as guard:
        for step, calls in enumerate(steps):
            if step + 1 < p.world:
                guard.pending = comm.ring_start(step, cur, bufs[step % len(bufs)])
            kw, vw = unpack_kv(cur, 1, tokens, hk, dim, dim_v, k.dtype)
            kb, vb = kw[0], vw[0]
            for c in calls:
                seg = p.segs[c.seg]
                o, l = partial_views(p_out, p_lse, seg, c.slot, c.q0, c.q1)
                _call(
                    p, c, q_view(q, p, seg, c.q0, c.q1),
                    packed_rows(kb, seg, seg.local_len, 1, c.k0, c.k1),
                    packed_rows(vb, seg, seg.local_len, 1, c.k0, c.k1),
                    o, l, p.sinks, call_descales(p, c.seg),
                )
            if guard.pending is not None:
                cur = guard.pending.wait()
                guard.pending = None
    # `out` (and a ragged `lse`) are ours, contiguous: the packed views alias them.
    out_flat = packed(out, p)
    if lse is None:
        _core.combine(p_out, p_lse, out=out_flat, backend=p.backend)
    elif p.ragged:
        _core.combine(p_out, p_lse, out=out_flat, lse=lse, backend=p.backend)
    else:
        lse_flat = t.empty((hq, tokens), dtype=t.float32, device=q.device)
        _core.combine(p_out, p_lse, out=out_flat, lse=lse_flat, backend=p.backend)
        lse.copy_(lse_flat.view(hq, out.shape[0], out.shape[1]).permute(1, 0, 2))


METHOD_RUNNERS = {"all_gather_kv": run_all_gather_kv, "ring": run_ring}


# ----------------------------------------------------------------------------- real exchange


class _Pending:
    def __init__(self, works, result):
        self.works, self.result = works, result

    def wait(self):
        for w in self.works:
            w.wait()
        return self.result


class TorchComm:
    """Exchanges over a torch.distributed process group (NCCL, gloo, ...)."""

    def __init__(self, group):
        import torch.distributed as dist

        self.dist = dist
        self.group = group
        self.rank = dist.get_rank(group)
        self.world = dist.get_world_size(group)
        glob = (lambda r: r) if group is None else (lambda r: dist.get_global_rank(group, r))
        self.next = glob((self.rank + 1) % self.world)
        self.prev = glob((self.rank - 1) % self.world)

    def all_gather_start(self, flat, tag=None):
        t = _torch()
        out = t.empty(self.world * flat.numel(), dtype=flat.dtype, device=flat.device)
        work = self.dist.all_gather_into_tensor(out, flat, group=self.group, async_op=True)
        return _Pending([work], out)

    def ring_start(self, step, send, recv):
        d = self.dist
        ops = [d.P2POp(d.isend, send, self.next, self.group), d.P2POp(d.irecv, recv, self.prev, self.group)]
        return _Pending(d.batch_isend_irecv(ops), recv)
