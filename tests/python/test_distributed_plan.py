"""Context parallelism without torch: the planner (longattn.distributed._plan), the shard
helpers and the cost model. For every rank, layout, method and mask the calls cover exactly
the visible (query, key) pairs of the global problem, each once; a row's ring partials use
distinct slots; each row gets the sinks exactly once."""

import itertools

import numpy as np
import pytest

from longattn.distributed import _plan as P
from longattn.distributed import cost_model as CM
from longattn.distributed._shard import local_cu_seqlens, shard, unshard

from reference import visible


# ------------------------------------------------------------------ planner (pure Python)


def _call_pairs(call, nq_off, nk_map, mask_len):
    """Global (query, key) pairs a call computes: longattn's mask on the call's ranges."""
    nq, nk = call.q1 - call.q0, call.k1 - call.k0
    m = call.mask
    vis = visible(nq, nk, causal=m.causal, top_left=m.top_left, window=m.window)
    qi, kj = np.nonzero(vis)
    return set(zip((nq_off(call.q0 + qi)).tolist(), (nk_map(call.k0 + kj)).tolist()))


def _global_of_local(layout, rank, world, c):
    ids = np.array(P.chunk_ids(layout, rank, world))
    return lambda i: ids[i // c] * c + i % c


@pytest.mark.parametrize("layout", P.LAYOUTS)
@pytest.mark.parametrize("world", [1, 2, 3, 4, 5])
def test_plan_covers_each_visible_pair_once(layout, world):
    c = 4
    L = P.chunks_per_rank(layout) * world * c
    for causal, window in itertools.product([False, True], [(-1, -1), (0, 0), (3, -1), (2, 5), (-1, 1), (9, 0), (0, 6)]):
        want = visible(L, L, causal=causal, window=(window[0], -1) if causal else window)
        w_eff = (window[0], -1) if causal else window
        for rank in range(world):
            segs = tuple(P.segments(layout, world, 1, [L // world]))
            g = _global_of_local(layout, rank, world, c)
            rows = set(g(np.arange(L // world)).tolist())
            expect = {(i, j) for i in rows for j in range(L) if want[i, j]}
            # all_gather_kv: keys in global order, one call per row, sinks on every call
            calls = P.all_gather_calls(layout, rank, world, segs, causal, w_eff)
            got, per_row = set(), {}
            for call in calls:
                pairs = _call_pairs(call, g, lambda j: j, L)
                assert not (pairs & got), "a pair computed twice"
                got |= pairs
                for i in range(call.q0, call.q1):
                    per_row[i] = per_row.get(i, 0) + 1
                assert call.sinks
            assert got == expect, (layout, world, rank, causal, window)
            assert all(n == 1 for n in per_row.values()) and len(per_row) == L // world
            # ring: source shards in local order, distinct slots per row, sinks once per row
            steps, nslots = P.ring_steps(layout, rank, world, segs, causal, w_eff)
            got, slots, sinks = set(), {}, {}
            for t, step in enumerate(steps):
                gs = _global_of_local(layout, (rank - t) % world, world, c)
                for call in step:
                    pairs = _call_pairs(call, g, gs, L)
                    assert not (pairs & got)
                    got |= pairs
                    for i in range(call.q0, call.q1):
                        assert call.slot not in slots.setdefault(i, set())
                        slots[i].add(call.slot)
                        sinks[i] = sinks.get(i, 0) + call.sinks
                    assert 0 <= call.slot < nslots
            assert got == expect
            assert all(sinks.get(i, 0) == 1 for i in range(L // world))


def test_plan_zigzag_causal_is_balanced_and_unmasked():
    """Zigzag causal without a window: every rank computes the same number of pairs, and
    every call is either unmasked or a plain bottom-right causal (the fast kernel paths)."""
    world, c = 4, 8
    seg = tuple(P.segments("zigzag", world, 1, [2 * c]))
    for method in ("all_gather_kv", "ring"):
        work = []
        for rank in range(world):
            if method == "ring":
                calls = [x for s in P.ring_steps("zigzag", rank, world, seg, True, (-1, -1))[0] for x in s]
            else:
                calls = P.all_gather_calls("zigzag", rank, world, seg, True, (-1, -1))
            n = 0
            for call in calls:
                m = call.mask
                assert m.full or (m.causal and not m.top_left and m.window == (-1, -1)), call
                nq, nk = call.q1 - call.q0, call.k1 - call.k0
                n += int(visible(nq, nk, causal=m.causal).sum())
            work.append(n)
        assert len(set(work)) == 1, (method, work)


def test_block_expresses_offsets_with_trimming():
    # Keys entirely after the queries: nothing visible under causal.
    assert P.block(0, 4, 4, 4, -P.INF, 0) is None
    # Keys long before the queries under a window: nothing visible either.
    assert P.block(100, 4, 0, 4, -3, 0) is None
    # A partial key range with a global causal offset 2 (query i sees keys j <= i + 2).
    b = P.block(10, 4, 8, 8, -P.INF, 0)
    assert (b.i0, b.i1, b.j0, b.j1) == (0, 4, 0, 6) and b.mask == P.Mask(causal=True)
    # Offset -2 (keys start 2 after the queries): the first two rows see nothing and go.
    b = P.block(8, 4, 10, 8, -P.INF, 0)
    assert (b.i0, b.i1, b.j0, b.j1) == (2, 4, 0, 2) and b.mask == P.Mask(causal=True)


# ------------------------------------------------------------------ shard helpers


@pytest.mark.parametrize("layout", P.LAYOUTS)
def test_shard_roundtrip(layout):
    world = 3
    n = P.chunks_per_rank(layout) * world
    x = np.arange(2 * 4 * n * 5).reshape(2, 4 * n, 5)
    parts = [shard(x, r, world, layout=layout) for r in range(world)]
    assert all(p.shape == (2, 4 * n // world, 5) for p in parts)
    np.testing.assert_array_equal(unshard(parts, layout=layout), x)
    if layout == "zigzag":  # rank 0 holds chunks 0 and 5 of the 6
        np.testing.assert_array_equal(parts[0][0, :, 0], np.r_[x[0, 0:4, 0], x[0, 20:24, 0]])
    cu = [0, 2 * n, 2 * n, 5 * n]
    y = np.arange(5 * n * 2).reshape(5 * n, 2)
    parts = [shard(y, r, world, layout=layout, cu_seqlens=cu) for r in range(world)]
    assert local_cu_seqlens(cu, world, layout) == [v // world for v in cu]
    np.testing.assert_array_equal(unshard(parts, layout=layout, cu_seqlens=cu), y)
    lse = np.arange(3 * 5 * n).reshape(3, 5 * n)  # (heads, tokens): seq_dim=-1
    parts = [shard(lse, r, world, layout=layout, cu_seqlens=cu, seq_dim=-1) for r in range(world)]
    np.testing.assert_array_equal(unshard(parts, layout=layout, cu_seqlens=cu, seq_dim=-1), lse)
    with pytest.raises(ValueError, match="not a multiple"):
        shard(x[:, :-1], 0, world, layout=layout)


# ------------------------------------------------------------------ cost model and rule


def test_cost_model_and_default_rule():
    p = CM.predict("all_gather_kv", 8, 1 << 20)
    assert 13.0 < p.t_one < 15.0  # 1M causal tokens, 32 heads, hdim 128 at 650 TFLOP/s
    assert abs(p.comm_bytes - 7 / 8 * (1 << 20) * 8 * 256 * 2) < 1
    for method in ("all_gather_kv", "ring"):
        effs = [CM.predict(method, 8, n).efficiency for n in (1 << 17, 1 << 18, 1 << 19, 1 << 20)]
        assert effs == sorted(effs) and 0.9 < effs[0] < effs[-1] < 1.0
    assert CM.default_method(8, 32, 8) == "all_gather_kv"
    assert CM.default_method(8, 32, 32) == "all_gather_kv"  # MHA too: measured (docs/distributed.md)
    assert CM.default_kv_groups(8) == 2 and CM.default_kv_groups(3) == 1
    # 1M tokens: one group of 4 kv heads needs 3 * 2^20 * 4 * 256 * 2 B = 6.4 GB; 4 GB free -> 8 groups
    assert CM.default_kv_groups(8, tokens=1 << 20, free_bytes=80 << 30) == 2
    assert CM.default_kv_groups(8, tokens=1 << 20, free_bytes=4 << 30) == 8
