#!/usr/bin/env python3
"""Where a dense call's time goes outside its CTAs (issue 20): each CTA's start and its
consumer warpgroups' ends from %globaltimer (Overrides::cta_clock, the capi key `cta_clock`),
against the same call's CUPTI kernel time, and FA3's CUPTI time on the same inputs.

Per shape, the median over --calls calls (each synchronized, its CTA times read back):
  cupti     the fwd_kernel's CUPTI duration (us)
  span      last CTA end - first CTA start: the time some CTA ran
  outside   cupti - span: the launch before the first CTA and the drain after the last
  start     the CTAs' start spread (last start - first start), and the 90th percentile
  end       the CTAs' end spread (last end - first end), and last end - median end
  cta       a CTA's own time (its end - its start): min / mean / max
  wg gap    the last consumer warpgroup's end - the first's, mean over CTAs
  fa3       FA3's CUPTI duration on the same inputs, and span / fa3
A wide start spread points at the launch; `outside` well above FA3's own launch and drain
(cupti_fa3 - its unknown span) points at ours. A CTA's end is taken once its last O store
has read shared memory: the store's global writes drain inside `outside`. %globaltimer's
update interval is the GPU's (about 1 us on some parts): spreads below it read as 0. Needs a tree whose capi library knows the key.

Usage: python3 bench/gpu/cta_clock.py --lib build/liblongattn_capi.so [--fa3 .fa3] [--calls 9]
       [--shapes "16x1024c,8x2048c,16x1024,4x4096c"]   (b x seq, c: causal; hdim 128, 16 heads)
       [--overrides dynamic=on] [--dump cta.json]   (every call's CTAs: {shape: [[[start ns from the first CTA's start, SM,
                            each consumer warpgroup's end ns (0: none), [[warpgroup 0's end ns,
                            warpgroup 1's end ns, batch, head, q-block] per tile, its first 32]]
                            per CTA in blockIdx order] per call]}; a tile's list also holds
                            warpgroup 0's and 1's first-S-ready ns, 0: not recorded)
"""
import argparse
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from capi import LongAttn  # noqa: E402

SLOTS = 136  # uint64 per CTA (params.h cta_clock, kCtaClockSlots): start, SM, warpgroup ends, tiles
TILES = 32   # tiles recorded per CTA (kCtaClockTiles), 4 slots each from slot 8


