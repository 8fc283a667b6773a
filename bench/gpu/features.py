"""The --features suite: what the dense table does not cover, each against the plain call
or a peer on the same inputs. TFLOP/s count visible pairs except where a row's shape is
square and plain (FA convention); `vs base` is the ratio to the row's base column.

- sinks / softcap (hdim 128 full and causal, hdim 64 / 256 full, hdim 64 causal 16 x 1k),
  softcap_fixed=off; with baselines (run.sh .old*) their feature columns too;
- ragged: 64 sequences of 100..8k tokens in one call (rule, tile_list=off, dynamic=off,
  FA3 varlen), and a dense batch of 4k sequences with about as many tokens;
- split-KV: batch-1 calls with few tiles (rule vs splits=0), FA3 and cuDNN beside;
- packed GQA: 32/8 heads, short seq_q against 8k keys (rule, pack_gqa=on/off);
- paged K/V: pages 16 / 64 / 256 of a shuffled pool vs the same K/V dense (paged_fill,
  paged_group_k/v variants at page 16);
- head dims 192 / 128 (DeepSeek-style) vs cuDNN;
- kvcache (kvcache.py): FA3's serving call (append + rotary) at decode and chunked prefill,
  dense and paged 16 / 64, vs attention-only + torch copy + torch rotary.
"""
import itertools
import math
import random

import torch

import kvcache
import shapes
from peers import LONGATTN_KERNELS, Impl, capi_impl, fa3_impl, fa3_varlen_impl, make_sets, overrides_hooks, sdpa_impl
from runner import Row
from shapes import Case
from suites import check_memory, dense_row, label


def la_impl(la, fn, out, spec="", note="", flops=None, diff=True):
    """A longattn column from a capi call fn(i) writing into the tensor `out`."""
    setup, teardown = overrides_hooks(la, spec)
    return Impl(fn, lambda _: out, setup=setup, teardown=teardown, poison=lambda: out.fill_(math.nan),
                expect=LONGATTN_KERNELS, note=note or (f"overrides {spec}" if spec else ""), flops=flops, diff=diff)


def feature_row(ctx, c, full_set, seed=21):
    """Sinks and softcap 30 against the plain call (same inputs); peers run the plain call."""
    check_memory(peers_bytes(c), label(c))
    sets = make_sets(c, 1, seed)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    sinks = torch.rand(c.hq, device="cuda", dtype=torch.float32, generator=gen) * 4 - 1
    row = Row(label(c), c)
    row.ref, row.base = ["FA3", "cuDNN"], "longattn"
    row.add("FA3", lambda: fa3_impl(ctx.need_fa3(), c, sets))
    row.add("cuDNN", lambda: sdpa_impl(c, sets))
    row.add("longattn", lambda: capi_impl(ctx.need_la(), c, sets))
    cols = [("sinks", {"sinks": sinks}), ("softcap 30", {"softcap": 30.0}),
            ("sinks+softcap", {"sinks": sinks, "softcap": 30.0}),
            ("sinks+softcap softcap_fixed=off", {"sinks": sinks, "softcap": 30.0, "spec": "softcap_fixed=off"})]
    if not full_set:
        cols = [cols[2]]
    libs = [("", None)] + [(f"{base} ", lib) for base, lib in ctx.bases]  # earlier trees (run.sh .old*)
    for name, kw in cols:
        for prefix, lib in libs:
            impl = row.add(prefix + name, lambda kw=kw, lib=lib: capi_impl(lib or ctx.need_la(), c, sets, **kw))
            if impl:
                impl.diff = False  # other math than the peers' plain output
    return row


def peers_bytes(c):
    return 2 * 4 * c.b * (c.sq * c.hq + c.sk * c.hk) * max(c.d, c.d_v)


