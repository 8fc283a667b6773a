#!/usr/bin/env python3
"""Per-tile costs from a `cta_clock.py --dump` file (issue 20): each CTA's tiles in order, a
tile's time = its end minus the previous tile's end (warpgroup 0), so the first tile of a CTA
(from the CTA's start) is reported apart. Per shape: tiles per CTA, then per key-block count
(causal, aligned: q-block m visits m + 1 blocks) the mean, spread and count of later tiles
and the first tiles' mean, and a least-squares fit time = a x blocks + b over the later
tiles (b: a tile's fixed cost). --sections "16x1024c=33,..." (the plan's pairs per L2
section, known to the caller) also splits each count by the tile's round inside its section
(the sectioned snake's tile ids: rank-major, pairs fastest).

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
        for call in calls:
            for r in call:
                tiles = r[5] if len(r) > 5 else []
                per_cta.append(len(tiles))
                prev = r[0]
                for k, (e0, _e1, b, h, m) in enumerate(tiles):
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
        xs = [k[0] for k, v in later.items() for _ in v]
        ys = [y for v in later.values() for y in v]
        if len(set(xs)) > 1:
            sl, ic, n = fit(xs, ys)
            print(f"  fit over {n} later tiles: {sl:.3f} us per key block + {ic:.3f} us per tile")


if __name__ == "__main__":
    main()
