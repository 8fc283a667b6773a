"""Host overhead of one call through longattn's Python API (issue 16: target <= 20 us for
the dispatch itself).

    python bench/cpu/python_overhead.py          # after `pip install .` and torch

Method: small CPU tensors, so the kernel is (nearly) nothing: "empty" problems have
seq_q = 0 (validation runs, no row is computed), "1x1" one query and one key of head dim 64.
Each line is the thread CPU time per call (time.thread_time, so time the shared machine
spends in other processes is not counted), the best of 7 runs of N calls, plus the
wall-clock time of that run. torch.set_num_threads(1) and num_threads=1 keep the CPU backend
on the calling thread. The C++ side alone (validation + backend entry on an empty problem)
is the `ext.forward` line minus the binding: ~0.5 us measured in C++ directly.
"""

from __future__ import annotations

import time

import numpy as np
import torch

import longattn
import longattn.flash_attn_interface as fai
from longattn import _longattn as ext
from longattn import torch_ops

N, REPS = 20000, 7


def measure(fn, n=N):
    best = (float("inf"), 0.0)
    for _ in range(REPS):
        c0, w0 = time.thread_time(), time.perf_counter()
        for _ in range(n):
            fn()
        c, w = (time.thread_time() - c0) / n * 1e6, (time.perf_counter() - w0) / n * 1e6
        best = min(best, (c, w))
    return best


def main():
    torch.set_num_threads(1)
    print(f"longattn {longattn.__version__}, torch {torch.__version__}, numpy {np.__version__}")
    print(f"{'call':64} {'CPU us':>8} {'wall us':>8}")
    for seq in (0, 1):
        rows = []  # measured at the end of each iteration: the lambdas see this seq's tensors
        q, k, v = (torch.randn(1, seq, 2, 64) for _ in range(3))
        tag = "empty" if seq == 0 else "1x1"
        out = torch.empty_like(q)
        desc = {n: torch_ops._desc(n, t) for n, t in (("q", q), ("k", k), ("v", v), ("out", out))}
        rows.append((f"ext.forward, prebuilt descriptors ({tag})",
                     lambda: ext.forward(desc, None, 0.0, True, False, -1, -1, 0, 0, 0, "auto", 0, 1, False)))
        rows.append((f"flash_attn_func eager ({tag})",
                     lambda q=q, k=k, v=v: fai.flash_attn_func(q, k, v, causal=True, num_threads=1)))
        if seq == 0:
            rows.append(("flash_attn_func + return_attn_probs (empty)",
                         lambda: fai.flash_attn_func(q, k, v, causal=True, return_attn_probs=True, num_threads=1)))
            qr, kr = q[0], k[0]
            cu = torch.zeros(2, dtype=torch.int32)
            rows.append(("flash_attn_varlen_func (empty)",
                         lambda: fai.flash_attn_varlen_func(qr, kr, kr, cu, cu, 0, 0, causal=True, num_threads=1)))
            rows.append(("flash_attn_with_kvcache, int cache_seqlens (empty)",
                         lambda: fai.flash_attn_with_kvcache(q, k, v, cache_seqlens=0, causal=True, num_threads=1)))
            args = (q, k, v, None, None, None, None, None, 0, 0, None, None, None, None, None, 0.0, True,
                    -1, -1, 0, "auto", 1, 0)
            rows.append(("torch.ops.longattn.fwd, via the dispatcher (empty)", lambda: torch.ops.longattn.fwd(*args)))
            f = torch.compile(lambda q, k, v: fai.flash_attn_func(q, k, v, causal=True, num_threads=1),
                              fullgraph=True, backend="aot_eager")
            f(q, k, v)
            rows.append(("torch.compile(fullgraph, aot_eager) of flash_attn_func (empty)", lambda: f(q, k, v)))
            qn, kn, vn = (x.numpy() for x in (q, k, v))
            rows.append(("NumPy flash_attn_func (empty)",
                         lambda: fai.flash_attn_func(qn, kn, vn, causal=True, num_threads=1)))
        for name, fn in rows:
            c, w = measure(fn, N if "compile" not in name and "dispatcher" not in name else N // 4)
            print(f"{name:64} {c:8.2f} {w:8.2f}")


if __name__ == "__main__":
    main()
