"""Host overhead per call through Python (issue 16): CPU time of one call with the kernel
excluded, on the device. Tiny inputs (batch 1, 4 queries / 8 keys, 1 head, hdim 64, bf16) make
the kernel a few microseconds, so N back-to-back calls are bound by the host: the wall time of
the loop (no synchronization inside) and the process CPU time per call are what an eager or
compiled caller pays on top of the kernel. Median of several windows.

    python3 bench/gpu/host_overhead.py [--calls 2000] [--windows 7]
"""
import argparse
import statistics
import time

import torch

import longattn.flash_attn_interface as fai


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
    a = ap.parse_args()
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

    def kvcache():
        return fai.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=seqlens, causal=True)

    cases = [("flash_attn_func", dense), ("flash_attn_func + LSE", dense_lse), ("flash_attn_with_kvcache", kvcache)]
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print("| call | mode | wall us / call | CPU us / call |")
    print("|---|---|---|---|")
    for name, fn in cases:
        for mode in ("eager", "compiled"):
            f = torch.compile(fn, fullgraph=True) if mode == "compiled" else fn
            w, c = per_call(f, a.calls, a.windows)
            print(f"| {name} | {mode} | {w:.1f} | {c:.1f} |", flush=True)
    t = torch.compile(lambda: q + 1, fullgraph=True)
    w, c = per_call(t, a.calls, a.windows)
    print(f"| torch.compile'd `q + 1` (torch's own floor) | compiled | {w:.1f} | {c:.1f} |")


if __name__ == "__main__":
    main()
