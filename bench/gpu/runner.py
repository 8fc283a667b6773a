"""One benchmark row from start to end: build each implementation's column (a failure makes
that column n/a with its reason), check outputs against a reference, warm up, then time
every (implementation, mode) interleaved over rounds (timing.py)."""
import gc
import math
import time
import zlib

import torch

import shapes
from peers import Unsupported
from timing import interleave, kernel_time, short, unmatched, wall_time


_SAID = set()


class Row:
    """A row under construction: a Case, its columns (name -> Impl, in table order) and the
    columns that could not be built (name -> reason)."""

    def __init__(self, label, case, note=""):
        self.label, self.case = label, case
        self.flops, self.convention = shapes.flops(case), shapes.convention(case)
        self.impls, self.na = {}, {}
        self.notes = [note] if note else []
        self.ref = []           # columns whose output is the diff reference, in order of preference
        self.rotate = 0         # input sets of the rotating-input timing (0: same input only)
        self.base = None        # the column ratios are taken against (long tables)
        self.error_of = None    # fn(output) -> error against an exact reference (fp8), instead of a diff
        self.shape = None       # the table's shape text, when shapes.shape_name(case) would mislead

    def add(self, name, build):
        """Adds column `name` from build() -> Impl; an exception makes it n/a."""
        try:
            self.impls[name] = build()
        except Unsupported as e:
            self.na[name] = str(e)
        except Exception as e:  # noqa: BLE001 - fail soft: one column, not the run
            self.na[name] = short(e)
        return self.impls.get(name)


