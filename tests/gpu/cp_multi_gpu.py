#!/usr/bin/env python3
"""Context parallelism on several GPUs of one host over NCCL (issue 18's multi-GPU check).

    torchrun --nproc-per-node W tests/gpu/cp_multi_gpu.py [--lengths 131072,262144,524288] [--iters 3]

(a) correctness, world size W: every rank's output and LSE of
    longattn.distributed.context_parallel_attn against float64 attention of the whole
    sequence (cut to the rank's zigzag shard), under the oracle rule of cp_one_gpu.py (error
    at most 2x that of the same computation done naively in bf16, + slack); the single-GPU
    call's error is printed beside it. bf16, 32 / 8 heads (GQA), hdim 128: dense causal and
    full, a causal left window, a ragged batch of mixed lengths; fp8 with descales (dense
    causal, within 1.5x the single fp8 call's error); both methods.
(b) speed: causal prefill of one sequence per length and head configuration (--heads, default
    32 / 8), hdim 128, bf16: time per call of each method (--kv-groups for the all-gather,
    --sm-margins for both) and of one GPU running the whole sequence in one call, interleaved
    in an order shuffled per round (CUDA events, the slowest rank, median of --iters rounds
    after a warm-up round); speedup, efficiency, and the cost model's prediction
    (cost_model.predict with the link and throughput it assumes).
Rank 0 prints; exit status 1 if (a) fails on any rank.
"""

import argparse
import os
import random
import statistics
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import longattn  # noqa: E402
import longattn.distributed as cp  # noqa: E402
from cp_one_gpu import attention, band_mask, max_err, once  # noqa: E402
from longattn.distributed import cost_model  # noqa: E402

HQ, HK, D = 32, 8, 128


def say(*a):
    if dist.get_rank() == 0:
        print(*a, flush=True)


def inputs(total, seed, dev, hq=None, hk=None):
    """The same bf16 q, k, v on every rank (one seed; Philox gives every device the same stream);
    HQ / HK heads unless given."""
    g = torch.Generator(device=dev).manual_seed(seed)
    mk = lambda h: torch.randn(total, h, D, generator=g, device=dev).to(torch.bfloat16)  # noqa: E731
    return mk(hq or HQ), mk(hk or HK), mk(hk or HK)


