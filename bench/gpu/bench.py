#!/usr/bin/env python3
"""longattn vs PyTorch SDPA (cuDNN and FlashAttention-2 backends), side by side in one
process on the same inputs.

Input sets rotate so the working set exceeds L2 (each timed call reads a set the previous
calls did not touch), every call is timed with CUDA events after warmup, and the median is
reported. TFLOP/s are mask-aware: causal counts only visible (query, key) pairs. longattn's
output is compared with cuDNN's (max abs diff) so a fast wrong kernel cannot pass.

Usage: python3 bench/gpu/bench.py --lib path/to/liblongattn_capi.so --out DIR [--quick]
"""
import argparse
import ctypes
import json
import os
import random
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def visible_pairs(sq, sk, causal):
    """Visible (query, key) pairs, bottom-right causal (closed form: visible_pairs_fast)."""
    return visible_pairs_fast(sq, sk, causal)


def visible_pairs_mask(sq, sk, causal, wl=-1, wr=-1, chunk=0):
    """Visible (query, key) pairs under mask_rule.h (bottom-right alignment)."""
    off = sk - sq
    tot = 0
    for i in range(sq):
        p = i + off
        lo, hi = 0, sk
        if causal:
            hi = min(hi, p + 1)
        if wl >= 0:
            lo = max(lo, p - wl)
        if wr >= 0:
            hi = min(hi, p + wr + 1)
        if chunk > 0:
            c0 = (p // chunk) * chunk
            lo, hi = max(lo, c0), min(hi, c0 + chunk)
        tot += max(0, hi - lo)
    return tot


# Issue-6 scheduling variants (env switches of src/cuda/forward_sm90.cpp, for --long and
# any A/B of the tile order): every entry sets every switch, so no setting leaks from one
# timed call into the next. "default" is what ships.
SCHED_BASE = {"LONGATTN_SECTIONS": "", "LONGATTN_L2_BYTES": "", "LONGATTN_TILE_LIST": "", "LONGATTN_DYNAMIC": "",
              "LONGATTN_TILE_ORDER": "",
              "LONGATTN_SPLITS": ""}
SCHED_VARIANTS = [
    ("default", SCHED_BASE),
    ("nosections", {**SCHED_BASE, "LONGATTN_SECTIONS": "0"}),  # causal: one LPT snake; full: heads fastest
    ("dynamic", {**SCHED_BASE, "LONGATTN_DYNAMIC": "1"}),  # the atomic counter (default only >= 192k keys)
]


class LongAttn:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        f = self.lib.longattn_bench_forward
        f.restype = ctypes.c_int
        f.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int] + [ctypes.c_int64] * 6 + \
            [ctypes.c_int, ctypes.c_float, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
        g = self.lib.longattn_bench_forward_ex
        g.restype = ctypes.c_int
        g.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int] + [ctypes.c_int64] * 6 + \
            [ctypes.c_int, ctypes.c_float, ctypes.c_float, ctypes.c_void_p] + [ctypes.c_int64] * 3 + \
            [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
        r = self.lib.longattn_bench_forward_ragged
        r.restype = ctypes.c_int
        r.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int64] * 6 + [ctypes.c_int, ctypes.c_void_p,
                                                                     ctypes.c_char_p, ctypes.c_int]
        pg = self.lib.longattn_bench_forward_paged
        pg.restype = ctypes.c_int
        pg.argtypes = [ctypes.c_void_p] * 6 + [ctypes.c_int64] * 8 + [ctypes.c_int, ctypes.c_void_p,
                                                                     ctypes.c_char_p, ctypes.c_int]
        sp = self.lib.longattn_bench_forward_split
        sp.restype = ctypes.c_int
        sp.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int64] * 6 + [ctypes.c_int, ctypes.c_void_p,
                                                                     ctypes.c_char_p, ctypes.c_int]
        self.err = ctypes.create_string_buffer(512)

    def split(self, q, k, v, out, causal):
        b, s, hq, dqk = q.shape
        st = torch.cuda.current_stream().cuda_stream
        rc = self.lib.longattn_bench_forward_split(q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), b, s, hq,
                                                   k.shape[2], dqk, v.shape[3], int(causal), st, self.err, 512)
        if rc != 0:
            raise RuntimeError(self.err.value.decode())

    def paged(self, q, kp, vp, out, pt, causal, used=None):
        b, sq, hq, d = q.shape
        st = torch.cuda.current_stream().cuda_stream
        rc = self.lib.longattn_bench_forward_paged(q.data_ptr(), kp.data_ptr(), vp.data_ptr(), out.data_ptr(),
                                                   pt.data_ptr(), used.data_ptr() if used is not None else None,
                                                   b, sq, kp.shape[0], kp.shape[1], pt.shape[1], hq, kp.shape[2], d,
                                                   int(causal), st, self.err, 512)
        if rc != 0:
            raise RuntimeError(self.err.value.decode())

    def ragged(self, q, k, v, out, cu, max_len, causal):
        total, hq, d = q.shape
        st = torch.cuda.current_stream().cuda_stream
        rc = self.lib.longattn_bench_forward_ragged(q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(),
                                                    cu.data_ptr(), cu.numel() - 1, total, max_len, hq,
                                                    k.shape[1], d, int(causal), st, self.err, 512)
        if rc != 0:
            raise RuntimeError(self.err.value.decode())

    def ex(self, q, k, v, out, causal, softcap=0.0, sinks=None, wl=-1, wr=-1, chunk=0):
        b, sq, hq, d = q.shape
        sk, hk = k.shape[1], k.shape[2]
        st = torch.cuda.current_stream().cuda_stream
        rc = self.lib.longattn_bench_forward_ex(
            q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), None,
            0 if q.dtype == torch.bfloat16 else 1, b, sq, sk, hq, hk, d, int(causal), 0.0,
            float(softcap), sinks.data_ptr() if sinks is not None else None, wl, wr, chunk, st,
            self.err, 512)
        if rc != 0:
            raise RuntimeError(self.err.value.decode())

    def __call__(self, q, k, v, out, lse, causal):
        b, sq, hq, d = q.shape
        sk, hk = k.shape[1], k.shape[2]
        st = torch.cuda.current_stream().cuda_stream
        rc = self.lib.longattn_bench_forward(
            q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(),
            lse.data_ptr() if lse is not None else None,
            0 if q.dtype == torch.bfloat16 else 1, b, sq, sk, hq, hk, d, int(causal), 0.0, st,
            self.err, 512)
        if rc != 0:
            raise RuntimeError(self.err.value.decode())


