"""Host overhead per call through Python (issue 16): CPU time of one call with the kernel
excluded, on the device. Tiny inputs (batch 1, 4 queries / 8 keys, 1 head, hdim 64, bf16) make
the kernel a few microseconds, so N back-to-back calls are bound by the host: the wall time of
the loop (no synchronization inside) and the process CPU time per call are what an eager or
compiled caller pays on top of the kernel. Median of several windows.

    python3 bench/gpu/host_overhead.py [--calls 2000] [--windows 7] [--eager]
    python3 bench/gpu/host_overhead.py --ab PKG_DIR [PKG_DIR ...] [--rounds 8]

--ab compares Python packages (directories holding longattn/) on one host: each round runs
this script with --json (eager rows; --compiled: the compiled ones too) once per package, each in a fresh process with that directory first
on PYTHONPATH, in alternating order; the table gives each package's median over the rounds
(one process's number moves by up to ~30% with the host's state, so single runs do not
compare). --eager (or --json) alone: the eager rows only (--json: as one JSON line).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch


def per_call(fn, calls, windows):
    """(median wall us, median CPU us) per call over `windows` windows of `calls` calls."""
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    wall, cpu = [], []
    for _ in range(windows):
        torch.cuda.synchronize()
        w0, c0 = time.perf_counter(), time.process_time()
        for _ in range(calls):
            fn()
        w1, c1 = time.perf_counter(), time.process_time()
        torch.cuda.synchronize()
        wall.append((w1 - w0) / calls * 1e6)
        cpu.append((c1 - c0) / calls * 1e6)
    return statistics.median(wall), statistics.median(cpu)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--windows", type=int, default=7)
    ap.add_argument("--eager", action="store_true", help="eager rows only")
    ap.add_argument("--json", action="store_true", help="eager rows only, as one JSON line {call: CPU us}")
    ap.add_argument("--ab", nargs="+", metavar="PKG_DIR", help="compare packages, alternating processes")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--compiled", action="store_true", help="with --ab / --json: the torch.compile'd rows too")
    a = ap.parse_args()
    if a.ab:
        return ab(a)
    import longattn.flash_attn_interface as fai

    dev = "cuda"
    q = torch.randn(1, 4, 1, 64, device=dev, dtype=torch.bfloat16)
    k = torch.randn(1, 8, 1, 64, device=dev, dtype=torch.bfloat16)
    v = torch.randn_like(k)
    kc = torch.randn(1, 64, 1, 64, device=dev, dtype=torch.bfloat16)
    vc = torch.randn_like(kc)
    seqlens = torch.full((1,), 32, device=dev, dtype=torch.int32)

    def dense():
        return fai.flash_attn_func(q, k, v, causal=True)

    def dense_lse():
        return fai.flash_attn_func(q, k, v, causal=True, return_attn_probs=True)

    cu = torch.tensor([0, 4], device=dev, dtype=torch.int32)
    cuk = torch.tensor([0, 8], device=dev, dtype=torch.int32)
    q0, k0, v0 = q[0], k[0], v[0]  # (tokens, heads, dim) views, made once

    def varlen():
        return fai.flash_attn_varlen_func(q0, k0, v0, cu, cuk, 4, 8, causal=True)

    def kvcache():
        return fai.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=seqlens, causal=True)

    cases = [("flash_attn_func", dense), ("flash_attn_func + LSE", dense_lse), ("flash_attn_varlen_func", varlen),
             ("flash_attn_with_kvcache", kvcache)]
    eager_cases = cases + [("torch `q + 1` (one allocation, one launch)", lambda: q + 1)]
    if a.json:
        res = {name: per_call(fn, a.calls, a.windows)[1] for name, fn in eager_cases}
        if a.compiled:
            for name, fn in cases:
                res[name + " (compiled)"] = per_call(torch.compile(fn, fullgraph=True), a.calls, a.windows)[1]
        print(json.dumps(res))
        return
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print("| call | mode | wall us / call | CPU us / call |")
    print("|---|---|---|---|")
    if a.eager:
        for name, fn in eager_cases:
            w, c = per_call(fn, a.calls, a.windows)
            print(f"| {name} | eager | {w:.1f} | {c:.1f} |", flush=True)
        return
    for name, fn in cases:
        for mode in ("eager", "compiled"):
            f = torch.compile(fn, fullgraph=True) if mode == "compiled" else fn
            w, c = per_call(f, a.calls, a.windows)
            print(f"| {name} | {mode} | {w:.1f} | {c:.1f} |", flush=True)
    t = torch.compile(lambda: q + 1, fullgraph=True)
    w, c = per_call(t, a.calls, a.windows)
    print(f"| torch.compile'd `q + 1` (torch's own floor) | compiled | {w:.1f} | {c:.1f} |")


def ab(a):
    """Eager CPU us per call of each package, alternating fresh processes, medians."""
    runs = {p: [] for p in a.ab}
    for r in range(a.rounds):
        order = a.ab if r % 2 == 0 else a.ab[::-1]
        for p in order:
            env = dict(os.environ, PYTHONPATH=p + os.pathsep + os.environ.get("PYTHONPATH", ""))
            cmd = [sys.executable, __file__, "--json", "--calls", str(a.calls), "--windows", str(a.windows)]
            out = subprocess.run(cmd + (["--compiled"] if a.compiled else []), env=env, capture_output=True, text=True,
                                 check=True).stdout
            runs[p].append(json.loads(out.strip().splitlines()[-1]))
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}; {a.rounds} rounds, CPU us "
          "per call, median over rounds (min-max)")
    calls = list(runs[a.ab[0]][0])
    print("| call | " + " | ".join(a.ab) + " |")
    print("|---|" + "---|" * len(a.ab))
    for c in calls:
        cells = []
        for p in a.ab:
            v = [x[c] for x in runs[p]]
            cells.append(f"{statistics.median(v):.1f} ({min(v):.1f}-{max(v):.1f})")
        print(f"| {c} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