def cupti_durations(fn, n):
    """CUPTI durations (us) of every kernel whose name holds 'fwd_kernel' or FA3's, per call."""
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        outs = []
        for _ in range(n):
            outs.append(fn())
        torch.cuda.synchronize()
    ds = []
    for e in prof.events():
        dt = getattr(e, "device_type", None)
        if getattr(dt, "name", str(dt)) != "CUDA":
            continue
        if "fwd_kernel" in e.name or "FlashAttnFwd" in e.name:
            ds.append(e.time_range.elapsed_us())
    return ds, outs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--fa3", default="")
    ap.add_argument("--calls", type=int, default=9)
    ap.add_argument("--shapes", default="16x1024c,8x2048c,16x1024,4x4096c")
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--dump", default="")
    ap.add_argument("--overrides", default="", help="more capi overrides for longattn's calls, e.g. dynamic=on")
    a = ap.parse_args()
    dump = {}
    la = LongAttn(a.lib)
    fa3 = None
    if a.fa3:
        try:
            from peers import FA3
            fa3 = FA3(a.fa3)
        except Exception as e:  # noqa: BLE001
            print(f"FA3 not loaded: {e}")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    clk = torch.zeros(SLOTS * sms, device="cuda", dtype=torch.int64)
    print(f"device {torch.cuda.get_device_name(0)}, {sms} SMs; times in us, medians over {a.calls} calls")
    print("| shape | cupti | span | outside | start spread / p90 | end spread / last - median | cta min / mean / max"
          " | wg gap | FA3 cupti | span / FA3 | cupti / FA3 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for spec in a.shapes.split(","):
        causal = spec.endswith("c")
        b, s = (int(x) for x in spec.rstrip("c").split("x"))
        g = torch.Generator(device="cuda").manual_seed(3)
        q, k, v = (torch.randn(b, s, a.heads, a.dim, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
        o = torch.full_like(q, float("nan"))
        rows = []
        with la.overrides(f"cta_clock={clk.data_ptr()}" + (f",{a.overrides}" if a.overrides else "")):
            la.dense(q, k, v, o, causal)  # warm-up
            for _ in range(a.calls):
                clk.zero_()
                ds, _ = cupti_durations(lambda: la.dense(q, k, v, o, causal), 1)
                c = clk.view(sms, SLOTS).cpu().tolist()
                ctas = [r for r in c if r[0] > 0]
                if not ds or not ctas:
                    raise SystemExit(f"{spec}: no kernel time or no CTA clock (does this tree know cta_clock?)")
                starts = sorted(r[0] for r in ctas)
                end = [max(r[2:5]) for r in ctas]  # consumer warpgroups 0..2 (unwritten: 0)
                ends = sorted(end)
                t0 = starts[0]
                def tiles(r):
                    out = []
                    for k in range(TILES):
                        e = r[8 + 4 * k: 12 + 4 * k]
                        if not e[0]:
                            break
                        # [3]: each warpgroup's first-S time, low 32 bits, widened from its end.
                        s_ready = []
                        for w in range(2):
                            half = (e[3] >> (32 * w)) & 0xFFFFFFFF
                            s_ready.append(e[w] - ((e[w] - half) & 0xFFFFFFFF) - t0 if half and e[w] else 0)
                        out.append([e[0] - t0, e[1] - t0 if e[1] else 0, e[2] >> 32, (e[2] >> 16) & 0xFFFF, e[2] & 0xFFFF]
                                   + s_ready)
                    return out
                dump.setdefault(spec, []).append([[r[0] - t0, r[1]] + [x - t0 if x else 0 for x in r[2:5]] + [tiles(r)]
                                                  for r in c])
                own = [e - r[0] for e, r in zip(end, ctas)]
                rows.append(dict(
                    cupti=ds[0], span=(ends[-1] - t0) / 1e3, outside=ds[0] - (ends[-1] - t0) / 1e3,
                    sspread=(starts[-1] - t0) / 1e3, sp90=(starts[int(0.9 * (len(starts) - 1))] - t0) / 1e3,
                    espread=(ends[-1] - ends[0]) / 1e3, elast=(ends[-1] - statistics.median(ends)) / 1e3,
                    cmin=min(own) / 1e3, cmean=statistics.mean(own) / 1e3, cmax=max(own) / 1e3,
                    wgap=statistics.mean(max(r[2:5]) - min(x for x in r[2:5] if x) for r in ctas) / 1e3))
        assert not torch.isnan(o).any().item(), "unwritten output"
        m = {key: statistics.median(r[key] for r in rows) for key in rows[0]}
        fa3_us = None
        if fa3 is not None:
            from shapes import Case
            f = fa3.dense_fn(Case(b, s, s, a.heads, a.heads, a.dim, causal))
            torch.cuda.synchronize()
            js = (fa3.to_jax(q), fa3.to_jax(k), fa3.to_jax(v))
            f(*js).block_until_ready()
            ds, outs = cupti_durations(lambda: f(*js), a.calls)
            outs[-1].block_until_ready()
            fa3_us = statistics.median(ds) if ds else None
        fa = f"{fa3_us:.1f} | {m['span'] / fa3_us:.3f} | {m['cupti'] / fa3_us:.3f}" if fa3_us else "- | - | -"
        print(f"| {b} x {s} {'causal' if causal else 'full'} | {m['cupti']:.1f} | {m['span']:.1f} | "
              f"{m['outside']:.2f} | {m['sspread']:.2f} / {m['sp90']:.2f} | {m['espread']:.2f} / "
              f"{m['elast']:.2f} | {m['cmin']:.1f} / {m['cmean']:.1f} / {m['cmax']:.1f} | {m['wgap']:.2f} | {fa} |",
              flush=True)
    if a.dump:
        import json
        with open(a.dump, "w") as f:
            json.dump(dump, f)


if __name__ == "__main__":
    main()
