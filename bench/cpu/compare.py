"""longattn CPU vs PyTorch CPU scaled_dot_product_attention, side by side in one run.

Run through bench/cpu/run.sh (which builds cpu_bench and provides a venv with torch).
Prints the machine, its measured fp32 FMA peak (all threads) and one table row per shape:
GFLOP/s from the best of `reps` timed runs (on a shared machine the minimum is the run
least disturbed by other processes) with a mask-aware FLOP count (causal counts only the
visible query/key pairs),
% of the FMA peak, and the speed ratio. longattn's result on each shape is checked against
float64 on sampled rows by cpu_bench itself (column `err`).
"""
import argparse
import datetime
import os
import platform
import subprocess
import time

import torch
import torch.nn.functional as F


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def flops(d, s, b, h, causal):
    pairs = s * (s + 1) / 2 if causal else s * s
    return 4.0 * d * pairs * b * h


def torch_time(dtype, d, s, b, h, causal, reps, threads):
    """Best wall seconds and best process-CPU seconds of `reps` runs."""
    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(1234)
    q, k, v = (torch.rand(b, h, s, d, generator=g, dtype=torch.float32).mul_(2).sub_(1).to(dtype)
               for _ in range(3))
    best, best_cpu = float("inf"), float("inf")
    with torch.no_grad():
        F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # warm-up
        for _ in range(reps):
            t0, c0 = time.perf_counter(), time.process_time()
            F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            best = min(best, time.perf_counter() - t0)
            best_cpu = min(best_cpu, time.process_time() - c0)
    return best, best_cpu


def longattn_run(bench, dtype, d, s, b, h, causal, reps, threads):
    """Best wall seconds, sampled max error vs float64, pass flag, GFLOP per CPU-second."""
    out = subprocess.run([bench, "attn", dtype, str(d), str(s), str(b), str(h), str(int(causal)),
                          str(reps), str(threads)], capture_output=True, text=True)
    line = [l for l in out.stdout.splitlines() if l.startswith("longattn,")]
    if not line:
        raise RuntimeError(f"cpu_bench failed: {out.stdout}\n{out.stderr}")
    f = line[0].split(",")
    return float(f[7]), float(f[9]), out.returncode == 0, float(f[10])


def peaks(bench, threads):
    out = subprocess.run([bench, "peak", str(threads)], capture_output=True, text=True).stdout
    return {l.split(",")[1]: (float(l.split(",")[3]), float(l.split(",")[4]))
            for l in out.splitlines() if l.startswith("peak,")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True, help="path to the cpu_bench binary")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--tokens", type=int, default=8192, help="batch * seq per shape")
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--reps", type=int, default=2, help="timed runs per round")
    ap.add_argument("--rounds", type=int, default=2,
                    help="alternating longattn/torch rounds per shape (best run over all rounds)")
    ap.add_argument("--seqs", default="1024,2048,4096,8192")
    ap.add_argument("--dims", default="64,128")
    ap.add_argument("--dtypes", default="bf16,f32")
    args = ap.parse_args()

    print(f"# date   {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}")
    print(f"# cpu    {cpu_model()}, {os.cpu_count()} logical CPUs, using {args.threads} threads")
    print(f"# load   {os.getloadavg()[0]:.2f} (1-min average before the run; other processes share the cores)")
    print(f"# torch  {torch.__version__}, cpu capability {torch.backends.cpu.get_cpu_capability()}")
    pk = peaks(args.bench, args.threads)
    print(f"# shapes: batch*seq = {args.tokens}, {args.heads} heads (MHA), (batch, seq, heads, dim) for "
          f"longattn, (batch, heads, seq, dim) for torch; best of {args.rounds} x {args.reps} runs, "
          "the two frameworks alternating")
    print("# GF/s: wall-clock GFLOP/s on all threads. GF/cpu-s: GFLOP per CPU-second (all threads' CPU")
    print("#   time), i.e. what one core does while it runs: robust to other processes on the machine.")
    print("#   torch's OpenMP workers spin while waiting, which inflates its CPU time.")
    print("# %peak: longattn GF/cpu-s over the per-core FMA peak (GF/cpu-s of the FMA loop) measured")
    print(f"#   at the start: {max(v[1] for v in pk.values()):.1f}. bf16 runs on AMX tiles where the CPU has them,")
    print("#   so it can exceed the fp32 FMA peak.")
    print()
    hdr = ("dtype", "dim", "seq", "batch", "causal", "longattn GF/s", "longattn GF/cpu-s", "% peak",
           "torch GF/s", "torch GF/cpu-s", "ratio (wall)", "ratio (cpu-s)", "err")
    print("| " + " | ".join(hdr) + " |")
    print("|" + "---|" * len(hdr))
    tdt = {"bf16": torch.bfloat16, "f32": torch.float32}
    worst = worst_cpu = None
    for dt in args.dtypes.split(","):
        for d in map(int, args.dims.split(",")):
            for s in map(int, args.seqs.split(",")):
                b = max(1, args.tokens // s)
                for causal in (False, True):
                    fl = flops(d, s, b, args.heads, causal)
                    t_la = t_pt = c_pt = float("inf")
                    g_cpu_la, err, ok = 0.0, 0.0, True
                    for _ in range(args.rounds):
                        t, e, o, gc = longattn_run(args.bench, dt, d, s, b, args.heads, causal, args.reps,
                                                   args.threads)
                        t_la, err, ok, g_cpu_la = min(t_la, t), max(err, e), ok and o, max(g_cpu_la, gc)
                        tp, cp = torch_time(tdt[dt], d, s, b, args.heads, causal, args.reps, args.threads)
                        t_pt, c_pt = min(t_pt, tp), min(c_pt, cp)
                    g_la, g_pt, g_cpu_pt = fl / t_la / 1e9, fl / t_pt / 1e9, fl / c_pt / 1e9
                    ratio = g_la / g_pt
                    worst = ratio if worst is None else min(worst, ratio)
                    ratio_cpu = g_cpu_la / g_cpu_pt
                    worst_cpu = ratio_cpu if worst_cpu is None else min(worst_cpu, ratio_cpu)
                    print(f"| {dt} | {d} | {s} | {b} | {int(causal)} | {g_la:.1f} | {g_cpu_la:.1f} "
                          f"| {100 * g_cpu_la / max(v[1] for v in pk.values()):.0f}% | {g_pt:.1f} | {g_cpu_pt:.1f} "
                          f"| {ratio:.2f}x | {ratio_cpu:.2f}x | {err:.1e}{'' if ok else ' FAIL'} |", flush=True)
    # The peak again at the end: the best of both measurements is the machine's.
    for isa, (w, c) in peaks(args.bench, args.threads).items():
        pk[isa] = (max(w, pk[isa][0]), max(c, pk[isa][1]))
    print()
    for isa, (w, c) in pk.items():
        print(f"# fp32 FMA peak ({isa}): {w:.1f} GFLOP/s wall on {args.threads} threads, "
              f"{c:.1f} GFLOP per CPU-second per core (best of start and end of the run)")
    print(f"# worst longattn/torch ratio: {worst:.2f}x wall-clock, {worst_cpu:.2f}x per CPU-second")


if __name__ == "__main__":
    main()
