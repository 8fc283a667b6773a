"""One rank of the CPU context-parallel tests (test_distributed.py starts W of these).

    python cp_worker.py RANK WORLD STORE_FILE OUT_JSON [errors]

Joins a gloo group through a file store, runs every case of CASES with both methods, and
compares its shard of the output and LSE with a single-process call on the whole
sequence under the oracle rule: max error against the float64 reference (longattn's
reference backend) at most 2x the single call's own error plus a small slack. With
`errors` it also feeds mismatched shards and records the error each rank raised. Writes a
JSON report; exits non-zero on a failed comparison.
"""

import json
import os
import sys
import traceback

import torch
import torch.distributed as dist

import longattn
import longattn.distributed as cp

# (name, options). Shapes stay tiny: the point is the schedule, not the kernels.
CASES = [
    ("dense gqa", dict()),
    ("dense gqa causal", dict(causal=True)),
    ("ragged causal", dict(causal=True, ragged=True)),
    ("ragged", dict(ragged=True)),
    ("window causal", dict(causal=True, window=(5, -1))),
    ("window both sides", dict(window=(3, 7))),
    ("window right only", dict(window=(-1, 2), ragged=True)),
    ("sinks softcap causal", dict(causal=True, sinks=True, softcap=3.0)),
    ("sinks window", dict(causal=True, sinks=True, window=(4, -1), ragged=True)),
    ("mha", dict(causal=True, hq=3, hk=3)),
    ("mqa kv groups", dict(causal=True, hq=4, hk=1)),
    ("kv groups 4", dict(causal=True, hq=8, hk=4, kv_groups=4)),
    ("contiguous causal", dict(causal=True, layout="contiguous")),
    ("contiguous ragged window", dict(window=(6, 0), layout="contiguous", ragged=True)),
    ("bf16 causal", dict(causal=True, dtype=torch.bfloat16)),
    ("f16 ragged", dict(causal=True, dtype=torch.float16, ragged=True)),
    ("dim_v 8", dict(causal=True, dim_v=8)),
    # One sequence (the long-context case): a dense batch of 1, a ragged batch of one.
    ("one sequence causal", dict(causal=True, batch=1)),
    ("one sequence kv groups 4 bf16", dict(causal=True, batch=1, hq=8, hk=4, kv_groups=4, dtype=torch.bfloat16)),
    ("one sequence contiguous window", dict(window=(5, 3), batch=1, layout="contiguous")),
    ("one ragged sequence sinks", dict(causal=True, ragged=True, lens=(5,), sinks=True)),
]


def make_case(world, seed, hq=4, hk=2, dim=16, dim_v=None, ragged=False, dtype=torch.float32, layout="zigzag",
              sinks=False, batch=2, lens=(3, 1, 0, 5), **_):
    """Whole-sequence inputs, the same on every rank (seeded)."""
    g = torch.Generator().manual_seed(seed)
    unit = world * (2 if layout == "zigzag" else 1)
    dim_v = dim_v or dim
    if ragged:
        lens = [n * unit for n in lens]
        cu = torch.tensor([0] + [sum(lens[: i + 1]) for i in range(len(lens))], dtype=torch.int32)
        lead = (int(cu[-1]),)
    else:
        cu, lead = None, (batch, 4 * unit)
    q = torch.randn(lead + (hq, dim), generator=g).to(dtype)
    k = torch.randn(lead + (hk, dim), generator=g).to(dtype)
    v = torch.randn(lead + (hk, dim_v), generator=g).to(dtype)
    s = torch.randn(hq, generator=g) if sinks else None
    return q, k, v, cu, s


def errors(got, single, ref):
    got, single, ref = (x.double() for x in (got, single, ref))
    fin = torch.isfinite(ref)
    if not torch.equal(torch.isinf(got), torch.isinf(ref)) or torch.isnan(got).any():
        return float("inf"), 0.0
    if not fin.any():
        return 0.0, 0.0
    return (got - ref)[fin].abs().max().item(), (single - ref)[fin].abs().max().item()