def ragged_row(ctx, causal, n=64, lo=100, hi=8192, h=16, d=128, seed=11):
    """n packed sequences of lo..hi tokens (64 of 100..8192), 16 heads, hdim 128, one call."""
    la = ctx.need_la()
    rng = random.Random(seed)
    lens = [rng.randint(lo, hi) for _ in range(n)]
    total, ml = sum(lens), max(lens)
    cu = torch.tensor([0] + list(itertools.accumulate(lens)), dtype=torch.int32, device="cuda")
    gen = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v = (torch.randn(total, h, d, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(3))
    o = torch.empty_like(q)
    c = Case(n, ml, ml, h, h, d, causal)
    row = Row(f"ragged {n} seqs", c)
    row.shape = f"d{d} {n} seqs of {lo}..{hi} ({total} tokens), {h}/{h} heads"
    row.flops = 2.0 * h * 2 * d * sum(shapes.visible_pairs(n, n, causal) for n in lens)
    row.convention = shapes.PAIRS_CONVENTION
    row.ref, row.base = ["FA3 varlen"], "longattn"
    row.add("FA3 varlen", lambda: fa3_varlen_impl(ctx.need_fa3(), c, q, k, v, cu, ml))
    for name, spec in (("longattn", ""), ("tile_list=off", "tile_list=off"), ("dynamic=off", "dynamic=off")):
        row.add(name, lambda spec=spec: la_impl(la, lambda i: la.ragged(q, k, v, o, cu, ml, causal), o, spec))
    if ctx.base:  # --baseline: the earlier build on the same inputs (A/B of the ragged kernel)
        ob = torch.empty_like(q)
        row.add("baseline", lambda: la_impl(ctx.base, lambda i: ctx.base.ragged(q, k, v, ob, cu, ml, causal), ob))
    return row


def paged_row(ctx, causal, b=4, s=8192, h=16, d=128, seed=5):
    """4 x 8192, 16 heads, hdim 128: K/V in pages of a shuffled pool (spare pages NaN, so a
    stray read shows) against the same K/V dense; every column's output vs longattn dense."""
    la = ctx.need_la()
    c = Case(b, s, s, h, h, d, causal)
    check_memory(peers_bytes(c) * 4, "paged")
    sets = make_sets(c, 1, seed)
    q, k, v = sets[0].q, sets[0].k, sets[0].v
    row = Row("paged", c)
    row.shape = f"d{d} b{b} x {shapes.kseq(s)}, {h}/{h} heads, pages of a shuffled pool"
    row.ref, row.base = ["longattn dense"], "longattn dense"
    row.add("FA3 dense", lambda: fa3_impl(ctx.need_fa3(), c, sets))
    row.add("longattn dense", lambda: capi_impl(la, c, sets))
    variants = {16: ("", "paged_fill=tma", "paged_fill=gather", "paged_group_k=0", "paged_group_v=0"),
                64: ("", "paged_group_k=0"), 256: ("",)}
    for ps, specs in variants.items():
        mp = s // ps
        npg = b * mp + 7
        perm = torch.randperm(npg, generator=torch.Generator().manual_seed(ps))[: b * mp].cuda()
        pt = perm.view(b, mp).to(torch.int32)
        kp = torch.full((npg, ps, h, d), float("nan"), device="cuda", dtype=torch.bfloat16)
        vp = torch.full_like(kp, float("nan"))
        kp[perm] = k.reshape(b * mp, ps, h, d)
        vp[perm] = v.reshape(b * mp, ps, h, d)
        for spec in specs:
            op = torch.empty_like(q)
            row.add(f"page {ps}" + (f" {spec}" if spec else ""),
                    lambda kp=kp, vp=vp, pt=pt, op=op, spec=spec:
                    la_impl(la, lambda i: la.paged(q, kp, vp, op, pt, causal), op, spec))
    return row


def split_dims_row(ctx, causal, b=4, s=8192, h=16, seed=13):
    """q / k head dim 192, v 128 (4 x 8192, 16 heads) vs cuDNN; longattn 128/128 on the same
    shape beside it (its own FLOPs)."""
    la = ctx.need_la()
    c = Case(b, s, s, h, h, 192, causal, dv=128)
    check_memory(peers_bytes(c) * 3, label(c))
    sets = make_sets(c, 1, seed)
    q, k, v, o = sets[0].q, sets[0].k, sets[0].v, sets[0].o
    q1, k1, o1 = q[..., :128].contiguous(), k[..., :128].contiguous(), torch.empty_like(o)
    row = Row(label(c), c)
    row.ref, row.base = ["cuDNN"], "cuDNN"
    row.add("FA3", lambda: fa3_impl(ctx.need_fa3(), c, sets))
    row.add("cuDNN", lambda: sdpa_impl(c, sets))
    row.add("longattn", lambda: la_impl(la, lambda i: la.split(q, k, v, o, causal), o))
    c1 = c.with_(d=128, dv=0)
    row.add("longattn 128/128", lambda: la_impl(la, lambda i: la.dense(q1, k1, v, o1, causal), o1,
                                                 flops=shapes.flops(c1), diff=False, note="q/k cut to 128"))
    return row


def splitkv_cases():
    """Batch-1 calls with fewer tiles than SMs: a 512-query chunk after a 64k prefix (8/1
    heads, causal: 32 tiles) and 4k queries x 64k keys with 2/1 heads (full: 48 tiles)."""
    return [Case(1, 512, 65536, 8, 1, 128, True), Case(1, 4096, 65536, 2, 1, 128, False)]


def gqa_cases():
    """Packed GQA: 32/8 heads, short seq_q x 8k keys (chunked prefill), causal bottom-right."""
    cs = [Case(4, sq, 8192, 32, 8, 128, True) for sq in (16, 64, 128, 512)]
    cs += [Case(16, 16, 8192, 32, 8, 128, True), Case(16, 64, 8192, 32, 8, 128, True),
           Case(8, 16, 8192, 32, 8, 128, True), Case(4, 16, 8192, 32, 8, 128, False),
           Case(1, 64, 8192, 32, 8, 128, True)]
    return cs


def _based(row):
    row.base = "longattn"
    return row


def feature_rows(ctx):
    """(case, builder, tag) of every --features row, in table order; --match also sees the tag
    (sinks/softcap, ragged, dense, split-KV, packed GQA, paged, split dims, kvcache)."""
    out = []
    # (hdim 64 causal at 1k: the 192-row tile's q-tiles anchored at the last row, plan.h q_shift.)
    for c, full in ((Case(2, 8192, 8192, 16, 16, 128, False), True), (Case(2, 8192, 8192, 16, 16, 128, True), True),
                    (Case(2, 8192, 8192, 16, 16, 64, False), False), (Case(2, 8192, 8192, 16, 16, 256, False), False),
                    (Case(16, 1024, 1024, 16, 16, 64, True), True)):
        out.append((c, lambda c=c, full=full: feature_row(ctx, c, full), "sinks/softcap"))
    for causal in (False, True):
        out.append((Case(64, 8192, 8192, 16, 16, 128, causal), lambda causal=causal: ragged_row(ctx, causal), "ragged"))
        # A dense batch of 4k sequences with about the ragged row's tokens (64 x ~4.1k).
        dc = Case(64, 4096, 4096, 16, 16, 128, causal)
        out.append((dc, lambda dc=dc: _based(dense_row(ctx, dc)), "ragged dense"))
    for c in splitkv_cases():
        out.append((c, lambda c=c: _based(dense_row(ctx, c, variants=[("splits=0", "splits=0")])), "split-KV"))
    for c in gqa_cases():
        out.append((c, lambda c=c: _based(dense_row(
            ctx, c, variants=[("pack_gqa=on", "pack_gqa=on"), ("pack_gqa=off", "pack_gqa=off")])), "packed GQA"))
    for causal in (False, True):
        out.append((Case(4, 8192, 8192, 16, 16, 128, causal), lambda causal=causal: paged_row(ctx, causal), "paged"))
    for causal in (False, True):
        out.append((Case(4, 8192, 8192, 16, 16, 192, causal, dv=128), lambda causal=causal: split_dims_row(ctx, causal),
                    "split dims"))
    out += kvcache.kvcache_rows(ctx)
    return out