def max_diff(a, b, limit=1 << 26):
    """max |a - b| in float32, in slices of at most `limit` elements; NaN if any is NaN."""
    if a.shape != b.shape:
        raise ValueError(f"output shapes differ: {tuple(a.shape)} vs {tuple(b.shape)}")
    if a.numel() <= limit or a.dim() <= 1:
        return (a.float() - b.float()).abs().max().item()
    per = a[0].numel()
    if per > limit:
        parts = (max_diff(a[i], b[i], limit) for i in range(a.shape[0]))
    else:
        step = max(1, limit // per)
        parts = (max_diff(a[i:i + step], b[i:i + step], a.numel()) for i in range(0, a.shape[0], step))
    worst = 0.0
    for d in parts:
        if math.isnan(d):
            return d
        worst = max(worst, d)
    return worst


def _check(row, out):
    """Each column's output against the reference (the first of row.ref that ran)."""
    order = [n for n in row.ref if n in row.impls] + [n for n in row.impls if n not in row.ref]
    ref, ref_name = None, None
    for name in order:
        impl, rec = row.impls[name], out[name]
        try:
            o = impl.check()
            if row.error_of is not None:
                rec["err"] = row.error_of(o)
            elif impl.diff and o is not None:
                if ref is None and name in row.ref:
                    ref, ref_name = o.clone(), name  # a clone: later calls may reuse its buffer
                elif ref is not None:
                    rec["maxdiff"], rec["ref"] = max_diff(o, ref), ref_name
            del o
        except Exception as e:  # noqa: BLE001
            rec["na"] = "check failed: " + short(e)
            torch.cuda.synchronize()
    del ref


def run_row(row, cfg, t_start=None):
    """Runs a Row; returns its result dict (report.py reads it)."""
    c = row.case
    res = {"label": row.label, "case": c.asdict(), "shape": row.shape or shapes.shape_name(c), "mask": shapes.mask_name(c),
           "flops": row.flops, "convention": row.convention, "notes": row.notes, "base": row.base, "impls": {}}
    out = res["impls"]
    for name in list(row.impls) + list(row.na):
        out[name] = {"na": row.na[name]} if name in row.na else {"note": row.impls[name].note}
    _check(row, out)
    live = {n: i for n, i in row.impls.items() if not out[n].get("na")}
    nsets = max(1, row.rotate)
    res["rotate_sets"] = row.rotate or None
    # Warm-up (every set), then size the windows from one synchronous call.
    for name, impl in live.items():
        try:
            impl.setup()
            try:
                for i in list(range(nsets)) * 2:
                    impl.call(i)
                impl.sync()
            finally:
                impl.teardown()
        except Exception as e:  # noqa: BLE001
            out[name]["na"] = "warm-up failed: " + short(e)
    live = {n: i for n, i in live.items() if not out[n].get("na")}
    est = None
    for impl in live.values():
        try:
            est = wall_time(impl, [0])
            break
        except Exception:  # noqa: BLE001
            continue
    n = shapes.calls_per_window(est, cfg.window_us, cfg.max_calls)
    nrot = nsets * -(-n // nsets)
    res["calls_per_window"] = n
    timed = wall_time if cfg.timer == "wall" else kernel_time

    def k_entry(impl, idxs):
        def f():
            r = timed(impl, idxs)
            return r if isinstance(r, tuple) else (r, None)
        return f
    entries = {}
    for name, impl in live.items():
        if impl.kernel:
            entries[(name, "same")] = k_entry(impl, [0] * n)
            if row.rotate:
                entries[(name, "rot")] = k_entry(impl, [i % nsets for i in range(nrot)])
        if impl.wall and cfg.wall:
            entries[(name, "wall")] = (lambda impl=impl: (wall_time(impl, [0] * max(n, 5)), None))
    # A per-row shuffle (seeded by the row) so no column keeps one position across rows. Columns
    # marked apart run in a second pass, interleaved among themselves only.
    seed = cfg.seed + zlib.crc32(f"{row.label} {res['mask']}".encode())
    med, info, errs, per_round = {}, {}, {}, {}
    for apart in (False, True):
        part = {key: f for key, f in entries.items() if getattr(live[key[0]], "apart", False) == apart}
        if part:
            for acc, got in zip((med, info, errs, per_round), interleave(part, cfg.rounds, seed)):
                acc.update(got)
    for name, impl in live.items():
        rec = out[name]
        fl = impl.flops or row.flops
        if (name, "same") in med:
            rec["us"] = med[(name, "same")]
            rec["tflops"] = shapes.tflops(fl, rec["us"])
            rounds = per_round[(name, "same")]
            rec["rounds_us"] = [round(t, 2) for t in rounds]
            rec["spread"] = (max(rounds) - min(rounds)) / rec["us"]  # over the rounds, of the median
            rec["kernels"] = info.get((name, "same"))
            odd = unmatched(rec["kernels"], impl.expect)
            if odd:
                rec["unmatched"] = odd
        if (name, "rot") in med:
            rec["us_rot"] = med[(name, "rot")]
            rec["tflops_rot"] = shapes.tflops(fl, rec["us_rot"])
        if (name, "wall") in med:
            rec["wall_us"] = med[(name, "wall")]
        if impl.flops:
            rec["flops"] = impl.flops
        for mode in ("same", "rot", "wall"):
            if (name, mode) in errs:
                rec["error_" + mode] = errs[(name, mode)]
        if impl.kernel and "us" not in rec:
            rec["na"] = "timing failed: " + errs.get((name, "same"), "?")
    elapsed = f"[{time.time() - t_start:7.1f}s] " if t_start else ""
    cells = []
    for name, rec in out.items():
        if rec.get("na"):
            cells.append(f"{name} n/a")
        elif rec.get("tflops"):
            cells.append(f"{name} {rec['tflops']:.0f}" + (f"/{rec['tflops_rot']:.0f}r" if rec.get("tflops_rot") else ""))
        elif rec.get("wall_us"):
            cells.append(f"{name} {rec['wall_us']:.0f}us")
    d = (out.get("longattn") or {}).get("maxdiff")
    print(f"{elapsed}{row.label} {res['mask']}: " + " | ".join(cells)
          + (f" | maxdiff {d:.1e}" if d is not None else ""), flush=True)
    for name, rec in out.items():
        if rec.get("na") and (name, rec["na"]) not in _SAID:  # each reason once per run
            _SAID.add((name, rec["na"]))
            print(f"    {name}: n/a: {rec['na']}", flush=True)
        if rec.get("unmatched"):
            print(f"    {name}: {rec['unmatched']}", flush=True)
    return res


def free():
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