def run_case(rank, world, name, opts, method, seed):
    causal, window = opts.get("causal", False), opts.get("window", (-1, -1))
    layout = opts.get("layout", "zigzag")
    q, k, v, cu, sinks = make_case(world, seed, **opts)
    kw = dict(causal=causal, window_size=(window[0], -1) if causal else window, softcap=opts.get("softcap", 0.0),
              sinks=sinks, cu_seqlens_q=cu, cu_seqlens_k=cu, return_lse=True, num_threads=1)
    single, single_lse = longattn.forward(q, k, v, **kw)
    ref, ref_lse = longattn.forward(q.float(), k.float(), v.float(), backend="reference", **kw)
    sh = dict(layout=layout, cu_seqlens=cu)
    out, lse = cp.context_parallel_attn(
        cp.shard(q, rank, world, **sh), cp.shard(k, rank, world, **sh), cp.shard(v, rank, world, **sh),
        causal=causal, layout=layout, method=method, window_size=window, softcap=opts.get("softcap", 0.0),
        sinks=sinks, kv_groups=opts.get("kv_groups"), return_lse=True, num_threads=1,
        cu_seqlens=None if cu is None else cp.local_cu_seqlens(cu, world, layout),
    )
    assert out.dtype == q.dtype and out.shape == cp.shard(single, rank, world, **sh).shape, (out.dtype, out.shape)
    mine = lambda x, d=None: cp.shard(x, rank, world, seq_dim=d, **sh)
    e, e1 = errors(out, mine(single), mine(ref))
    le, le1 = errors(lse, mine(single_lse, -1), mine(ref_lse, -1))
    atol = 1e-5 if q.dtype == torch.float32 else 1e-3
    ok = e <= 2 * e1 + atol and le <= 2 * le1 + 1e-5
    return dict(case=name, method=method, ok=ok, err=e, single_err=e1, lse_err=le, single_lse_err=le1)


def error_cases(rank, world):
    """Mismatched shards: every rank must raise, with the same message, and the group must
    still work afterwards (no rank left inside a collective)."""
    q, k, v, cu, _ = make_case(world, 7)
    sh = lambda x: cp.shard(x, rank, world)
    qs, ks, vs = sh(q), sh(k), sh(v)
    bad = {
        "length": (qs[:, :-2] if rank == world - 1 else qs, ks, vs, {}),
        "heads": (qs, ks, vs[:, :, :1] if rank == 1 else vs, {}),
        "dtype": (qs.double() if rank == 0 else qs, ks, vs, {}),
        "causal": (qs, ks, vs, {"causal": rank == 1}),
        "odd local length": (qs[:, :-1], ks[:, :-1], vs[:, :-1], {}),
        "not a tensor": (qs.numpy() if rank == 1 else qs, ks, vs, {}),
        # fp8: rank 1's q_descale has one kv head, the others default to (batch, heads_kv)
        "descale": (qs.to(torch.float8_e4m3fn), ks.to(torch.float8_e4m3fn), vs.to(torch.float8_e4m3fn),
                    {"q_descale": torch.ones(qs.shape[0], 1) if rank == 1 else None}),
    }
    seen = {}
    for name, (a, b, c, kw) in bad.items():
        try:
            cp.context_parallel_attn(a, b, c, num_threads=1, **kw)
            seen[name] = "no error"
        except Exception as ex:  # the type and message are what the test compares
            seen[name] = f"{type(ex).__name__}: {ex}"
    empty = cp.context_parallel_attn(qs[:, :0], ks[:, :0], vs[:, :0], causal=True, return_lse=True)
    seen["empty"] = [list(empty[0].shape), list(empty[1].shape)]
    # Still in step: a good call after the failures.
    out = cp.context_parallel_attn(qs, ks, vs, causal=True, num_threads=1)
    single = longattn.forward(q, k, v, causal=True, num_threads=1)
    seen["after"] = bool(torch.allclose(out, sh(single), atol=1e-5, rtol=0))
    return seen


def main():
    rank, world, store, out_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    report = {"rank": rank, "results": [], "errors": None}
    status = 0
    try:
        seed = 100
        for name, opts in CASES:
            for method in cp.METHODS:
                seed += 1
                r = run_case(rank, world, name, opts, method, seed)
                report["results"].append(r)
                status |= 0 if r["ok"] else 1
        # The default rule picks one; whatever it picks must agree with the explicit call.
        r = run_case(rank, world, "default method", dict(causal=True), None, 999)
        report["results"].append(r)
        status |= 0 if r["ok"] else 1
        if len(sys.argv) > 5 and sys.argv[5] == "errors":
            report["errors"] = error_cases(rank, world)
    except Exception:
        report["exception"] = traceback.format_exc()
        status = 2
    with open(out_path, "w") as f:
        json.dump(report, f, indent=1)
    dist.destroy_process_group()
    sys.exit(status)


if __name__ == "__main__":
    main()