def time_interleaved(fns, nsets, warmup=2, iters=12, sequential=False):
    """Median ms per call of each callable. Implementations are interleaved round-robin so
    clock and power drift hit all alike (timed one after the other, identical kernels
    differed by up to 12% with their position), in a shuffled order each round (the one
    right after another still paid ~4%); each timing spans 2*nsets calls over the rotating
    input sets so host launch overhead overlaps GPU work instead of being timed.
    sequential=True times each implementation's rounds back to back instead (cuDNN first)."""
    for _ in range(warmup):
        for f in fns.values():
            for i in range(nsets):
                f(i)
    torch.cuda.synchronize()
    ts = {k: [] for k in fns}
    reps = 2 * nsets
    rng = random.Random(7)
    order = list(fns)
    plan = ([[k] * iters for k in order] if sequential else [rng.sample(order, len(order)) for _ in range(iters)])
    step = 0
    for keys in plan:
        for k in keys:
            f = fns[k]
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for r in range(reps):
                f((step + r) % nsets)
            e.record()
            e.synchronize()
            ts[k].append(s.elapsed_time(e) / reps)
            step += 1
    return {k: statistics.median(v) for k, v in ts.items()}


def input_sets(gen, nsets, b, s, hq, hk, d, dtype=torch.bfloat16):
    """nsets tuples (q, k, v, out) of random (b, s, heads, d) tensors on the GPU."""
    sets = []
    for _ in range(nsets):
        q = torch.randn(b, s, hq, d, device="cuda", dtype=dtype, generator=gen)
        k = torch.randn(b, s, hk, d, device="cuda", dtype=dtype, generator=gen)
        v = torch.randn(b, s, hk, d, device="cuda", dtype=dtype, generator=gen)
        sets.append((q, k, v, torch.empty_like(q)))
    return sets


def run_shape(la, b, s, h, d, causal, dtype, l2_bytes, variants, sequential=False):
    per_set = 4 * b * s * h * d * 2  # q, k, v, out
    nsets = max(2, -(-3 * l2_bytes // per_set))
    gen = torch.Generator(device="cuda").manual_seed(1000 + s + d + int(causal))
    sets = input_sets(gen, nsets, b, s, h, h, d, dtype)
    flops = 4.0 * b * h * d * visible_pairs(s, s, causal)
    row = {"b": b, "seq": s, "h": h, "d": d, "causal": causal}

    def sdpa(backend):
        def f(i):
            q, k, v, _ = sets[i]
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                                      v.transpose(1, 2), is_causal=causal)
        return f

    def ours(env):
        def f(i):
            os.environ.update(env)
            q, k, v, o = sets[i]
            la(q, k, v, o, None, causal)
        return f

    fns = {}
    ref = None
    for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("fa2", SDPBackend.FLASH_ATTENTION)):
        try:
            out = sdpa(backend)(0)
            torch.cuda.synchronize()
            if name == "cudnn":
                ref = out.transpose(1, 2).float()
            fns[name] = sdpa(backend)
        except Exception as ex:  # a backend may refuse a shape
            row[name] = None
            print(f"  {name} failed: {str(ex)[:120]}", file=sys.stderr)
    for vname, env in variants:
        f = ours(env)
        sets[0][3].fill_(float("nan"))
        f(0)
        torch.cuda.synchronize()
        if ref is not None:
            row["maxdiff_" + vname] = (sets[0][3].float() - ref).abs().max().item()
        fns[vname] = f
    for k, ms in time_interleaved(fns, nsets, sequential=sequential).items():
        row[k] = flops / ms / 1e9
    del sets
    torch.cuda.empty_cache()
    return row


