"""Who computes what in context parallelism: the sharded layouts' chunk positions and the
per-rank attention calls of each method. Pure Python (no torch): the plans are checked by
the tests without any process group.

Geometry. Every sequence of global length L is cut into `chunks_per_rank * W` equal chunks
of c tokens; rank r holds, in this order, the chunks `chunk_ids(layout, r, W)` (zigzag: r
and 2W-1-r, so causal work is balanced; contiguous: r). A rank's local sequence is its
chunks back to back (local length = L / W).

Masks are defined on global positions (self-attention: queries and keys share positions,
so bottom-right and top-left alignment agree globally). A key at global position gk is
visible to the query at gq iff A <= gk - gq <= B, with A = -window_left (or -inf) and
B = 0 under causal (FA3: causal ignores the right window), else window_right (or +inf).
The band is what longattn's one-call API can express on any (query range, key range)
pair once the ranges are trimmed to where the band is non-empty (see `block`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import List, Optional, Sequence, Tuple

INF = float("inf")

LAYOUTS = ("zigzag", "contiguous")
METHODS = ("all_gather_kv", "ring")


def chunks_per_rank(layout: str) -> int:
    return 2 if layout == "zigzag" else 1


def chunk_ids(layout: str, rank: int, world: int) -> Tuple[int, ...]:
    """Global chunk indices held by `rank`, in local order."""
    return (rank, 2 * world - 1 - rank) if layout == "zigzag" else (rank,)


@dataclass(frozen=True)
class Segment:
    """Sequences that share one global length: a dense batch (nb sequences) or one sequence
    of a ragged batch (nb = 1). Their local tokens are rows [tok0, tok0 + nb * local_len) of
    the packed (tokens, heads, dim) view of the local shard."""

    tok0: int
    nb: int
    local_len: int
    chunk: int  # c: local_len = chunks_per_rank * c


def segments(layout: str, world: int, dense_batch: Optional[int], local_lens: Sequence[int]) -> List[Segment]:
    """Segments of a shard: dense (dense_batch sequences of local_lens[0]) or ragged."""
    cpr = chunks_per_rank(layout)
    if dense_batch is not None:
        return [Segment(0, dense_batch, local_lens[0], local_lens[0] // cpr)]
    out, t = [], 0
    for n in local_lens:
        out.append(Segment(t, 1, n, n // cpr))
        t += n
    return out


def band(causal: bool, window: Tuple[int, int]) -> Tuple[float, float]:
    """(A, B): key gk is visible to query gq iff A <= gk - gq <= B."""
    wl, wr = window
    lo = -wl if wl >= 0 else -INF
    hi = 0 if causal else (wr if wr >= 0 else INF)
    return lo, hi


@dataclass(frozen=True)
class Mask:
    """longattn's mask for one call (local coordinates of the call's q and k ranges)."""

    causal: bool = False
    top_left: bool = False
    window: Tuple[int, int] = (-1, -1)

    @property
    def full(self) -> bool:
        return not self.causal and self.window == (-1, -1)


def express(nq: int, nk: int, a: float, b: float) -> Mask:
    """longattn mask for rows i < nq, keys j < nk visible iff a <= j - i <= b, given that every
    row sees at least one key and a <= 0 <= b + (nk - 1) (what `block` guarantees).

    Preference: no mask; bottom-right causal (the plain prefix / chunked-prefill case);
    top-left causal; otherwise top-left windows (left = -a, right = b). Windows take the
    causal flag's alignment, so bottom-right causal with a left window needs b - a."""
    left_free = a <= -(nq - 1)  # no row's lower bound reaches past key 0
    right_free = b >= nk - 1  # no row's upper bound cuts before the last key
    if left_free and right_free:
        return Mask()
    if right_free:
        return Mask(top_left=True, window=(int(-a), -1))
    if b == nk - nq:
        return Mask(causal=True, window=(-1 if left_free else int(b - a), -1))
    if b == 0:
        return Mask(causal=True, top_left=True, window=(-1 if left_free else int(-a), -1))
    return Mask(top_left=True, window=(-1 if left_free else int(-a), int(b)))


@dataclass(frozen=True)
class Block:
    """Visible part of (nq queries at global qs) x (nk keys at global ks): rows [i0, i1),
    keys [j0, j1) relative to the block, local band [a, b] of j - i after trimming."""

    i0: int
    i1: int
    j0: int
    j1: int
    a: float
    b: float

    @property
    def mask(self) -> Mask:
        return express(self.i1 - self.i0, self.j1 - self.j0, self.a, self.b)


def block(qs: int, nq: int, ks: int, nk: int, lo: float, hi: float) -> Optional[Block]:
    """Trim a (query range, key range) pair to the rows that see a key and the keys some row
    sees; None when nothing is visible. After trimming the band always has a <= 0 <= b, so
    longattn's top-left windows (both >= 0) can express it: no general offset is needed."""
    if nq <= 0 or nk <= 0:
        return None
    d = ks - qs
    a, b = lo - d, hi - d  # band of j - i in block coordinates
    if a > b or b < -(nq - 1) or a > nk - 1:
        return None
    i0 = int(max(0, -b))
    i1 = int(min(nq, nk - a))  # row i sees a key iff i + b >= 0 and i + a <= nk - 1
    j0 = int(max(0, i0 + a))
    j1 = int(min(nk, (i1 - 1) + b + 1))
    return Block(i0, i1, j0, j1, a + i0 - j0, b + i0 - j0)


