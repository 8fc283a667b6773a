"""Context parallelism (longattn.distributed) with torch on CPUs.

- World size 1 is the plain call bit for bit; the one-process simulation of W ranks.
- Real gloo groups of 2, 3 and 4 processes (cp_worker.py): every rank's output and LSE
  against a single-process call on the whole sequence, both methods, causal and not, GQA,
  ragged, windows, sinks, softcap, 16-bit inputs; mismatched shards raise the same error
  on every rank without a hang.
"""

import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
import longattn  # noqa: E402
import longattn.distributed as cp  # noqa: E402
from longattn.distributed import unshard  # noqa: E402
from longattn.distributed.simulate import Simulation  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def test_world_size_one_is_the_plain_call_bit_for_bit(tmp_path):
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(s, generator=g).to(torch.bfloat16) for s in ((1, 40, 4, 16), (1, 40, 2, 16), (1, 40, 2, 16)))
    sinks = torch.randn(4, generator=g)
    a, la = cp.context_parallel_attn(q, k, v, causal=True, window_size=(7, 3), sinks=sinks, return_lse=True)
    b, lb = longattn.forward(q, k, v, causal=True, window_size=(7, -1), sinks=sinks, return_lse=True)
    assert torch.equal(a.view(torch.int16), b.view(torch.int16)) and torch.equal(la, lb)
    c = cp.context_parallel_attn(q, k, v, causal=True, window_size=(7, 3), sinks=sinks, sm_margin=3)
    assert torch.equal(c.view(torch.int16), b.view(torch.int16))
    with pytest.raises(ValueError, match="sm_margin"):
        cp.context_parallel_attn(q, k, v, causal=True, sm_margin=-1)
    cu = torch.tensor([0, 15, 40], dtype=torch.int32)
    b = longattn.flash_attn_varlen_func(q[0], k[0], v[0], cu, cu, 25, 25, causal=True)
    a = cp.context_parallel_attn(q[0], k[0], v[0], cu_seqlens=cu, causal=True)
    assert torch.equal(a.view(torch.int16), b.view(torch.int16))
    # An initialised group of one rank: the same plain call.
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        a = cp.context_parallel_attn(q[0], k[0], v[0], cu_seqlens=[0, 15, 40], causal=True)
    finally:
        dist.destroy_process_group()
    assert torch.equal(a.view(torch.int16), b.view(torch.int16))


@pytest.mark.parametrize("world", [2, 5, 8])
@pytest.mark.parametrize("method", cp.METHODS)
def test_simulated_ranks_match_the_single_call(world, method):
    """The exchange emulated in one process (what tests/gpu/cp_one_gpu.py runs on a GPU)."""
    g = torch.Generator().manual_seed(world)
    n = 2 * world * 3
    cu = torch.tensor([0, n, 3 * n, 4 * n], dtype=torch.int32)
    q, k, v = (torch.randn(s, generator=g) for s in ((4 * n, 6, 16), (4 * n, 2, 16), (4 * n, 2, 16)))
    sinks = torch.randn(6, generator=g)
    for causal, window in ((True, (-1, -1)), (False, (5, 2)), (True, (4, -1))):
        sim = Simulation(q, k, v, world, method=method, causal=causal, cu_seqlens=cu, window_size=window,
                         sinks=sinks, softcap=4.0, num_threads=1)
        res = sim.run()
        out = unshard([r[0] for r in res], cu_seqlens=cu)
        lse = unshard([r[1] for r in res], cu_seqlens=cu, seq_dim=-1)
        want, want_lse = longattn.forward(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, causal=causal,
                                          window_size=(window[0], -1) if causal else window, sinks=sinks,
                                          softcap=4.0, return_lse=True, num_threads=1)
        torch.testing.assert_close(out, want, atol=2e-5, rtol=0)
        torch.testing.assert_close(lse, want_lse, atol=2e-5, rtol=0)