def run_feature_shape(la, b, s, h, d, causal, cfgs, l2_bytes):
    """Issue-5 features against the same shape without them, interleaved on the same inputs.
    cfgs: (name, dict(softcap=, sinks=bool, wl=, wr=, chunk=)); TFLOP/s count visible pairs."""
    per_set = 4 * b * s * h * d * 2
    nsets = max(2, -(-3 * l2_bytes // per_set))
    gen = torch.Generator(device="cuda").manual_seed(2000 + s + d + int(causal))
    sets = input_sets(gen, nsets, b, s, h, h, d)
    sinks = torch.rand(h, device="cuda", dtype=torch.float32, generator=gen) * 4 - 1
    fns, flops = {}, {}
    for name, c in cfgs:
        kw = dict(softcap=c.get("softcap", 0.0), sinks=sinks if c.get("sinks") else None,
                  wl=c.get("wl", -1), wr=c.get("wr", -1), chunk=c.get("chunk", 0))

        # Softcap variant (src/cuda/sm90/softcap_mode.h); "" = the library's default.
        env = {"LONGATTN_SOFTCAP_MODE": c.get("mode", ""), "LONGATTN_SOFTCAP_POLY": "",
               "LONGATTN_TILE": c.get("tile", ""), "LONGATTN_PINGPONG": c.get("pingpong", ""),
               "LONGATTN_SOFTCAP_2WG": c.get("two_wg", "")}

        def f(i, kw=kw, env=env):
            os.environ.update(env)
            q, k, v, o = sets[i]
            la.ex(q, k, v, o, causal, **kw)
        sets[0][3].fill_(float("nan"))
        f(0)
        torch.cuda.synchronize()
        if torch.isnan(sets[0][3]).any().item():
            print(f"  {name}: NaN in the output (unwritten?)", file=sys.stderr)
        fns[name] = f
        flops[name] = 4.0 * b * h * d * visible_pairs_mask(s, s, causal, kw["wl"], kw["wr"], kw["chunk"])
    # cuDNN on the plain shape (a regression check of the dense kernels in the same process).
    if cfgs[0][0] == "plain" and s <= 16384:
        def cud(i):
            q, k, v, _ = sets[i]
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                                      v.transpose(1, 2), is_causal=causal)
        try:
            cud(0)
            torch.cuda.synchronize()
            fns["cuDNN (plain)"] = cud
            flops["cuDNN (plain)"] = flops["plain"]
            cfgs = list(cfgs) + [("cuDNN (plain)", {})]
        except Exception as ex:
            print(f"  cudnn failed: {str(ex)[:120]}", file=sys.stderr)
    rows = []
    ms = time_interleaved(fns, nsets)
    for name, _ in cfgs:
        rows.append({"b": b, "seq": s, "h": h, "d": d, "causal": causal, "variant": name,
                     "ms": ms[name], "tflops": flops[name] / ms[name] / 1e9})
    del sets
    torch.cuda.empty_cache()
    return rows


def ragged_rows(la, causal, l2_bytes):
    """64 sequences of 100..8k tokens (packed, one call) against dense batches of seq 4096
    with about the same tokens; TFLOP/s on visible pairs."""
    rng = random.Random(11)
    lens = [rng.randint(100, 8192) for _ in range(64)]
    total, h, d = sum(lens), 16, 128
    cu = torch.tensor([0] + list(__import__("itertools").accumulate(lens)), dtype=torch.int32, device="cuda")
    pairs = sum(visible_pairs_mask(n, n, causal) for n in lens)
    gen = torch.Generator(device="cuda").manual_seed(77)
    nsets = 2
    rs = [tuple(torch.randn(total, h, d, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(4))
          for _ in range(nsets)]
    bd = max(1, round(total / 4096))
    ds = [tuple(torch.randn(bd, 4096, h, d, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(4))
          for _ in range(nsets)]

    def fr(i):
        q, k, v, o = rs[i]
        la.ragged(q, k, v, o, cu, max(lens), causal)

    def fd(i):
        q, k, v, o = ds[i]
        la.ex(q, k, v, o, causal)
    rs[0][3].fill_(float("nan"))
    fr(0)
    torch.cuda.synchronize()
    if torch.isnan(rs[0][3]).any().item():
        print("  ragged: NaN in the output (unwritten?)", file=sys.stderr)
    variants = {  # name: (env, row label); the padded grid is the (batch x q-blocks of the longest) grid
        "padded": ({"LONGATTN_TILE_LIST": "0"}, "ragged, padded grid (LONGATTN_TILE_LIST=0)"),
        "cost": ({"LONGATTN_TILE_ORDER": "cost"}, "ragged, cost-sorted list (LONGATTN_TILE_ORDER=cost)"),
        "snake": ({"LONGATTN_DYNAMIC": "0"}, "ragged, list + static snake (LONGATTN_DYNAMIC=0)"),
    }
    fns = {"ragged": fr, "dense": fd}
    for name, (env, _) in variants.items():
        fns[name] = (lambda e: lambda i: with_env(e, lambda: fr(i)))(env)
    ms = time_interleaved(fns, nsets)
    fl_r = 4.0 * h * d * pairs
    fl_d = 4.0 * bd * h * d * visible_pairs_mask(4096, 4096, causal)
    out = [{"b": 64, "seq": total, "h": h, "d": d, "causal": causal, "variant": "ragged 64 x 100..8k",
            "ms": ms["ragged"], "tflops": fl_r / ms["ragged"] / 1e9},
           {"b": bd, "seq": 4096, "h": h, "d": d, "causal": causal, "variant": f"dense {bd} x 4096",
            "ms": ms["dense"], "tflops": fl_d / ms["dense"] / 1e9},
           ] + [{"b": 64, "seq": total, "h": h, "d": d, "causal": causal, "variant": label,
                 "ms": ms[name], "tflops": fl_r / ms[name] / 1e9} for name, (_, label) in variants.items()]
    del rs, ds
    torch.cuda.empty_cache()
    return out


def splitkv_rows(la):
    """Split-KV (schedule_rule.h kv_splits) on batch-1 calls with fewer tiles than half the SMs,
    interleaved with the same call unsplit (LONGATTN_SPLITS=0): a 512-query chunk against a
    64k-key prefix (8 / 1 heads, causal bottom-right: 32 tiles) and 2 / 1 heads at 4k queries x
    64k keys (non-causal: 48 tiles). TFLOP/s on visible pairs; vs_plain = split / unsplit."""
    out = []
    for (sq, sk, hq, hk, causal) in ((512, 65536, 8, 1, True), (4096, 65536, 2, 1, False)):
        gen = torch.Generator(device="cuda").manual_seed(5)
        sets = [(torch.randn(1, sq, hq, 128, device="cuda", dtype=torch.bfloat16, generator=gen),
                 torch.randn(1, sk, hk, 128, device="cuda", dtype=torch.bfloat16, generator=gen),
                 torch.randn(1, sk, hk, 128, device="cuda", dtype=torch.bfloat16, generator=gen),
                 torch.empty(1, sq, hq, 128, device="cuda", dtype=torch.bfloat16)) for _ in range(2)]

        def call(splits):
            def f(i):
                os.environ["LONGATTN_SPLITS"] = splits
                q, k, v, o = sets[i]
                la.ex(q, k, v, o, causal)
                os.environ["LONGATTN_SPLITS"] = ""
            return f
        ms = time_interleaved({"split": call(""), "nosplit": call("0")}, 2)
        fl = 4.0 * hq * 128 * visible_pairs_mask(sq, sk, causal)
        for name, key in (("split-KV (rule)", "split"), ("unsplit (LONGATTN_SPLITS=0)", "nosplit")):
            out.append({"b": 1, "seq": f"{sq}q x {sk}k, {hq}/{hk} heads", "h": hq, "d": 128, "causal": causal,
                        "variant": name, "ms": ms[key], "tflops": fl / ms[key] / 1e9,
                        "vs_plain": ms["nosplit"] / ms[key]})
        del sets
        torch.cuda.empty_cache()
    return out


def with_env(env, f):
    """Runs f() with the environment switches `env` set, then restores them (the library
    reads its switches at each call, on the host)."""
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return f()
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# Environment of each paged bench variant (tag in the row name).
PAGED_VARIANT_ENV = {"tilelist0": {"LONGATTN_TILE_LIST": "0"}, "vgroup0": {"LONGATTN_PAGED_VGROUP": "0"},
                     "kgroup0": {"LONGATTN_PAGED_KGROUP": "0"},
                     "tma": {"LONGATTN_PAGED_MODE": "tma"}, "lanes": {"LONGATTN_PAGED_MODE": "lanes"},
                     "gather": {"LONGATTN_PAGED_MODE": "gather"}}


def paged_rows(la, causal, l2_bytes, page_sizes=(16, 32, 64, 128, 256, 1024, 48, 100, 3)):
    """Paged K/V (shuffled page table over a pool with spare pages) against the same shape
    dense, interleaved on the same values (the pages hold the dense K/V rows permuted), plus
    the max |paged - dense| output difference. hdim 128, 4 x 8192, 16 heads. Page sizes
    below the 128-key tile load each tile as boxes of the largest power of two dividing the
    page (16: 8 boxes x 2 chunks = 16 TMAs per tile); sizes not dividing 8192 use seqused_k =
    8192 (the last page's tail is NaN: it must not leak)."""
    b, s, h, d = 4, 8192, 16, 128
    gen = torch.Generator(device="cuda").manual_seed(5)
    q = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=gen)
    k = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=gen)
    v = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16, generator=gen)
    od = torch.empty_like(q)
    fns = {"dense": lambda i: la.ex(q, k, v, od, causal)}
    outs = {}
    for ps in page_sizes:
        mp = (s + ps - 1) // ps
        npg = b * mp + 7
        perm = torch.randperm(npg, generator=torch.Generator().manual_seed(ps))[: b * mp]
        pt = perm.view(b, mp).to(torch.int32).cuda()
        kp = torch.full((npg, ps, h, d), float("nan"), device="cuda", dtype=torch.bfloat16)
        vp = torch.full_like(kp, float("nan"))
        pad = mp * ps - s
        kpad = torch.nn.functional.pad(k, (0, 0, 0, 0, 0, pad), value=float("nan")) if pad else k
        vpad = torch.nn.functional.pad(v, (0, 0, 0, 0, 0, pad), value=float("nan")) if pad else v
        kp[perm.cuda()] = kpad.reshape(b * mp, ps, h, d)
        vp[perm.cuda()] = vpad.reshape(b * mp, ps, h, d)
        used = torch.full((b,), s, device="cuda", dtype=torch.int32) if pad else None
        op = torch.full_like(q, float("nan"))
        outs[f"paged {ps}"] = op
        fns[f"paged {ps}"] = (lambda i, kp=kp, vp=vp, op=op, pt=pt, used=used:
                              la.paged(q, kp, vp, op, pt, causal, used))
        # Variants by environment switch, timed beside the default: the padded grid instead
        # of the tile list, the grouped V layout (one TMA per V box), and the paged producer
        # modes (page_math.h PagedMode; default: lanes + grouped V for boxes of 16+ rows under
        # the tile, gather below).
        tags = {16: ("kgroup0", "vgroup0", "tma", "gather"), 128: ("tilelist0",), 32: ("kgroup0", "vgroup0"),
                48: ("kgroup0",), 64: ("kgroup0",), 3: ("tma",)}.get(ps, ())
        for tag in tags:  # each variant its own output (its own max |diff|)
            env, ov = PAGED_VARIANT_ENV[tag], torch.full_like(q, float("nan"))
            outs[f"paged {ps} {tag}"] = ov
            fns[f"paged {ps} {tag}"] = (lambda i, kp=kp, vp=vp, ov=ov, pt=pt, used=used, env=env:
                                        with_env(env, lambda: la.paged(q, kp, vp, ov, pt, causal, used)))
    for f in fns.values():
        f(0)
    torch.cuda.synchronize()
    diffs = {name: (o.float() - od.float()).abs().max().item() for name, o in outs.items()}
    ms = time_interleaved(fns, 1)
    fl = 4.0 * b * h * d * visible_pairs_mask(s, s, causal)
    rows = []
    for name, t in ms.items():
        ps = int(name.split()[1]) if name != "dense" else 0
        tag = name.split()[2] if len(name.split()) > 2 else ""
        extra = "".join(f", {k}={v}" for k, v in PAGED_VARIANT_ENV[tag].items()) if tag else ""
        rows.append({"b": b, "seq": s, "h": h, "d": d, "causal": causal,
                     "variant": name if ps == 0 else f"paged, page {ps}{extra} (max |diff| vs dense {diffs[name]:.1e})",
                     "ms": t, "tflops": fl / t / 1e9, "vs_plain": ms["dense"] / t})
    del fns, outs
    torch.cuda.empty_cache()
    return rows


