#!/usr/bin/env python3
"""Per-tile costs from a `cta_clock.py --dump` file (issue 20): each CTA's tiles in order, a
tile's time = its end minus the previous tile's end (warpgroup 0), so the first tile of a CTA
(from the CTA's start) is reported apart. Per shape: tiles per CTA, then per key-block count
(causal, aligned: q-block m visits m + 1 blocks) the mean, spread and count of later tiles
and the first tiles' mean, and a least-squares fit time = a x blocks + b over the later
tiles (b: a tile's fixed cost). --sections "16x1024c=33,..." (the plan's pairs per L2
section, known to the caller) also splits each count by the tile's round inside its section
(the sectioned snake's tile ids: rank-major, pairs fastest). Where the dump has the first-S
times (the 16-bit kinds), each warpgroup's tile splits at its first S: the previous tile's end
(its epilogue, this tile's setup, Q / K waits, turn, first Q.K^T) and the rest, with the two
warpgroups' skew.

Usage: python3 bench/gpu/cta_tiles.py cta.json [--sections 16x1024c=33,8x2048c=33] [--heads 16]
       [--grid 132]   (no GPU needed)
"""
import argparse
import json
import statistics
from collections import defaultdict


def fit(xs, ys):
    """Least squares y = a x + b."""
    n, mx, my = len(xs), statistics.mean(xs), statistics.mean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    a = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    return a, my - a * mx, n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dump")
    ap.add_argument("--sections", default="")
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--grid", type=int, default=132)
    ap.add_argument("--block", type=int, default=128)
    a = ap.parse_args()
    secs = dict((k, int(v)) for k, v in (x.split("=") for x in a.sections.split(",") if x))
    d = json.load(open(a.dump))
    for spec, calls in d.items():
        b_, s_ = spec.rstrip("c").split("x")
        nm, nbh, sec_bh = -(-int(s_) // a.block), int(b_) * a.heads, secs.get(spec)
        later, first, per_cta = defaultdict(list), defaultdict(list), []
        phases = defaultdict(list)  # blocks -> (wg0 end-to-S, wg0 S-to-end, wg1 ..., wg1 S - wg0 S)
        for call in calls:
            for r in call:
                tiles = r[5] if len(r) > 5 else []
                per_cta.append(len(tiles))
                prev, prev1 = r[0], r[0]
                for k, (e0, e1, b, h, m, *ready) in enumerate(tiles):
                    if k > 0 and len(ready) == 2 and all(ready) and e1:
                        s0, s1 = ready
                        phases[m + 1].append(((s0 - prev) / 1e3, (e0 - s0) / 1e3, (s1 - prev1) / 1e3,
                                              (e1 - s1) / 1e3, (s1 - s0) / 1e3))
                    prev1 = e1 or prev1
                    us, prev = (e0 - prev) / 1e3, e0
                    rnd = ""
                    if sec_bh:
                        bh = b * a.heads + h
                        first_bh = bh // sec_bh * sec_bh
                        n = min(sec_bh, nbh - first_bh)
                        rnd = (nm - 1 - m) * n + (bh - first_bh)
                        rnd = f" round {rnd // a.grid}"
                    (first if k == 0 else later)[(m + 1, rnd)].append(us)
        print(f"{spec}: {len(calls)} calls, tiles per CTA {min(per_cta)}-{max(per_cta)} (the probe keeps 32)")
        for key in sorted(set(later) | set(first)):
            v, f = later.get(key, []), first.get(key, [])
            line = f"  {key[0]:4d} blocks{key[1]:9s}"
            if v:
                line += f" | later n {len(v):5d} mean {statistics.mean(v):7.2f} us sd {statistics.pstdev(v):5.2f}"
            if f:
                line += f" | first n {len(f):4d} mean {statistics.mean(f):7.2f} us"
            print(line)
        if phases:
            print("  later tiles by key blocks, means in us: warpgroup w's previous end -> its first S ready"
                  " | first S -> its end; S skew = wg1's first S - wg0's")
            for nb in sorted(phases):
                v = list(zip(*phases[nb]))
                mean = [statistics.mean(x) for x in v]
                print(f"  {nb:4d} blocks | wg0 {mean[0]:6.2f} | {mean[1]:6.2f} | wg1 {mean[2]:6.2f} | {mean[3]:6.2f}"
                      f" | S skew {mean[4]:5.2f} (n {len(v[0])})")
        xs = [k[0] for k, v in later.items() for _ in v]
        ys = [y for v in later.values() for y in v]
        if len(set(xs)) > 1:
            sl, ic, n = fit(xs, ys)
            print(f"  fit over {n} later tiles: {sl:.3f} us per key block + {ic:.3f} us per tile")


if __name__ == "__main__":
    main()