def check(dev, world, rank):
    """(a): returns the number of failed cases on this rank."""
    fails = 0
    scale = D ** -0.5
    unit = 2 * world
    cases = [  # name, sequence lengths (one dense sequence if a single int), causal, window
        ("dense causal", 4096, True, (-1, -1)),
        ("dense full", 4096, False, (-1, -1)),
        ("dense causal, left window 1000", 4096, True, (1000, -1)),
        ("ragged causal (4 sequences)", [1024, 3072, 512, 2048], True, (-1, -1)),
    ]
    if dev.type == "cpu":  # tiny sizes
        cases = [(nm, [x // 16 for x in ls] if isinstance(ls, list) else ls // 16, c, (w[0] // 16 if w[0] > 0 else -1, -1))
                 for nm, ls, c, w in cases]
    for name, lens, causal, window in cases:
        ragged = isinstance(lens, list)
        lens = [(x // unit) * unit for x in (lens if ragged else [lens])]
        total = sum(lens)
        q, k, v = inputs(total, 7, dev)
        cu = torch.tensor([0] + [sum(lens[: i + 1]) for i in range(len(lens))], dtype=torch.int32, device=dev)
        refs, ref_lses, nvs, nv_lses = [], [], [], []
        for i, n in enumerate(lens):  # float64 and naive-bf16 references per sequence
            a, b = int(cu[i]), int(cu[i + 1])
            pos = torch.arange(n, device=dev)
            vis = band_mask(pos, pos, causal, window)
            r, rl = attention(q[a:b], k[a:b], v[a:b], vis, scale)
            nv, nvl = attention(q[a:b], k[a:b], v[a:b], vis, scale, naive=True)
            refs.append(r), ref_lses.append(rl), nvs.append(nv), nv_lses.append(nvl)
        ref, ref_lse = torch.cat(refs, 0), torch.cat(ref_lses, 1)
        nv, nv_lse = torch.cat(nvs, 0), torch.cat(nv_lses, 1)
        # the single-GPU call on the whole sequence (for the printed comparison)
        if ragged:
            one, one_lse = longattn.forward(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=max(lens),
                                            max_seqlen_k=max(lens), causal=causal, window_size=window,
                                            return_lse=True)
        else:
            one, one_lse = longattn.forward(q[None], k[None], v[None], causal=causal, window_size=window,
                                            return_lse=True)
            one, one_lse = one[0], one_lse[0]
        sh = dict(cu_seqlens=cu) if ragged else {}
        take = lambda x, sd: cp.shard(x, rank, world, seq_dim=sd, **sh)  # noqa: E731
        ref_r, ref_lse_r, nv_r, nv_lse_r = take(ref, 0), take(ref_lse, 1), take(nv, 0), take(nv_lse, 1)
        one_r = take(one, 0)
        for method in ("all_gather_kv", "ring"):
            if ragged:
                lcu = cp.local_cu_seqlens(cu, world)
                out, lse = cp.context_parallel_attn(take(q, 0), take(k, 0), take(v, 0), causal=causal,
                                                    window_size=window, method=method, cu_seqlens=lcu,
                                                    return_lse=True)
            else:
                out, lse = cp.context_parallel_attn(take(q, 0)[None], take(k, 0)[None], take(v, 0)[None],
                                                    causal=causal, window_size=window, method=method,
                                                    return_lse=True)
                out, lse = out[0], lse[0]
            e, en, eo = max_err(out, ref_r), max_err(nv_r, ref_r), max_err(one_r, ref_r)
            le, len_ = max_err(lse, ref_lse_r), max_err(nv_lse_r, ref_lse_r)
            ok = e <= 2 * en + 2e-3 and le <= 2 * len_ + 1e-4
            errs = torch.tensor([e, le, float(not ok)], dtype=torch.float64, device=dev)
            dist.all_reduce(errs, op=dist.ReduceOp.MAX)
            fails += int(not ok)
            say(f"  {'ok  ' if errs[2] == 0 else 'FAIL'} W={world} {method:13s} {name}: out err {errs[0]:.2e} "
                f"(naive bf16 {en:.2e}, single GPU {eo:.2e}), lse err {errs[1]:.2e} (naive {len_:.2e}); "
                f"worst rank shown")
    return fails + check_fp8(dev, world, rank)


def check_fp8(dev, world, rank):
    """(a) for e4m3 shards with per-(sequence, kv head) descales, dense causal: every rank's
    bf16 output within 1.5x the single call's error against float64 of the dequantized inputs
    (+ 1e-2), its LSE within 1e-3 of the single call's."""
    n = (4096 if dev.type != "cpu" else 256) // (2 * world) * (2 * world)
    q, k, v = inputs(n, 9, dev)
    q8, k8, v8 = ((x.float() * 2).to(torch.float8_e4m3fn) for x in (q, k, v))
    g = torch.Generator(device=dev).manual_seed(4)
    qd, kd, vd = (torch.rand(1, HK, generator=g, device=dev) + 0.5 for _ in range(3))
    rep = HQ // HK
    qq = q8.double() * (qd[0] * kd[0]).double().repeat_interleave(rep)[None, :, None]
    vv = v8.double() * vd[0].double()[None, :, None]
    pos = torch.arange(n, device=dev)
    ref, _ = attention(qq, k8.double(), vv, band_mask(pos, pos, True, (-1, -1)), D ** -0.5)
    one, one_lse = longattn.forward(q8[None], k8[None], v8[None], causal=True, q_descale=qd, k_descale=kd,
                                    v_descale=vd, return_lse=True)
    take = lambda x, sd: cp.shard(x, rank, world, seq_dim=sd)  # noqa: E731
    ref_r, one_r, one_lse_r = take(ref, 0), take(one[0], 0), take(one_lse[0], 1)
    eo = max_err(one_r, ref_r)
    fails = 0
    for method in ("all_gather_kv", "ring"):
        out, lse = cp.context_parallel_attn(take(q8, 0)[None], take(k8, 0)[None], take(v8, 0)[None], causal=True,
                                            method=method, q_descale=qd, k_descale=kd, v_descale=vd,
                                            return_lse=True)
        e, le = max_err(out[0], ref_r), max_err(lse[0], one_lse_r)
        ok = out.dtype == torch.bfloat16 and e <= 1.5 * eo + 1e-2 and le <= 1e-3
        errs = torch.tensor([e, le, float(not ok)], dtype=torch.float64, device=dev)
        dist.all_reduce(errs, op=dist.ReduceOp.MAX)
        fails += int(not ok)
        say(f"  {'ok  ' if errs[2] == 0 else 'FAIL'} W={world} {method:13s} fp8 dense causal (descales): out err "
            f"{errs[0]:.2e} (single GPU {eo:.2e}), lse vs single {errs[1]:.2e}; worst rank shown")
    return fails


def timed_once(fn, together=True):
    """Seconds of one call of fn on this rank (cp_one_gpu.once: CUDA events); `together`: every
    rank starts it at a barrier (False: this rank alone)."""
    if together:
        dist.barrier()
    return once(fn, "cuda")


def speed(dev, world, rank, lengths, iters, margins=(0,), heads=((32, 8),), kv_groups=(None,)):
    """(b): per length and head configuration, every configuration (method, sm_margin, kv_groups
    of the all-gather) and the one-GPU call (rank 0 alone, the others wait) once per round, in
    an order shuffled per round (the same on every rank), `iters` rounds after a warm-up; each
    configuration's time is the slowest rank's, its median over the rounds."""
    say(f"\n(b) causal prefill, one sequence, hdim {D}, bf16: seconds per call (slowest rank, median of "
        f"{iters} interleaved rounds); one GPU = the whole sequence in one call on rank 0")
    say("| tokens | heads | method | kv_groups | sm_margin | W | s / call | one GPU s | speedup | efficiency | "
        "model speedup | model exposed comm ms |")
    say("|---|---|---|---|---|---|---|---|---|---|---|---|")
    rng = random.Random(5)  # the same order on every rank
    for hq, hk in heads:
        for n in lengths:
            n = n // (2 * world) * (2 * world)
            q, k, v = inputs(n, 11, dev, hq, hk)
            qr, kr, vr = (cp.shard(x, rank, world, seq_dim=0)[None] for x in (q, k, v))
            one = lambda: longattn.forward(q[None], k[None], v[None], causal=True)  # noqa: E731
            cfgs = [("all_gather_kv", g, m) for g in kv_groups for m in margins] + [("ring", None, m) for m in margins]
            fns = {c: (lambda c=c: cp.context_parallel_attn(qr, kr, vr, causal=True, method=c[0], kv_groups=c[1],
                                                            sm_margin=c[2])) for c in cfgs}
            times = {c: [] for c in cfgs}
            t1s = []
            order = cfgs + ["one"]
            for r in range(iters + 1):  # round 0: the warm-up
                rng.shuffle(order)
                for c in order:
                    if c == "one":
                        t = timed_once(one, together=False) if rank == 0 else 0.0
                        dist.barrier()
                        if r:
                            t1s.append(t)
                    else:
                        t = torch.tensor([timed_once(fns[c])], dtype=torch.float64, device=dev)
                        dist.all_reduce(t, op=dist.ReduceOp.MAX)
                        if r:
                            times[c].append(t.item())
            t1 = torch.tensor([statistics.median(t1s)], dtype=torch.float64, device=dev)
            dist.all_reduce(t1, op=dist.ReduceOp.MAX)
            t1 = t1.item()
            for c in cfgs:
                t = statistics.median(times[c])
                pred = cost_model.predict(c[0], world, n, hq, hk, D, kv_groups=c[1])
                sp = t1 / t
                g = "-" if c[0] == "ring" else c[1] or "default"
                say(f"| {n} | {hq}/{hk} | {c[0]} | {g} | {c[2]} | {world} | {t:.4f} | {t1:.4f} | {sp:.2f} | "
                    f"{sp / world:.3f} | {pred.speedup:.2f} | {pred.t_exposed * 1e3:.2f} |")
            del q, k, v, qr, kr, vr
            torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lengths", default="131072,262144,524288")
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--no-speed", action="store_true")
    ap.add_argument("--sm-margins", default="0", help="(b): comma-separated sm_margin values of the calls")
    ap.add_argument("--heads", default="32/8", help="(b): comma-separated heads_q/heads_kv configurations")
    ap.add_argument("--kv-groups", default="default",
                    help="(b): comma-separated kv_groups of the all-gather ('default': the documented rule)")
    ap.add_argument("--cpu", action="store_true", help="gloo + the CPU backend at tiny sizes (no speed part)")
    a = ap.parse_args()
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    if a.cpu:  # the script's own logic at tiny sizes: gloo and longattn's CPU backend
        global HQ, HK, D
        HQ, HK, D = 4, 2, 32
        dev = torch.device("cpu")
        dist.init_process_group("gloo")
        say(f"W={world}: CPU (gloo), torch {torch.__version__}")
    else:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
        dev = torch.device("cuda", torch.cuda.current_device())
        dist.init_process_group("nccl", device_id=dev)
        say(f"W={world}: {torch.cuda.get_device_name(dev)} x {world}, torch {torch.__version__}, "
            f"NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}")
    say("(a) every rank's output / LSE vs float64 attention of the whole sequence")
    fails = torch.tensor([check(dev, world, rank)], device=dev)
    dist.all_reduce(fails)
    if not a.no_speed and not a.cpu:
        speed(dev, world, rank, [int(x) for x in a.lengths.split(",") if x], a.iters,
              [int(x) for x in a.sm_margins.split(",") if x],
              [tuple(int(y) for y in x.split("/")) for x in a.heads.split(",") if x],
              [None if x == "default" else int(x) for x in a.kv_groups.split(",") if x])
    say(f"\ncp_multi_gpu: {'FAILED ' + str(int(fails.item())) + ' rank-case(s)' if fails.item() else 'all checks passed'}")
    dist.destroy_process_group()
    sys.exit(1 if fails.item() else 0)


if __name__ == "__main__":
    main()