@pytest.mark.parametrize("return_lse", [False, True])
def test_simulated_dense_batch_in_kv_groups(return_lse):
    """all_gather_kv on a dense batch of 2, GQA in two kv groups, q contiguous or with a batch
    stride that is not the rows' (a slice of a longer buffer): equals the single call."""
    world, n = 3, 2 * 3 * 5
    g = torch.Generator().manual_seed(11)
    q, k, v = (torch.randn(s, generator=g) for s in ((2, n, 4, 16), (2, n, 2, 16), (2, n, 2, 16)))
    want, want_lse = longattn.forward(q, k, v, causal=True, return_lse=True, num_threads=1)
    # q as given, and q whose batch stride is not 2c rows.
    for qx in (q, None):
        sim = Simulation(q, k, v, world, method="all_gather_kv", causal=True, kv_groups=2,
                         return_lse=return_lse, num_threads=1)
        if qx is None:
            sim.qs = [torch.cat([x, x], dim=1)[:, : x.shape[1]] for x in sim.qs]
            assert sim.qs[0].stride(0) != sim.qs[0].shape[1] * sim.qs[0].stride(1)
        res = sim.run()
        out = unshard([r[0] for r in res])
        torch.testing.assert_close(out, want, atol=2e-5, rtol=0)
        if return_lse:
            torch.testing.assert_close(unshard([r[1] for r in res], seq_dim=-1), want_lse, atol=2e-5, rtol=0)


@pytest.mark.parametrize("layout", ["zigzag", "contiguous"])
def test_all_gather_reorder_block_copies_equal_the_index_gather(layout, monkeypatch):
    """The gathered shards' reorder into sequence order: the block copies (dense batches of 1
    and 3, ragged with an empty sequence, W = 1..5) equal the index gather element for element,
    and the index gather still runs past MAX_REORDER_COPIES (a whole simulated call on it)."""
    from longattn.distributed import _exec as E

    g = torch.Generator().manual_seed(21)
    for world in range(1, 6):
        n = 2 * world * 2
        geoms = [((1, n), None), ((3, 2 * n), None), ((4 * n,), [0, n, n, 4 * n])]
        for shape, cu in geoms:
            q, k, v = (torch.randn(shape + (h, 8), generator=g) for h in (2, 1, 1))
            cut = None if cu is None else torch.tensor(cu, dtype=torch.int32)
            sim = Simulation(q, k, v, world, method="all_gather_kv", layout=layout, causal=True, cu_seqlens=cut,
                             num_threads=1)
            for p in sim.probs:
                x = torch.randn((world, p.tokens, 3, 5), generator=g)
                copies = E.reorder_copies(p)
                assert copies is not None and len(copies) <= world * len(p.segs) * 2
                want = x[E.global_order(p, x.device)]
                assert torch.equal(E.to_sequence_order(x, p, copies, None), want)
                # rows not contiguous inside: the index gather, whatever was planned
                xt = x.transpose(2, 3).contiguous().transpose(2, 3)
                assert torch.equal(E.to_sequence_order(xt, p, copies, None), want)
    monkeypatch.setattr(E, "MAX_REORDER_COPIES", 0)
    world, n = 3, 2 * 3 * 4
    q, k, v = (torch.randn((2, n, h, 16), generator=g) for h in (4, 2, 2))
    sim = Simulation(q, k, v, world, method="all_gather_kv", layout=layout, causal=True, num_threads=1)
    assert E.reorder_copies(sim.probs[0]) is None
    out = unshard([r[0] for r in sim.run()], layout=layout)
    torch.testing.assert_close(out, longattn.forward(q, k, v, causal=True, num_threads=1), atol=2e-5, rtol=0)