@dataclass(frozen=True)
class Call:
    """One longattn.forward on a segment: query rows [q0, q1) of the local shard, key rows
    [k0, k1) of the key buffer (ring: the source rank's local shard; all_gather_kv: the
    sequence in global order). `slot` >= 0: the ring partial it writes; -1: the output."""

    seg: int
    q0: int
    q1: int
    k0: int
    k1: int
    mask: Mask
    sinks: bool
    slot: int = -1


def _merge_keys(nq: int, c: int, b0: Optional[Block], b1: Optional[Block]):
    """One call for a query chunk against two adjacent key chunks [0, c) and [c, 2c) of a
    buffer, when the union is one band: chunk 0 fully visible to every row and chunk 1 seen
    from its first key with no left bound (zigzag causal's diagonal step: keys of chunk r
    and the diagonal of chunk 2W-1-r). Returns (i0, i1, j0, j1, mask) or None."""
    if b0 is None or b1 is None:
        return None
    whole0 = (b0.i0, b0.i1, b0.j0, b0.j1) == (0, nq, 0, c) and b0.mask.full
    if not whole0 or (b1.i0, b1.i1, b1.j0) != (0, nq, 0) or b1.a > -(nq - 1):
        return None
    nk = c + b1.j1
    return (0, nq, 0, nk, express(nq, nk, -INF, c + b1.b))


def _chunk_calls(seg_i: int, seg: Segment, q_chunks, k_chunks, k_len: int, lo, hi, sinks_on_diag: bool):
    """Calls of one segment for query chunks (global ids, local order) against a key buffer
    whose chunks are k_chunks (global ids at local offsets k*c). k_len: rows of the key
    buffer (ring: local_len, all_gather_kv: the whole sequence, k_chunks = None)."""
    c = seg.chunk
    calls = []
    for qi, qc in enumerate(q_chunks):
        qs = qc * c
        if k_chunks is None:  # global key order: one block over the whole sequence
            blk = block(qs, c, 0, k_len, lo, hi)
            if blk is not None:
                calls.append(Call(seg_i, qi * c + blk.i0, qi * c + blk.i1, blk.j0, blk.j1, blk.mask, True))
            continue
        blks = [block(qs, c, kc * c, c, lo, hi) for kc in k_chunks]
        merged = _merge_keys(c, c, *blks) if len(blks) == 2 else None
        diag = [kc == qc for kc in k_chunks]
        if merged is not None:
            i0, i1, j0, j1, m = merged
            calls.append(Call(seg_i, qi * c + i0, qi * c + i1, j0, j1, m, sinks_on_diag and any(diag)))
            continue
        for ki, blk in enumerate(blks):
            if blk is not None:
                calls.append(Call(seg_i, qi * c + blk.i0, qi * c + blk.i1, ki * c + blk.j0, ki * c + blk.j1,
                                  blk.mask, sinks_on_diag and diag[ki]))
    return _merge_queries(calls, seg)


def _merge_queries(calls: List[Call], seg: Segment) -> List[Call]:
    """Two query chunks with the same unmasked key range become one call (non-causal steps,
    zigzag causal steps from lower ranks): fewer, larger kernels."""
    if len(calls) == 2:
        x, y = calls
        c = seg.chunk
        if ((x.q0, x.q1, y.q0, y.q1) == (0, c, c, 2 * c) and (x.k0, x.k1) == (y.k0, y.k1)
                and x.mask.full and y.mask.full and x.sinks == y.sinks):
            return [replace(x, q1=2 * c)]
    return calls


@lru_cache(maxsize=64)
def all_gather_calls(layout: str, rank: int, world: int, segs: Tuple[Segment, ...], causal: bool,
                     window: Tuple[int, int]) -> Tuple[Call, ...]:
    """all_gather_kv: each local query chunk against its sequence's keys in global order.
    Every row sees its own key, so no row is trimmed and each row has exactly one call: the
    calls write the output and LSE directly, sinks included."""
    lo, hi = band(causal, window)
    calls = []
    for si, seg in enumerate(segs):
        calls += _chunk_calls(si, seg, chunk_ids(layout, rank, world), None, world * seg.local_len, lo, hi, True)
    return tuple(calls)


@lru_cache(maxsize=64)
def ring_steps(layout: str, rank: int, world: int, segs: Tuple[Segment, ...], causal: bool,
               window: Tuple[int, int]) -> Tuple[Tuple[Tuple[Call, ...], ...], int]:
    """Ring: at step t a rank holds the K/V shard of rank (rank - t) mod W. Returns the calls
    of every step, each with a partial slot, and the number of slots. A row's calls get
    distinct slots, so `combine` over the slots merges them; (row, slot) pairs no call
    writes keep LSE -inf. Plans are cached (segs is a tuple: hashable). Sinks go to the call holding the row's own key (step 0): exactly
    one partial per row carries them, as the merge requires."""
    lo, hi = band(causal, window)
    qc = chunk_ids(layout, rank, world)
    cpr = chunks_per_rank(layout)
    used = {}  # (segment, query chunk) -> next free slot
    steps, nslots = [], 0
    for t in range(world):
        src = (rank - t) % world
        step = []
        for si, seg in enumerate(segs):
            for call in _chunk_calls(si, seg, qc, chunk_ids(layout, src, world), seg.local_len, lo, hi, True):
                touched = range(call.q0 // seg.chunk, min(cpr, -(-call.q1 // seg.chunk)))
                slot = max(used.get((si, q), 0) for q in touched)
                for q in touched:
                    used[(si, q)] = slot + 1
                nslots = max(nslots, slot + 1)
                step.append(replace(call, slot=slot))
        steps.append(tuple(step))
    return tuple(steps), nslots