def split_rows(la, causal):
    """q / k head dim 192 with v head dim 128 (DeepSeek-style) against cuDNN on the same
    inputs where SDPA's cuDNN backend takes it, and against longattn's 128 / 128 dense kernel on
    the same shape; FLOPs 2 (d_qk + d_v) per visible pair. 4 x 8192, 16 heads."""
    b, s, h = 4, 8192, 16
    gen = torch.Generator(device="cuda").manual_seed(11)
    q = torch.randn(b, s, h, 192, device="cuda", dtype=torch.bfloat16, generator=gen)
    k = torch.randn(b, s, h, 192, device="cuda", dtype=torch.bfloat16, generator=gen)
    v = torch.randn(b, s, h, 128, device="cuda", dtype=torch.bfloat16, generator=gen)
    o = torch.full((b, s, h, 128), float("nan"), device="cuda", dtype=torch.bfloat16)
    q1, k1 = q[..., :128].contiguous(), k[..., :128].contiguous()
    o1 = torch.empty_like(o)
    fns = {"longattn 192/128": lambda i: la.split(q, k, v, o, causal),
           "longattn 128/128": lambda i: la.ex(q1, k1, v, o1, causal)}
    diff = float("nan")
    try:
        def cudnn(i):
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                      is_causal=causal)
        ref = cudnn(0).transpose(1, 2).float()
        fns["cudnn 192/128"] = cudnn
    except Exception as ex:
        ref = None
        print(f"  cudnn 192/128 refused: {str(ex)[:120]}", file=sys.stderr)
    la.split(q, k, v, o, causal)
    torch.cuda.synchronize()
    if ref is not None:
        diff = (o.float() - ref).abs().max().item()
    ms = time_interleaved(fns, 1)
    pairs = visible_pairs_mask(s, s, causal)
    rows = []
    for name, t in ms.items():
        dd = (192 + 128) if "192" in name else 256
        rows.append({"b": b, "seq": s, "h": h, "d": 192 if "192" in name else 128, "causal": causal,
                     "variant": name + (f" (max |diff| vs cuDNN {diff:.1e})" if name.startswith("longattn 192") else ""),
                     "ms": t, "tflops": 2.0 * b * h * dd * pairs / t / 1e9,
                     "vs_plain": ms["cudnn 192/128"] / t if "cudnn 192/128" in ms else float("nan")})
    return rows