def test_all_gather_zigzag_reads_the_gathered_kv_in_place(monkeypatch):
    """Zigzag without a window: one cp_world call per rank, kv group and sequence over the
    gathered K/V (no reorder); with a window, or when the backend refuses the cp_world call,
    the reorder and per-chunk calls. Every variant equals the single call."""
    from longattn.distributed import _exec as E

    real = E._core.forward
    seen = []

    def spy(*a, **kw):
        seen.append(kw.get("cp_world", 0))
        return real(*a, **kw)

    monkeypatch.setattr(E._core, "forward", spy)
    world, n = 3, 2 * 3 * 7
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn((2, n, h, 16), generator=g) for h in (4, 2, 2))
    for causal, window, native in ((True, (-1, -1), True), (False, (-1, -1), True), (True, (5, -1), False)):
        want, want_lse = longattn.forward(q, k, v, causal=causal, window_size=window, return_lse=True, num_threads=1)
        seen.clear()
        sim = Simulation(q, k, v, world, method="all_gather_kv", causal=causal, window_size=window, kv_groups=2,
                         num_threads=1)
        res = sim.run()
        assert seen.count(world) == (world * 2 * 2 if native else 0)  # ranks x kv groups x sequences
        assert all(w in (0, world) for w in seen) and (0 in seen) != native
        torch.testing.assert_close(unshard([r[0] for r in res]), want, atol=2e-5, rtol=0)
        torch.testing.assert_close(unshard([r[1] for r in res], seq_dim=-1), want_lse, atol=2e-5, rtol=0)

    # Ragged with an empty sequence: every non-empty one in place, no reorder at all; then the
    # backend refuses one sequence's call (the 2 * 3 * 5-token one): only its segment reorders.
    lens = [2 * world * 7, 0, 2 * world * 5, 2 * world * 2]
    cu = torch.tensor([0] + [sum(lens[: i + 1]) for i in range(len(lens))], dtype=torch.int32)
    qr, kr, vr = (torch.randn((int(cu[-1]), h, 16), generator=g) for h in (4, 2, 2))
    want = longattn.forward(qr, kr, vr, cu_seqlens_q=cu, cu_seqlens_k=cu, causal=True, num_threads=1)
    reorders = []
    real_order = E.to_sequence_order
    monkeypatch.setattr(E, "to_sequence_order", lambda x, *a: reorders.append(1) or real_order(x, *a))

    def refuse(*a, **kw):
        if kw.get("cp_world", 0) and a[0].shape[1] == lens[2] // world:
            raise NotImplementedError("cp_world: refused by this test")
        return real(*a, **kw)

    for fwd, n_reorders in ((spy, 0), (refuse, 2 * 2)):  # K and V per kv group
        monkeypatch.setattr(E._core, "forward", fwd)
        reorders.clear()
        Simulation(qr, kr, vr, world, method="all_gather_kv", causal=True, cu_seqlens=cu, kv_groups=2,
                   num_threads=1).run_rank(1)
        assert len(reorders) == n_reorders
        sim = Simulation(qr, kr, vr, world, method="all_gather_kv", causal=True, cu_seqlens=cu, kv_groups=2,
                         num_threads=1)
        out = unshard([r[0] for r in sim.run()], cu_seqlens=cu)
        torch.testing.assert_close(out, want, atol=2e-5, rtol=0)


def test_cp_world_arguments_are_checked():
    """longattn.forward's cp_world / cp_rank: bad values name the argument, nothing is written."""
    q = torch.randn(1, 8, 2, 16)
    k = torch.randn(2, 8, 2, 16)
    out = torch.full((1, 8, 2, 16), 7.0)
    longattn.forward(q, k, k, out=out, cp_world=2, cp_rank=1)
    assert not torch.equal(out, torch.full_like(out, 7.0))
    for kw, what in ((dict(cp_world=2, cp_rank=2), "cp_rank"), (dict(cp_world=-1), "cp_world"),
                     (dict(cp_world=0, cp_rank=1), "cp_rank"), (dict(cp_world=3, cp_rank=0), "k: shape"),
                     (dict(cp_world=2, cp_rank=0, window_size=(2, -1)), "mask")):
        out.fill_(7.0)
        with pytest.raises(ValueError, match=what):
            longattn.forward(q, k, k, out=out, **kw)
        assert torch.equal(out, torch.full_like(out, 7.0))


