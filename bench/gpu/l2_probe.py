#!/usr/bin/env python3
"""One long attention shape, called a few times, for Nsight Compute's L2 / DRAM figures with
and without the scheduler's head sections (issue 6). Run it under ncu, once per variant:

  for v in "" "LONGATTN_SECTIONS=0"; do
    env $v ncu --kernel-name regex:fwd_kernel --launch-skip 2 --launch-count 1 \\
      --metrics lts__t_sector_hit_rate.pct,dram__bytes_read.sum,gpu__time_duration.sum \\
      python3 bench/gpu/l2_probe.py --lib BIN/liblongattn_capi.so --seq 131072 --causal
  done

Default shape: batch 1, 32 query heads / 8 kv heads, head dim 128, bf16 (the issue-6 shape).
Without ncu it prints the median time per call and TFLOP/s (a sanity check of the shape).
"""
import argparse
import ctypes
import statistics

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--seq", type=int, default=131072)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--calls", type=int, default=4)
    a = ap.parse_args()
    lib = ctypes.CDLL(a.lib)
    f = lib.longattn_bench_forward
    f.restype = ctypes.c_int
    f.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int] + [ctypes.c_int64] * 6 + \
        [ctypes.c_int, ctypes.c_float, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
    err = ctypes.create_string_buffer(512)
    g = torch.Generator(device="cuda").manual_seed(6)
    q = torch.randn(1, a.seq, a.heads, a.dim, device="cuda", dtype=torch.bfloat16, generator=g)
    k = torch.randn(1, a.seq, a.kv_heads, a.dim, device="cuda", dtype=torch.bfloat16, generator=g)
    v = torch.randn(1, a.seq, a.kv_heads, a.dim, device="cuda", dtype=torch.bfloat16, generator=g)
    o = torch.empty_like(q)
    st = torch.cuda.current_stream().cuda_stream
    ms = []
    for _ in range(a.calls):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        rc = f(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), None, 0, 1, a.seq, a.seq, a.heads,
               a.kv_heads, a.dim, int(a.causal), 0.0, st, err, 512)
        e.record()
        if rc != 0:
            raise RuntimeError(err.value.decode())
        e.synchronize()
        ms.append(s.elapsed_time(e))
    pairs = a.seq * (a.seq + 1) // 2 if a.causal else a.seq * a.seq
    t = statistics.median(ms)
    print(f"seq {a.seq} {'causal' if a.causal else 'full'} {a.heads}/{a.kv_heads} d{a.dim}: "
          f"{t:.3f} ms, {4.0 * a.heads * a.dim * pairs / t / 1e9:.0f} TFLOP/s")


if __name__ == "__main__":
    main()