def paged_main(args, la, props, l2):
    rows = []
    for c in (False, True):
        try:
            for r in split_rows(la, c):
                print(f"  split {'causal' if c else 'full  '} {r['variant']:48s} {r['ms']:8.3f} ms "
                      f"{r['tflops']:6.1f} TFLOP/s  x{r['vs_plain']:.3f} (vs cuDNN 192/128)", flush=True)
                rows.append(r)
        except Exception as ex:
            print(f"  split rows failed: {ex}", file=sys.stderr)
    for c in (False, True):
        for r in paged_rows(la, c, l2):
            print(f"  d128 {'causal' if c else 'full  '} {r['variant']:48s} {r['ms']:8.3f} ms "
                  f"{r['tflops']:6.1f} TFLOP/s  x{r['vs_plain']:.3f}", flush=True)
            rows.append(r)
    with open(os.path.join(args.out, "bench_paged.json"), "w") as fh:
        json.dump({"device": props.name, "rows": rows}, fh, indent=1)
    print(f"\n{props.name} -- paged K/V vs dense, bf16, interleaved")
    print("| hdim | batch x seq | mask | variant | ms | TFLOP/s | vs dense (split 192/128 rows: vs cuDNN 192/128) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['d']} | {r['b']} x {r['seq']} | {'causal' if r['causal'] else 'full'} | {r['variant']} | "
              f"{r['ms']:.3f} | {r['tflops']:.0f} | {r['vs_plain']:.2f} |")