def _fp8_reference(q, k, v, qd, kd, vd, cu, causal):
    """float64 attention of the dequantized fp8 inputs (descales per (sequence, kv head)),
    bottom-right causal; dense (b, s, h, d) or ragged (T, h, d) with cu."""
    rows = [(0, q.shape[1], b) for b in range(q.shape[0])] if cu is None else \
        [(int(cu[i]), int(cu[i + 1]), i) for i in range(len(cu) - 1)]
    hq, hk = q.shape[-2], k.shape[-2]
    out = torch.zeros(q.shape[:-1] + (v.shape[-1],), dtype=torch.float64)
    for a, b, s in rows:
        qs, ks, vs = (x[s] if cu is None else x[a:b] for x in (q, k, v))
        if cu is None:
            a, b = 0, q.shape[1]
        rep = lambda d: d[s].double().repeat_interleave(hq // hk)  # noqa: E731
        qq = qs.double() * rep(qd)[None, :, None] * rep(kd)[None, :, None]
        kk = ks.double().repeat_interleave(hq // hk, 1)
        vv = vs.double().repeat_interleave(hq // hk, 1) * rep(vd)[None, :, None]
        sc = torch.einsum("qhd,khd->hqk", qq, kk) / q.shape[-1] ** 0.5
        if causal:
            n = qs.shape[0]
            sc = sc.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
        o = torch.einsum("hqk,khd->qhd", sc.softmax(-1), vv)
        if cu is None:
            out[s] = o
        else:
            out[a:b] = o
    return out


@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("method", cp.METHODS)
def test_simulated_fp8_matches_the_single_call(world, method):
    """float8_e4m3fn shards with per-(sequence, kv head) descales, dense and ragged, GQA,
    causal and not: bf16 out within the fp8 error of the single call against float64."""
    g = torch.Generator().manual_seed(30 + world)
    n = 2 * world * 4
    for ragged in (False, True):
        cu = torch.tensor([0, n, 3 * n, 4 * n], dtype=torch.int32) if ragged else None
        shp = (lambda h: (4 * n, h, 32)) if ragged else (lambda h: (2, 2 * n, h, 32))
        nseq = 3 if ragged else 2
        q, k = ((torch.randn(shp(h), generator=g) * 2).to(torch.float8_e4m3fn) for h in (4, 2))
        v = torch.randn(shp(2), generator=g).to(torch.float8_e4m3fn)
        qd, kd, vd = (torch.rand(nseq, 2, generator=g) + 0.5 for _ in range(3))
        for causal in (True, False):
            sim = Simulation(q, k, v, world, method=method, causal=causal, cu_seqlens=cu, q_descale=qd,
                             k_descale=kd, v_descale=vd, num_threads=1)
            res = sim.run()
            sh = dict(cu_seqlens=cu) if ragged else {}
            out = unshard([r[0] for r in res], **sh)
            lse = unshard([r[1] for r in res], seq_dim=-1, **sh)
            kw = dict(cu_seqlens_q=cu, cu_seqlens_k=cu) if ragged else {}
            want, want_lse = longattn.forward(q, k, v, causal=causal, q_descale=qd, k_descale=kd, v_descale=vd,
                                              return_lse=True, num_threads=1, **kw)
            ref = _fp8_reference(q, k, v, qd, kd, vd, cu, causal)
            assert out.dtype == torch.bfloat16
            e, e1 = ((x.double() - ref).abs().max().item() for x in (out, want))
            assert e <= 1.5 * e1 + 1e-2, (ragged, causal, e, e1)
            torch.testing.assert_close(lse, want_lse, atol=1e-4, rtol=0)


# ------------------------------------------------------------------ real gloo groups


def _run_world(world, tmp_path, extra=()):
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1", LONGATTN_NUM_THREADS="1")
    store = tmp_path / "store"
    procs = []
    for r in range(world):
        cmd = [sys.executable, os.path.join(HERE, "cp_worker.py"), str(r), str(world), str(store),
               str(tmp_path / f"rank{r}.json"), *extra]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    logs = []
    try:
        for p in procs:
            logs.append(p.communicate(timeout=300)[0])
    finally:
        for p in procs:  # a hang must fail the test, not the CI run
            if p.poll() is None:
                p.kill()
    reports = []
    for r, p in enumerate(procs):
        path = tmp_path / f"rank{r}.json"
        assert path.exists(), f"rank {r} wrote no report (exit {p.returncode}):\n{logs[r][-3000:]}"
        rep = json.loads(path.read_text())
        assert "exception" not in rep, f"rank {r}:\n{rep['exception']}"
        bad = [x for x in rep["results"] if not x["ok"]]
        assert not bad, f"rank {r}: {bad}"
        assert p.returncode == 0, logs[r][-3000:]
        reports.append(rep)
    return reports


@pytest.mark.parametrize("world", [2, 3, 4])
def test_gloo_ranks_match_the_single_call(world, tmp_path):
    extra = ("errors",) if world == 3 else ()
    reports = _run_world(world, tmp_path, extra)
    assert len(reports[0]["results"]) == 2 * 21 + 1
    if world == 3:
        errs = [rep["errors"] for rep in reports]
        for name in errs[0]:
            if name in ("after", "empty"):
                continue
            msgs = {e[name] for e in errs}
            assert len(msgs) == 1, (name, msgs)  # the same error on every rank
            assert msgs.pop().split(":")[0] in ("ValueError", "TypeError"), (name, errs[0][name])
        assert "q shape: rank 0 has (2, 8, 4, 16), rank 2 has (2, 6, 4, 16)" in errs[0]["length"]
        assert "ranks disagree on v shape" in errs[0]["heads"]
        assert "ranks disagree on q/k/v dtypes" in errs[0]["dtype"]
        assert "ranks disagree on causal: rank 0 has False, rank 1 has True" in errs[0]["causal"]
        assert "not a multiple of 2" in errs[0]["odd local length"]
        assert "ranks disagree on q_descale shape" in errs[0]["descale"]
        assert all(e["after"] is True for e in errs)
        assert all(e["empty"] == [[2, 0, 4, 16], [2, 4, 0]] for e in errs)
