"""W context-parallel ranks in one process, without a process group: each rank runs the
real per-rank code (_exec.py) with an exchange that hands it what the other ranks would
have sent. Validates the schedules on one device (tests/gpu/cp_one_gpu.py, and the CPU
tests) and times per-rank work without communication."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

from . import _exec as E
from ._api import _check, _descales, alloc_outputs, rank_problem
from ._shard import local_cu_seqlens, shard


class _Done:
    def __init__(self, result):
        self.result = result

    def wait(self):
        return self.result


class SimComm:
    """What rank `rank` receives: the all-gather of a kv-head range or the ring's next shard,
    built from every rank's packed K/V (cached in `cache`, shared by the ranks, so timed
    runs after a warm-up do no extra work)."""

    def __init__(self, rank: int, world: int, kps: Sequence, vps: Sequence, cache: Dict):
        self.rank, self.world, self.kps, self.vps, self.cache = rank, world, kps, vps, cache

    def _pack(self, src: int, h0: int, h1: int):
        key = (src, h0, h1)
        if key not in self.cache:
            self.cache[key] = E.pack_kv(self.kps[src], self.vps[src], h0, h1)
        return self.cache[key]

    def all_gather_start(self, flat, tag):
        h0, h1 = tag
        key = ("all", h0, h1)
        if key not in self.cache:
            t = __import__("torch")
            self.cache[key] = t.cat([self._pack(w, h0, h1) for w in range(self.world)])
        return _Done(self.cache[key])

    def ring_start(self, step, send, recv):
        return _Done(self._pack((self.rank - step - 1) % self.world, 0, self.kps[0].shape[1]))


class Simulation:
    """Shards whole q/k/v (dense (batch, seq, h, d), or ragged with the global cu_seqlens)
    over `world` ranks; run_rank(r) returns rank r's (out, lse)."""

    def __init__(self, q, k, v, world: int, *, method: str, layout: str = "zigzag", causal: bool = False,
                 cu_seqlens=None, window_size=(-1, -1), softcap: float = 0.0, sinks=None,
                 softmax_scale: Optional[float] = None, kv_groups: Optional[int] = None, return_lse: bool = True,
                 backend: str = "auto", num_threads: int = 0, q_descale=None, k_descale=None, v_descale=None):
        self.world, self.method = world, method
        sh = dict(layout=layout, cu_seqlens=cu_seqlens)
        self.qs = [shard(q, r, world, **sh) for r in range(world)]
        self.ks = [shard(k, r, world, **sh) for r in range(world)]
        self.vs = [shard(v, r, world, **sh) for r in range(world)]
        self.cu = None if cu_seqlens is None else [int(x) for x in local_cu_seqlens(cu_seqlens, world, layout)]
        window = (int(window_size[0]), -1 if causal else int(window_size[1]))
        descales = _descales(q, k, cu_seqlens, q_descale, k_descale, v_descale)
        lens = _check(self.qs[0], self.ks[0], self.vs[0], sinks, self.cu, causal=causal, window=window,
                      layout=layout, method=method, kv_groups=kv_groups, world=world, descales=descales)
        self.probs = [
            rank_problem(self.qs[r], self.ks[r], self.vs[r], layout, world, r, self.cu, lens, causal=causal,
                         window=window, softcap=softcap, softmax_scale=softmax_scale, sinks=sinks,
                         return_lse=return_lse, backend=backend, num_threads=num_threads, kv_groups=kv_groups,
                         descales=descales)
            for r in range(world)
        ]
        p0 = self.probs[0]
        self.kps = [E.packed(x, p0) for x in self.ks]
        self.vps = [E.packed(x, p0) for x in self.vs]
        self.cache: Dict = {}
        self.return_lse = return_lse

    def run_rank(self, r: int):
        out, lse = alloc_outputs(self.qs[r], self.vs[r], self.cu, self.return_lse)
        comm = SimComm(r, self.world, self.kps, self.vps, self.cache)
        E.METHOD_RUNNERS[self.method](self.probs[r], comm, self.qs[r], self.ks[r], self.vs[r], out, lse)
        return out, lse

    def run(self) -> List:
        return [self.run_rank(r) for r in range(self.world)]
