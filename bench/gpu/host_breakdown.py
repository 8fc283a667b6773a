"""Where the host time of one tiny longattn call goes (issue 16), on the device:

    python3 bench/gpu/host_breakdown.py

Same tiny inputs as host_overhead.py (batch 1, 4 queries / 8 keys, 1 head, hdim 64, bf16,
causal). Prints (1) per-call CPU time of each layer, outermost first: flash_attn_func,
torch_ops._forward, the extension call with a prebuilt tensor dict, torch.empty_like; (2) the
GPU side of one call (torch.profiler over 200 calls: kernels and CUDA API calls per call, GPU
time per call) -- if GPU time per call exceeds the host time, back-to-back loops measure the
GPU; (3) the Python functions under a torch.compile'd call (cProfile, top 12 by own time).
"""
import cProfile
import io
import pstats
import time
from collections import Counter

import torch

import longattn.flash_attn_interface as fai
import longattn.torch_ops as T


def per_call_us(fn, calls=2000, windows=5):
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(windows):
        torch.cuda.synchronize()
        c0 = time.process_time()
        for _ in range(calls):
            fn()
        c1 = time.process_time()
        torch.cuda.synchronize()
        best = min(best, (c1 - c0) / calls * 1e6)
    return best


def main():
    dev = "cuda"
    q = torch.randn(1, 4, 1, 64, device=dev, dtype=torch.bfloat16)
    k = torch.randn(1, 8, 1, 64, device=dev, dtype=torch.bfloat16)
    v = torch.randn_like(k)
    out = torch.empty_like(q)
    t = {"q": T._desc("q", q), "k": T._desc("k", k), "v": T._desc("v", v), "out": T._desc("out", out)}
    stream = T._stream(q)
    layers = [
        ("flash_attn_func", lambda: fai.flash_attn_func(q, k, v, causal=True)),
        ("torch_ops._forward", lambda: T._forward(q, k, v, causal=True)),
        ("extension call (prebuilt dict)", lambda: T._ext.forward(t, None, 0.0, True, False, -1, -1, 0, 0, 0, "cuda",
                                                                 stream, 0, False, True)),
        ("torch.empty_like", lambda: torch.empty_like(q)),
        ("4 x _desc", lambda: (T._desc("q", q), T._desc("k", k), T._desc("v", v), T._desc("out", out))),
    ]
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print("(1) CPU us per call, best of 5 windows of 2000")
    for name, fn in layers:
        print(f"  {name:34s} {per_call_us(fn):7.2f}")
    # (2) one call's GPU side
    n = 200
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            fai.flash_attn_func(q, k, v, causal=True)
        torch.cuda.synchronize()
    kernels, api, gpu_us = Counter(), Counter(), 0.0
    for e in prof.events():
        dt = getattr(e, "device_type", None)
        if dt is not None and "CUDA" in str(dt):
            kernels[e.name[:70]] += 1
            gpu_us += e.device_time if hasattr(e, "device_time") else e.cuda_time
        elif e.name.startswith("cuda") or e.name.startswith("cu"):
            api[e.name] += 1
    print(f"(2) per call: GPU time {gpu_us / n:.2f} us; device activities {dict((k2, c / n) for k2, c in kernels.items())}")
    print(f"    CUDA API calls per call: {dict((k2, c / n) for k2, c in api.items())}")
    # (3) the compiled call's Python functions
    f = torch.compile(lambda: fai.flash_attn_func(q, k, v, causal=True), fullgraph=True)
    print(f"(3) compiled call: {per_call_us(f):.2f} us CPU per call; cProfile of 2000 calls:")
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(2000):
        f()
    pr.disable()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(12)
    print("\n".join(s.getvalue().splitlines()[:32]))


if __name__ == "__main__":
    main()
