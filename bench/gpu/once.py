#!/usr/bin/env python3
"""One longattn call on random inputs, for profilers (ncu): a warm-up call, then the profiled one.

Usage: ncu -k regex:fwd_kernel -s 1 -c 1 --metrics ... python3 bench/gpu/once.py --lib LIB
       --batch 1 --seq 65536 --hq 32 --hk 8 --dim 128 [--causal] [--softcap 30 [--sinks]]
       [--window 4096 [--window-right 4096]] [--overrides "sections=0"] [--fa3 DIR]
--fp8 --cudnn runs cuDNN's fp8 SDPA graph (fp8.py, the .whl frontend; ncu -k regex:sm90|fmha|sdpa)
on a shape of the same size instead. --fa3 DIR runs FA3's kernel (DIR/libdew_flash_attn3.so through JAX, as bench.py) on the same
inputs instead of longattn's (ncu -k regex:flash).
--overrides takes a longattn_bench_set_overrides spec (keys in bench/gpu/longattn_capi.cpp:
sections, splits, tile_list, dynamic, pack_gqa, softcap_fixed, paged_fill, ...); ""
runs the shipped rules."""
import argparse
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from capi import LongAttn  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--lib", required=True)
ap.add_argument("--batch", type=int, default=1)
ap.add_argument("--seq", type=int, default=65536)
ap.add_argument("--hq", type=int, default=32)
ap.add_argument("--hk", type=int, default=8)
ap.add_argument("--dim", type=int, default=128)
ap.add_argument("--causal", action="store_true")
ap.add_argument("--softcap", type=float, default=0.0)
ap.add_argument("--sinks", action="store_true")
ap.add_argument("--window", type=int, default=-1, help="left window (causal: keys before the diagonal)")
ap.add_argument("--window-right", type=int, default=-1, help="right window (keys after the diagonal; not causal)")
ap.add_argument("--overrides", default="", help="longattn_bench_set_overrides spec")
ap.add_argument("--fp8", action="store_true", help="e4m3 q / k / v (descales 1), bf16 out")
ap.add_argument("--fa3", default="", help="run FA3's kernel from DIR instead (plain masks, bf16)")
ap.add_argument("--cudnn", action="store_true", help="with --fp8: run cuDNN's fp8 SDPA graph instead (fp8.py)")
a = ap.parse_args()
g = torch.Generator(device="cuda").manual_seed(1)
q = torch.randn(a.batch, a.seq, a.hq, a.dim, device="cuda", dtype=torch.bfloat16, generator=g)
k = torch.randn(a.batch, a.seq, a.hk, a.dim, device="cuda", dtype=torch.bfloat16, generator=g)
v = torch.randn(a.batch, a.seq, a.hk, a.dim, device="cuda", dtype=torch.bfloat16, generator=g)
o = torch.full_like(q, math.nan)
if a.fa3:
    from peers import FA3  # noqa: E402
    from shapes import Case  # noqa: E402
    fa3 = FA3(a.fa3)
    c = Case(a.batch, a.seq, a.seq, a.hq, a.hk, a.dim, a.causal, wl=a.window, wr=a.window_right)
    f = fa3.dense_fn(c)
    js = (fa3.to_jax(q), fa3.to_jax(k), fa3.to_jax(v))
    for _ in range(2):
        r = f(*js)
    r.block_until_ready()
    assert not torch.isnan(fa3.to_torch(r)).any().item(), "unwritten output"
    print("once: ok (FA3)")
    sys.exit(0)
if a.cudnn:
    from fp8 import CudnnFp8, make_fp8_set  # noqa: E402
    from shapes import Case  # noqa: E402
    assert a.fp8, "--cudnn runs the fp8 graph: pass --fp8"
    c = Case(a.batch, a.seq, a.seq, a.hq, a.hk, a.dim, a.causal, dtype="e4m3")
    s8 = make_fp8_set(c, 1)
    run = CudnnFp8().impl(c, s8, amax_o=4.0)
    for _ in range(2):
        run.call(0)
    torch.cuda.synchronize()
    print("once: ok (cuDNN fp8)")
    sys.exit(0)
la = LongAttn(a.lib)
sinks = torch.rand(a.hq, device="cuda", dtype=torch.float32, generator=g) * 4 - 1 if a.sinks else None
if a.fp8:
    q8, k8, v8 = (x.to(torch.float8_e4m3fn) for x in (q, k, v))
    ones = torch.ones(a.batch, a.hk, device="cuda", dtype=torch.float32)
with la.overrides(a.overrides):
    for _ in range(2):
        if a.fp8:
            la.fp8(q8, k8, v8, o, ones, ones, ones, a.causal)
        else:
            la.dense(q, k, v, o, a.causal, softcap=a.softcap, sinks=sinks, wl=a.window, wr=a.window_right)
torch.cuda.synchronize()
assert not torch.isnan(o).any().item(), "unwritten output"
print(f"once: ok (overrides '{a.overrides}')")
