"""Where the split overhead of context parallelism goes, on one GPU (issue 18).

For W simulated ranks of all_gather_kv (causal, 32 / 8 heads, hdim 128, bf16) it times each
rank's zigzag call over the gathered K/V in place (`cp_world`, what `_exec.run_all_gather_kv`
issues since session 15) and, for comparison, the reorder path it keeps for windows: the
per-chunk calls one by one (head-sliced views of the reordered keys), back to back, and the
K/V reorder (block copies, and the index gather). Each call's TFLOP/s is set against the
one call on the whole sequence; the sums over the one call are the split overheads without
exchange.

  python3 bench/gpu/cp_breakdown.py [--tokens 131072,262144] [--worlds 2,4,8] [--kv-groups 2]
"""

from __future__ import annotations

import argparse

import torch

import longattn
from longattn.distributed import _exec as E
from longattn.distributed import _plan as P
from longattn.distributed.simulate import SimComm, Simulation


def timed(fn, reps):
    """Median milliseconds of fn() by CUDA events, after one warm-up call."""
    fn()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b))
    return sorted(ts)[len(ts) // 2]


def pairs(nq, nk, mask):
    """Visible (query, key) pairs of a call: full, or causal aligned bottom-right / top-left."""
    if not mask.causal:
        return nq * nk
    if mask.top_left:
        m = min(nq, nk)
        return m * (m + 1) // 2 + max(0, nq - nk) * nk
    if nk >= nq:
        return nq * (nk - nq) + nq * (nq + 1) // 2
    return (nk * (nk + 1)) // 2


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", default="131072", help="comma-separated sequence lengths")
    ap.add_argument("--worlds", default="2,4,8")
    ap.add_argument("--kv-groups", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    for n in [int(x) for x in args.tokens.split(",")]:
        breakdown(args, n)


def breakdown(args, n):
    h, hk, d = 32, 8, 128
    g = torch.Generator(device="cpu").manual_seed(3)
    q = torch.randn((1, n, h, d), generator=g).to(torch.bfloat16).cuda()
    k = torch.randn((1, n, hk, d), generator=g).to(torch.bfloat16).cuda()
    v = torch.randn((1, n, hk, d), generator=g).to(torch.bfloat16).cuda()
    fl = 4.0 * d * h
    t1 = timed(lambda: longattn.forward(q, k, v, causal=True), args.reps)
    rate1 = fl * n * (n + 1) / 2 / (t1 * 1e-3) / 1e12
    print(f"device: {torch.cuda.get_device_name()}; one call {n} tokens causal: {t1:.2f} ms, {rate1:.0f} TFLOP/s")
    for world in [int(x) for x in args.worlds.split(",")]:
        sim = Simulation(q, k, v, world, method="all_gather_kv", causal=True, kv_groups=args.kv_groups,
                         return_lse=False)
        total_calls = total_ideal = total_reorder = total_rank = total_one = total_gather = total_cp = 0.0
        print(f"\nW = {world}, kv_groups {args.kv_groups}")
        print("| rank | q rows | keys | mask | ms | TFLOP/s | / one call |")
        print("|---|---|---|---|---|---|---|")
        for r in range(world):
            p = sim.probs[r]
            groups = p.kv_groups
            hkg, hqg = hk // groups, h // groups
            calls = P.all_gather_calls(p.layout, p.rank, p.world, tuple(p.segs), p.causal, p.window)
            copies, index = E.reorder_copies(p), E.global_order(p, q.device)
            comm = SimComm(r, world, sim.kps, sim.vps, sim.cache)
            flat = comm.all_gather_start(None, (0, hkg)).wait()
            qs = sim.qs[r]
            out = torch.empty_like(qs)

            def reorder(copies=copies):
                kw, vw = E.unpack_kv(flat, world, p.tokens, hkg, d, d, k.dtype)
                return E.to_sequence_order(kw, p, copies, index), E.to_sequence_order(vw, p, copies, index)

            t_re = timed(reorder, args.reps) * groups
            total_gather += timed(lambda: reorder(None), args.reps) * groups
            kg, vg = reorder()
            seg = p.segs[0]
            lg = world * seg.local_len
            fns = [lambda c=c: longattn.forward(
                E.q_view(qs, p, seg, c.q0, c.q1, slice(0, hqg)), E.packed_rows(kg, seg, lg, world, c.k0, c.k1),
                E.packed_rows(vg, seg, lg, world, c.k0, c.k1), out=E.q_view(out, p, seg, c.q0, c.q1, slice(0, hqg)),
                causal=c.mask.causal, top_left=c.mask.top_left, window_size=c.mask.window) for c in calls]
            for c, fn in zip(calls, fns):
                t = timed(fn, args.reps) * groups
                nq, nk, m = c.q1 - c.q0, c.k1 - c.k0, c.mask
                rate = fl * pairs(nq, nk, m) / (t * 1e-3) / 1e12
                ideal = fl * pairs(nq, nk, m) / (rate1 * 1e12) * 1e3
                total_calls += t
                total_ideal += ideal
                mk = "full" if not m.causal else ("causal TL" if m.top_left else "causal")
                print(f"| {r} | {nq} | {nk} | {mk} | {t:.2f} | {rate:.0f} | {t / ideal:.3f} |")

            # The rank's call in place (one per kv group): chunks r and 2W - 1 - r, whose queries
            # see (chunk id) c + their causal triangle of keys.
            kw, vw = E.unpack_kv(flat, world, p.tokens, hkg, d, d, k.dtype)
            t = timed(lambda: longattn.forward(qs[:, :, :hqg], kw, vw, out=out[:, :, :hqg], causal=True, cp_world=world,
                                               cp_rank=r), args.reps) * groups
            c = seg.chunk
            cp_pairs = sum(c * ch * c + c * (c + 1) // 2 for ch in (r, 2 * world - 1 - r))
            ideal = fl * cp_pairs / (rate1 * 1e12) * 1e3
            total_cp += t
            print(f"| {r} | {2 * c} | {2 * world * c} | cp_world (in place) | {t:.2f} | "
                  f"{fl * cp_pairs / (t * 1e-3) / 1e12:.0f} | {t / ideal:.3f} |")

            def one_stream():  # the reorder path's calls back to back
                for _ in range(groups):
                    for f in fns:
                        f()

            total_one += timed(one_stream, args.reps)
            total_reorder += t_re
            t_rank = timed(lambda: sim.run_rank(r), args.reps)  # the shipped path, pack included
            total_rank += t_rank
        print(f"calls {total_calls:.2f} ms (ideal {total_ideal:.2f}, {total_calls / t1 - 1:+.1%} over one call), "
              f"reorders {total_reorder:.2f} ms ({total_reorder / t1:.1%}; by index gather {total_gather:.2f}), whole ranks {total_rank:.2f} ms "
              f"({total_rank / t1 - 1:+.1%})")
        print(f"a rank's calls back to back: {total_one:.2f} ms ({total_one / t1 - 1:+.1%})")
        print(f"in place (cp_world, the shipped path), sum of ranks: {total_cp:.2f} ms ({total_cp / t1 - 1:+.1%})")
        del sim
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