def gqa_rows(la, l2_bytes):
    """Packed GQA (src/cuda/sm90/pack_gqa.h) on short query chunks against a long KV prefix:
    32 / 8 heads, hdim 128, seq_q 16..512 x seq_k 8192, causal bottom-right (chunked prefill),
    interleaved on the same inputs: longattn packed (LONGATTN_PACK_GQA=1), unpacked (=0), the
    rule's choice, and cuDNN (SDPA, enable_gqa; bottom-right causal through causal_lower_right;
    "-" if it refuses). TFLOP/s on visible pairs; vs_plain = packed / unpacked."""
    out = []
    shapes = [(4, sq, 8192, True) for sq in (16, 64, 128, 512)]
    # Batch 16 / 8: more unpacked tiles than SMs (where the rule packs); batch 1: the unpacked
    # call splits the keys (the rule does not pack).
    shapes += [(16, 16, 8192, True), (16, 64, 8192, True), (8, 16, 8192, True), (4, 16, 8192, False),
               (1, 64, 8192, True)]
    hq, hk, d = 32, 8, 128
    for (b, sq, sk, causal) in shapes:
        per_set = 2 * (2 * b * sq * hq * d + 2 * b * sk * hk * d)  # bytes of q, out, k, v
        nsets = max(2, -(-3 * l2_bytes // per_set))
        gen = torch.Generator(device="cuda").manual_seed(3000 + sq + b)
        sets = [(torch.randn(b, sq, hq, d, device="cuda", dtype=torch.bfloat16, generator=gen),
                 torch.randn(b, sk, hk, d, device="cuda", dtype=torch.bfloat16, generator=gen),
                 torch.randn(b, sk, hk, d, device="cuda", dtype=torch.bfloat16, generator=gen),
                 torch.empty(b, sq, hq, d, device="cuda", dtype=torch.bfloat16)) for _ in range(nsets)]

        def ours(pack):
            def f(i):
                os.environ["LONGATTN_PACK_GQA"] = pack
                q, k, v, o = sets[i]
                la(q, k, v, o, None, causal)
                os.environ["LONGATTN_PACK_GQA"] = ""
            return f
        fns = {"packed": ours("1"), "unpacked": ours("0"), "rule": ours("")}
        outs = {}
        for name, f in fns.items():
            sets[0][3].fill_(float("nan"))
            f(0)
            torch.cuda.synchronize()
            outs[name] = sets[0][3].float().clone()
        # SDPA's is_causal is top-left for sq != sk; bottom-right needs a mask. Tried in order:
        # cuDNN with causal_lower_right, cuDNN with a boolean (sq, sk) mask, FA2 with
        # causal_lower_right; the first that runs is the comparison row (named in the table).
        tries = [("cuDNN enable_gqa", SDPBackend.CUDNN_ATTENTION, None)]
        if causal:
            from torch.nn.attention.bias import causal_lower_right
            lr = causal_lower_right(sq, sk)
            boolm = torch.ones(sq, sk, dtype=torch.bool, device="cuda").tril(diagonal=sk - sq)
            tries = [("cuDNN enable_gqa, causal_lower_right", SDPBackend.CUDNN_ATTENTION, lr),
                     ("cuDNN enable_gqa, bool mask", SDPBackend.CUDNN_ATTENTION, boolm),
                     ("FA2 enable_gqa, causal_lower_right", SDPBackend.FLASH_ATTENTION, lr)]
        ref, sdpa_name = None, None
        for label, backend, mask in tries:
            def cud(i, backend=backend, mask=mask):
                q, k, v, _ = sets[i]
                with sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                          attn_mask=mask, enable_gqa=True)
            try:
                ref = cud(0).transpose(1, 2).float()
                torch.cuda.synchronize()
                fns["cudnn"] = cud
                sdpa_name = label
                break
            except Exception as ex:
                print(f"  {label} failed ({b} x {sq} q): {str(ex)[:160]}", file=sys.stderr)
        ms = time_interleaved(fns, nsets)
        fl = 4.0 * b * hq * d * visible_pairs_mask(sq, sk, causal)
        diff = (outs["packed"] - outs["unpacked"]).abs().max().item()
        for name in ("packed", "unpacked", "rule", "cudnn"):
            if name not in ms:
                continue
            r = {"b": b, "seq": f"{sq}q x {sk}k, {hq}/{hk} heads", "h": hq, "d": d, "causal": causal,
                 "variant": {"packed": "longattn packed", "unpacked": "longattn unpacked",
                             "rule": "longattn (rule)", "cudnn": sdpa_name}[name],
                 "ms": ms[name], "tflops": fl / ms[name] / 1e9, "vs_plain": ms["unpacked"] / ms[name],
                 "maxdiff_packed_unpacked": diff}
            if ref is not None and name != "cudnn":
                r["maxdiff_cudnn"] = (outs[name] - ref).abs().max().item()
            out.append(r)
        del sets
        torch.cuda.empty_cache()
    return out


def gqa_main(args, la, props, l2):
    rows = gqa_rows(la, l2)
    with open(os.path.join(args.out, "bench_gqa.json"), "w") as fh:
        json.dump({"device": props.name, "rows": rows}, fh, indent=1)
    print(f"\n{props.name} -- packed GQA, bf16, interleaved; TFLOP/s on visible pairs (causal bottom-right)")
    print("| batch | shape | mask | variant | ms | TFLOP/s | vs unpacked | max diff vs cuDNN | packed - unpacked |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        md = r.get("maxdiff_cudnn")
        print(f"| {r['b']} | {r['seq']} | {'causal' if r['causal'] else 'full'} | {r['variant']} | {r['ms']:.3f} | "
              f"{r['tflops']:.0f} | {r['vs_plain']:.2f} | {'-' if md is None else f'{md:.1e}'} | "
              f"{r['maxdiff_packed_unpacked']:.1e} |")


def features_main(args, la, props, l2):
    both = {"softcap": 30.0, "sinks": True}
    # Softcap A/B: every mode of src/cuda/sm90/softcap_mode.h on the same inputs (the rows
    # without "mode" run the library's default, fixed); fixed8 / fixedx / fixedx8 / fixedh / fixed8h / fused8
    # compile at hdim 128 (and on the two-warpgroup hdim-64 tile, LONGATTN_SOFTCAP_2WG=1).
    modes = ["split", "fused", "fixed", "fixed8", "fixedx", "fixedx8", "fixedh", "fixed8h", "fused8", "fixed4h", "fixed12h"]
    capped = [(f"sinks+softcap [{m}]", {**both, "mode": m}) for m in modes]
    dense = [("plain", {}), ("sinks", {"sinks": True}), ("softcap", {"softcap": 30.0}), ("sinks+softcap", both)] + capped
    other_d = [dense[0], dense[3]] + [r for r in capped if r[1]["mode"] in ("split", "fused")]
    # hdim 64: the dense three-warpgroup tile (fused only) against the ragged two-warpgroup
    # tile, where every mode compiles (fixed4h / fixed12h run there as fixed with 4 / 12 of 16
    # exp2 groups on the FMA pipe: no halves in the ragged kernel).
    d64 = other_d + [(f"sinks+softcap [{m}], 2-WG tile", {**both, "mode": m, "two_wg": "1"})
                     for m in ("fused", "fused8", "fixed", "fixed4h", "fixed8", "fixed12h")]
    # The feature kernel runs the 128 x 128 tile; the plain dense kernel 128 x 176 without mask.
    dense.insert(1, ("plain, 128 x 128 tile", {"tile": "1"}))
    # Whether the ping-pong coupling of the two consumer warpgroups is what softcap's longer
    # softmax runs into.
    dense.append(("sinks+softcap [fixed], no ping-pong", {**both, "mode": "fixed", "pingpong": "0"}))
    dense.append(("sinks+softcap [fixed8h], no ping-pong", {**both, "mode": "fixed8h", "pingpong": "0"}))
    dense.append(("plain, no ping-pong", {"pingpong": "0"}))
    shapes = [(2, 8192, 16, 128, False, dense), (2, 8192, 16, 128, True, dense),
              (2, 8192, 16, 64, False, d64), (2, 8192, 16, 256, False, other_d),
              (1, 65536, 16, 128, True, [("plain", {}), ("window 4096", {"wl": 4096}),
                                         ("window 4096 + sinks + softcap", {"wl": 4096, **both}),
                                         ("window 4096 + sinks + softcap [split]", {"wl": 4096, **both, "mode": "split"}),
                                         ("window 4096 + sinks + softcap [fused]", {"wl": 4096, **both, "mode": "fused"}),
                                         ("chunk 8192", {"chunk": 8192})]),
              (1, 16384, 16, 128, False, [("plain", {}), ("window 2048 both sides", {"wl": 2048, "wr": 2048})])]
    rows = []
    for (b, s, h, d, c, cfgs) in shapes:
        rs = run_feature_shape(la, b, s, h, d, c, cfgs, l2)
        base = rs[0]["tflops"]
        for r in rs:
            r["vs_plain"] = r["tflops"] / base
            print(f"  d{d} seq {s:5d} {'causal' if c else 'full  '} {r['variant']:40s} {r['ms']:8.3f} ms "
                  f"{r['tflops']:6.1f} TFLOP/s  x{r['vs_plain']:.3f}", flush=True)
        rows.extend(rs)
    for c in (False, True):
        try:
            rr = ragged_rows(la, c, l2)
            for r in rr:
                r["vs_plain"] = r["tflops"] / rr[1]["tflops"]
                print(f"  d128 {'causal' if c else 'full  '} {r['variant']:32s} {r['ms']:8.3f} ms "
                      f"{r['tflops']:6.1f} TFLOP/s  x{r['vs_plain']:.3f}", flush=True)
            rows.extend(rr)
        except Exception as ex:
            print(f"  ragged rows failed: {ex}", file=sys.stderr)
    try:
        for r in splitkv_rows(la):
            print(f"  d128 {'causal' if r['causal'] else 'full  '} {r['seq']} {r['variant']:28s} {r['ms']:8.3f} ms "
                  f"{r['tflops']:6.1f} TFLOP/s  x{r['vs_plain']:.3f}", flush=True)
            rows.append(r)
    except Exception as ex:
        print(f"  split-KV rows failed: {ex}", file=sys.stderr)
    for c in (False, True):
        try:
            rows.extend(paged_rows(la, c, l2))
        except Exception as ex:
            print(f"  paged rows failed: {ex}", file=sys.stderr)
    with open(os.path.join(args.out, "bench_features.json"), "w") as fh:
        json.dump({"device": props.name, "rows": rows}, fh, indent=1)
    print(f"\n{props.name} -- issue-5 features, TFLOP/s on visible (query, key) pairs, bf16, "
          "interleaved with the same shape without the feature (plain)")
    print("| hdim | batch x seq | mask | variant | ms | TFLOP/s | vs plain (ragged: vs dense) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['d']} | {r['b']} x {r['seq']} | {'causal' if r['causal'] else 'full'} | {r['variant']} | "
              f"{r['ms']:.3f} | {r['tflops']:.0f} | {r['vs_plain']:.2f} |")


def visible_pairs_fast(sq, sk, causal):
    """Closed form of visible_pairs (bottom-right causal) for long sequences."""
    if not causal:
        return sq * sk
    off = sk - sq
    # rows i with i + off + 1 in [1, sk]: sum of (i + off + 1); rows past sk see all sk keys.
    lo = max(0, -off)                      # first row that sees a key
    hi = min(sq, sk - off)                 # rows [lo, hi) see i + off + 1 keys
    tot = 0
    if hi > lo:
        a, b = lo + off + 1, hi - 1 + off + 1
        tot += (a + b) * (hi - lo) // 2
    tot += max(0, sq - max(hi, lo)) * sk
    return tot


def run_long_shape(la, b, s, hq, hk, d, causal, variants, iters):
    """One long-context shape: cuDNN (SDPA, GQA expanded if it refuses enable_gqa) and the
    longattn variants, interleaved on the same inputs, 2 input sets."""
    nsets = 2
    gen = torch.Generator(device="cuda").manual_seed(3000 + s + int(causal))
    sets = input_sets(gen, nsets, b, s, hq, hk, d)
    flops = 4.0 * b * hq * d * visible_pairs_fast(s, s, causal)
    row = {"b": b, "seq": s, "hq": hq, "hk": hk, "d": d, "causal": causal}
    fns, ref = {}, None
    gqa_mode = None

    def cud(i):
        q, k, v, _ = sets[i]
        qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            if gqa_mode == "native" or hq == hk:
                return F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal,
                                                      **({"enable_gqa": True} if hq != hk else {}))
            g = hq // hk
            return F.scaled_dot_product_attention(qt, kt.repeat_interleave(g, 1), vt.repeat_interleave(g, 1),
                                                  is_causal=causal)
    for mode in ("native", "expanded"):
        gqa_mode = mode
        try:
            ref = cud(0).transpose(1, 2)
            torch.cuda.synchronize()
            fns["cudnn"] = cud
            row["cudnn_gqa"] = mode
            break
        except Exception as ex:
            print(f"  cudnn ({mode}) failed: {str(ex)[:120]}", file=sys.stderr)
    for vname, env in variants:
        def f(i, env=env):
            os.environ.update(env)
            q, k, v, o = sets[i]
            la(q, k, v, o, None, causal)
        sets[0][3].fill_(float("nan"))
        f(0)
        torch.cuda.synchronize()
        if ref is not None:
            row["maxdiff_" + vname] = (sets[0][3].float() - ref.float()).abs().max().item()
        fns[vname] = f
    del ref
    for k, ms in time_interleaved(fns, nsets, warmup=1, iters=iters).items():
        row[k] = flops / ms / 1e9
        row["ms_" + k] = ms
    del sets
    torch.cuda.empty_cache()
    return row


def long_main(args, la, props, l2):
    """Issue 6: batch 1, 32 query heads / 8 kv heads, hdim 128, seq 8k..256k, and the short
    causal 1k shape (batch 16, 16 heads), vs cuDNN; extra variants = scheduler switches."""
    # Every variant resets every switch (os.environ.update persists between calls: a base
    # without LONGATTN_TILE / LONGATTN_DYNAMIC would time "longattn" with the previous
    # variant's setting once that variant has run).
    base = {**SCHED_BASE, "LONGATTN_TILE": ""}
    variants = [("longattn", base), ("nosections", {**base, "LONGATTN_SECTIONS": "0"}),
                ("dynamic", {**base, "LONGATTN_DYNAMIC": "1"})]  # the atomic counter (default: >= 192k keys)
    extra = os.environ.get("LONG_VARIANTS", "")  # "name:ENV=V,ENV2=V;name2:..."
    for item in filter(None, extra.split(";")):
        name, _, kv = item.partition(":")
        variants.append((name, {**base, **dict(x.split("=", 1) for x in kv.split(",") if x)}))
    seqs = [int(x) for x in os.environ.get("LONG_SEQS", "8192,16384,32768,65536,131072,262144").split(",")]
    shapes = [(16, 1024, 16, 16, True), (16, 1024, 16, 16, False)]
    shapes += [(1, s, 32, 8, c) for c in (False, True) for s in seqs]
    rows = []
    for (b, s, hq, hk, c) in shapes:
        iters = 12 if s <= 16384 else (6 if s <= 65536 else 3)
        r = run_long_shape(la, b, s, hq, hk, 128, c, variants, iters)
        rows.append(r)
        print(f"  b{b} seq {s:6d} {hq}/{hk} {'causal' if c else 'full  '}: cudnn {r.get('cudnn', 0):6.1f} "
              + " ".join(f"{v} {r[v]:6.1f}" for v, _ in variants)
              + f" ratio {r['longattn'] / r['cudnn'] if r.get('cudnn') else float('nan'):.3f}"
              + f" maxdiff {r.get('maxdiff_longattn', float('nan')):.2e}", flush=True)
        with open(os.path.join(args.out, "bench_long.json"), "w") as fh:
            json.dump({"device": props.name, "rows": rows}, fh, indent=1)
    print(f"\n{props.name} -- long context, bf16 hdim 128, TFLOP/s (mask-aware), interleaved")
    print("| batch | seq | heads q/kv | mask | cuDNN | longattn | ratio | " + " | ".join(v for v, _ in variants[1:]) + " | max abs diff |")
    print("|---|---|---|---|---|---|---|" + "---|" * (len(variants) - 1) + "---|")
    for r in rows:
        cud = r.get("cudnn")
        print(f"| {r['b']} | {r['seq']} | {r['hq']}/{r['hk']} | {'causal' if r['causal'] else 'full'} | "
              f"{cud or 0:.0f} | {r['longattn']:.0f} | {r['longattn'] / cud if cud else float('nan'):.2f} | "
              + " | ".join(f"{r[v]:.0f}" for v, _ in variants[1:])
              + f" | {r.get('maxdiff_longattn', float('nan')):.1e} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out", default=".")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--features", action="store_true", help="only the issue-5 feature rows")
    ap.add_argument("--paged", action="store_true", help="only the paged K/V rows (vs dense)")
    ap.add_argument("--long", action="store_true", help="only the issue-6 long-context rows")
    ap.add_argument("--gqa", action="store_true", help="only the packed-GQA rows (short seq_q, 32/8 heads)")
    ap.add_argument("--sequential", action="store_true",
                    help="time each implementation back to back (cuDNN first) instead of interleaved")
    args = ap.parse_args()
    props = torch.cuda.get_device_properties(0)
    l2 = getattr(props, "L2_cache_size", 50 << 20)
    print(f"device: {props.name}, {props.multi_processor_count} SMs, L2 {l2 >> 20} MB, "
          f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    la = LongAttn(args.lib)
    if args.paged:
        paged_main(args, la, props, l2)
        return
    if getattr(args, "long"):
        long_main(args, la, props, l2)
        return
    if args.gqa:
        gqa_main(args, la, props, l2)
        return
    if args.features:
        features_main(args, la, props, l2)
        return
    # "lazy" is the shipped default; each other variant changes one design choice.
    base = {"LONGATTN_RESCALE_THRESHOLD": "8", "LONGATTN_PINGPONG": "1", "LONGATTN_TILE": "0",
            "LONGATTN_SECTIONS": ""}
    variants = [("lazy", base),
                ("always", {**base, "LONGATTN_RESCALE_THRESHOLD": "0"}),
                ("nopingpong", {**base, "LONGATTN_PINGPONG": "0"}),
                ("causaltile", {**base, "LONGATTN_TILE": "1"}),
                ("widetile", {**base, "LONGATTN_TILE": "2"}),
                ("deep3", {**base, "LONGATTN_TILE": "3"}),
                ("singleq", {**base, "LONGATTN_TILE": "4"}),
                ("nosections", {**base, "LONGATTN_SECTIONS": "0"}),
                ("v5", {**base, "LONGATTN_TILE": "5"})]
    shapes = []
    seqs = [1024, 2048, 4096, 8192, 16384] if not args.quick else [2048, 8192]
    for causal in (False, True):
        for s in seqs:
            shapes.append((16384 // s, s, 16, 128, causal))
    for d in (64, 256):
        for causal in (False, True):
            shapes.append((2, 8192, 16, d, causal))
    rows = []
    for (b, s, h, d, c) in shapes:
        r = run_shape(la, b, s, h, d, c, torch.bfloat16, l2, variants, args.sequential)
        rows.append(r)
        print(f"  d{d} seq {s:5d} {'causal' if c else 'full  '}: cudnn {r['cudnn'] or 0:6.1f} fa2 {r['fa2'] or 0:6.1f} "
              + " ".join(f"{v} {r[v]:6.1f}" for v, _ in variants)
              + f" ratio {r['lazy'] / (r['cudnn'] or float('nan')):.3f} maxdiff {r.get('maxdiff_lazy', float('nan')):.2e}",
              flush=True)
    tag = "_sequential" if args.sequential else ""
    with open(os.path.join(args.out, f"bench{tag}.json"), "w") as fh:
        json.dump({"device": props.name, "rows": rows}, fh, indent=1)

    print(f"\n{props.name} -- {'sequential' if args.sequential else 'interleaved'} timing -- TFLOP/s (bf16, mask-aware); longattn = shipped default (lazy rescale, "
          f"ping-pong, table tiles); ratio = longattn / cuDNN; other columns change one choice")
    print("| hdim | seq | mask | cuDNN | FA2 | longattn | ratio | always-rescale | no ping-pong | 128x128 tile | 128x192 tile | 128x128 3-stage | 128x128 one Q buffer | causal: no L2 sections | hdim256: 128x64 sectioned | max abs diff |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        cud = r["cudnn"]
        f = lambda x: f"{x:.0f}" if x else "-"
        print(f"| {r['d']} | {r['seq']} | {'causal' if r['causal'] else 'full'} | {f(cud)} | {f(r['fa2'])} | "
              f"{r['lazy']:.0f} | {r['lazy'] / cud if cud else float('nan'):.2f} | {r['always']:.0f} | "
              f"{r['nopingpong']:.0f} | {r['causaltile']:.0f} | {r['widetile']:.0f} | {r['deep3']:.0f} | {r['singleq']:.0f} | {r['nosections']:.0f} | {r['v5']:.0f} | {r.get('maxdiff_lazy', float('nan')):.1e}"
              + ("" if r.get("maxdiff_lazy", 1.0) < 0.05 else " WRONG") + " |")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
        for ax, c in zip(axes, (False, True)):
            rs = [r for r in rows if r["d"] == 128 and r["causal"] == c]
            xs = [str(r["seq"]) for r in rs]
            for key, lab in (("cudnn", "cuDNN"), ("fa2", "FlashAttention-2"), ("lazy", "longattn"),
                             ("always", "longattn always-rescale"), ("nopingpong", "longattn no ping-pong")):
                ax.plot(xs, [r[key] or 0 for r in rs], marker="o", label=lab)
            ax.set_title(f"hdim 128, 16 heads, batch*seq=16k, {'causal' if c else 'non-causal'}")
            ax.set_xlabel("seq")
            ax.set_ylabel("TFLOP/s")
            ax.grid(alpha=0.3)
            ax.legend()
        fig.suptitle(props.name)
        fig.tight_layout()
        fig.savefig(os.path.join(args.out, f"bench{tag}.png"), dpi=110)
    except Exception as ex:
        print("chart failed:", ex)


if __name__ == "__main__":
    main()
