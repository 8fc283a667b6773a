"""Tables (markdown), the environment header and the JSON file. No torch here.

A row's result is a dict: label, case (shapes.Case as a dict), flops, convention, notes,
and impls: {name: {us, tflops, us_rot, tflops_rot, wall_us, maxdiff, err, kernels, na, ...}}.
"""
import json
import math
import os

WRONG = 0.05  # max |diff| of a bf16/f16 output above which a row is flagged (random N(0,1) inputs)


# --baseline columns (bench.py: the first is "baseline", later ones numbered).
BASELINES = ("baseline", "baseline2", "baseline3", "baseline4")

def num(x, spec=".0f"):
    """x formatted, or 'n/a' when absent or NaN."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return format(x, spec)


def get(r, impl, key):
    return (r.get("impls", {}).get(impl) or {}).get(key)


def ratio(r, a, b, key="tflops"):
    """a's TFLOP/s over b's (same FLOPs: b's time over a's); None if either is missing."""
    x, y = get(r, a, key), get(r, b, key)
    return x / y if x and y else None


def md_table(headers, rows):
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for row in rows:
        lines.append("| " + " | ".join(str(c).replace("|", "/") for c in row) + " |")
    return "\n".join(lines)


def flag(d):
    """' WRONG?' when a max |diff| is NaN or above WRONG."""
    if d is None:
        return ""
    return " WRONG?" if (math.isnan(d) or d > WRONG) else ""


def diff_cell(r, impl="longattn"):
    d = get(r, impl, "maxdiff")
    ref = get(r, impl, "ref")
    if d is None:
        return "n/a"
    return f"{d:.1e}{flag(d)}" + (f" (vs {ref})" if ref else "")


def na_notes(rows, impls=None):
    """One line per (implementation, reason) that left a cell n/a, with how many rows."""
    seen = {}
    for r in rows:
        for name, v in r.get("impls", {}).items():
            if (impls is None or name in impls) and v.get("na"):
                seen.setdefault((name, v["na"]), []).append(r["label"])
    return [f"- {name}: n/a on {len(labels)} row(s) ({labels[0]}{', ...' if len(labels) > 1 else ''}): {why}"
            for (name, why), labels in seen.items()]


def spread_lines(rows, limit=0.03):
    """One line per row whose same-input rounds spread (max - min over the median) beyond
    `limit` in some column: its ratios carry that noise (the longest calls' clocks move between
    windows; docs/history/PERFORMANCE-sessions-16-33.md, "Columns of one library")."""
    out = []
    for r in rows:
        wide = [(name, v["spread"]) for name, v in r.get("impls", {}).items() if v.get("spread", 0) > limit]
        if wide:
            out.append(f"- {r['label']} {r.get('mask', '')}: " + ", ".join(f"{n} {x:.0%}" for n, x in wide))
    return out


def kernel_lines(rows, limit=4):
    """Kernels each implementation ran per call, from the first row where it ran, plus any row
    whose kernels did not match the expected names (the check that names are right)."""
    out, shown = [], set()
    for r in rows:
        for name, v in r.get("impls", {}).items():
            ks = v.get("kernels")
            if not ks:
                continue
            odd = v.get("unmatched")
            if name in shown and not odd:
                continue
            shown.add(name)
            desc = "; ".join(f"{k['n']:g}x {k['name'][:90]} {k['us']:.1f} us" for k in ks[:limit])
            more = f"; +{len(ks) - limit} more" if len(ks) > limit else ""
            out.append(f"- {name} [{r['label']}]: {desc}{more}" + (f"  ** {odd}" if odd else ""))
    return out


def env_header(env):
    """One line: device, driver, software versions, date."""
    keys = ("device", "sms", "l2_mb", "driver", "torch", "cuda", "cudnn", "jax", "cudnn_frontend",
            "longattn", "date")
    return "env: " + ", ".join(f"{k} {env[k]}" for k in keys if env.get(k) is not None)


def save_json(path, key, payload):
    """Merge {key: payload} into the JSON object at path (one file for every suite of a run;
    rewritten after every row so a run cut short keeps what it measured)."""
    data = {}
    if os.path.exists(path):
        try:
            with open(path) as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            data = {}
    data[key] = payload
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(data, fh, indent=1, default=str)
    os.replace(tmp, path)


def append_text(path, text):
    with open(path, "a") as fh:
        fh.write(text.rstrip() + "\n\n")


# ---- suite tables ---------------------------------------------------------------------

def notes_cell(r):
    """The row's notes and each column's own note (e.g. cuDNN's mask or K/V expansion)."""
    own = [f"{n}: {v['note']}" for n, v in r.get("impls", {}).items() if v.get("note") and not v.get("na")]
    return "; ".join(list(r.get("notes", [])) + own)


def _case(r):
    c = r["case"]
    return c, f"{c['d']}" if not c.get("dv") or c["dv"] == c["d"] else f"{c['d']}/{c['dv']}"


def present(rows, names, key="tflops"):
    """The columns of `names` that some row measured (e.g. the baselines a run built)."""
    return [n for n in names if any(get(r, n, key) for r in rows)]


def peer_table(rows, peers=("FA3", "cuDNN"), key="tflops", title=""):
    """Headline / long: TFLOP/s of each peer and longattn, ratios, longattn's max |diff|."""
    peers = tuple(peers) + tuple(present(rows, BASELINES, key))
    hdr = ["hdim", "shape", "mask"] + list(peers) + ["longattn"] + [f"longattn/{p}" for p in peers] + ["max abs diff", "notes"]
    body = []
    for r in rows:
        _, d = _case(r)
        body.append([d, r["shape"], r["mask"]] + [num(get(r, p, key)) for p in peers] + [num(get(r, "longattn", key))]
                    + [num(ratio(r, "longattn", p, key), ".3f") for p in peers] + [diff_cell(r), notes_cell(r)])
    return (title + "\n" if title else "") + md_table(hdr, body)


def rotate_table(rows, impls=("FA3", "cuDNN", "longattn")):
    """Same-input vs rotating-input TFLOP/s per implementation, and rotating / same."""
    hdr = ["hdim", "shape", "mask", "sets"] + [f"{i} same / rot (rot/same)" for i in impls] + ["longattn/FA3 rot"]
    body = []
    for r in rows:
        _, d = _case(r)
        cells = []
        for i in impls:
            s, t = get(r, i, "tflops"), get(r, i, "tflops_rot")
            cells.append(f"{num(s)} / {num(t)} ({num(t / s if s and t else None, '.3f')})")
        body.append([d, r["shape"], r["mask"], r.get("rotate_sets") or "n/a"] + cells
                    + [num(ratio(r, "longattn", "FA3", "tflops_rot"), ".3f")])
    return md_table(hdr, body)


FP8_WALL = ("longattn fp8 (py)", "longattn fp8", "cuDNN fp8", "longattn bf16", "FA3 bf16")


def wall_table(rows, impls=("longattn (py)", "longattn", "FA3", "cuDNN"), kernel="longattn"):
    """Per-call wall time through Python (host overhead included) next to `kernel`'s kernel time
    (the fp8 suite: impls FP8_WALL, kernel "longattn fp8")."""
    shown = {"longattn (py)": "longattn (Python package)", "longattn": "longattn (capi via ctypes)",
             "FA3": "FA3 (JAX jit)", "cuDNN": "cuDNN (torch SDPA)",
             "longattn fp8 (py)": "longattn fp8 (Python package)", "longattn fp8": "longattn fp8 (capi via ctypes)",
             "cuDNN fp8": "cuDNN fp8 (cudnn-frontend graph)", "longattn bf16": "longattn bf16 (capi)",
             "FA3 bf16": "FA3 bf16 (JAX jit)"}
    hdr = ["hdim", "shape", "mask"] + [f"{shown.get(i, i)} us/call" for i in impls] + [f"{kernel} kernel us"]
    body = []
    for r in rows:
        _, d = _case(r)
        body.append([d, r["shape"], r["mask"]] + [num(get(r, i, "wall_us"), ".1f") for i in impls]
                    + [num(get(r, kernel, "us"), ".1f")])
    return md_table(hdr, body)


def window_table(rows):
    """Window / chunk rows: visible pairs; longattn vs FA3, and per visible key vs plain causal;
    each baseline build (run.sh .old*) on the windowed call, with longattn's ratio to it."""
    bases = present(rows, BASELINES)
    hdr = ["shape", "mask", "FA3", "longattn", "longattn/FA3", "FA3 plain", "longattn plain",
           "longattn mask/plain"] + [f"{b} (longattn/{b})" for b in bases] + ["max abs diff", "notes"]
    body = []
    for r in rows:
        body.append([r["shape"], r["mask"], num(get(r, "FA3", "tflops")), num(get(r, "longattn", "tflops")),
                     num(ratio(r, "longattn", "FA3"), ".3f"), num(get(r, "FA3 plain", "tflops")),
                     num(get(r, "longattn plain", "tflops")), num(ratio(r, "longattn", "longattn plain"), ".3f")]
                    + [f"{num(get(r, b, 'tflops'))} ({num(ratio(r, 'longattn', b), '.3f')})" for b in bases]
                    + [diff_cell(r), notes_cell(r)])
    return md_table(hdr, body)


def fp8_table(rows, labels=()):
    """labels: the --specs columns ("<label> fp8")."""
    cols = ("longattn fp8", "cuDNN fp8", "longattn bf16", "FA3 bf16") + tuple(
        present(rows, [f"{b} fp8" for b in tuple(BASELINES) + tuple(labels)]))
    hdr = ["hdim", "shape", "mask"] + list(cols) + ["la fp8/cuDNN fp8", "la fp8/la bf16", "la fp8/FA3 bf16"] \
        + [f"err {c}" for c in cols]
    body = []
    for r in rows:
        _, d = _case(r)
        body.append([d, r["shape"], r["mask"]] + [num(get(r, c, "tflops")) for c in cols]
                    + [num(ratio(r, "longattn fp8", c), ".3f") for c in ("cuDNN fp8", "longattn bf16", "FA3 bf16")]
                    + [num(get(r, c, "err"), ".1e") for c in cols])
    return md_table(hdr, body)


def variants_table(rows, labels):
    """TFLOP/s of FA3, cuDNN (n/a on windows and chunks, which SDPA lacks) and longattn
    (rules), each --baseline build and each override column, with its ratio to the rules."""
    labels = present(rows, BASELINES) + list(labels)
    hdr = ["hdim", "shape", "mask", "FA3", "cuDNN", "longattn"] + labels + ["max abs diff (all columns)"]
    body = []
    for r in rows:
        _, d = _case(r)
        cells = []
        for lab in labels:
            t, q = get(r, lab, "tflops"), ratio(r, lab, "longattn")
            cells.append(f"{num(t)} ({num(q, '.3f')})" if t else "n/a")
        diffs = [get(r, n, "maxdiff") for n in ["longattn"] + list(labels)]
        diffs = [x for x in diffs if x is not None]
        worst = max(diffs, key=lambda x: (math.isnan(x), x)) if diffs else None
        body.append([d, r["shape"], r["mask"], num(get(r, "FA3", "tflops")), num(get(r, "cuDNN", "tflops")),
                     num(get(r, "longattn", "tflops"))]
                    + cells + [f"{num(worst, '.1e')}{flag(worst)}"])
    return md_table(hdr, body)


def long_table(rows):
    """Features: one line per (row, implementation) with TFLOP/s, time and the ratio to the
    row's base column."""
    hdr = ["row", "mask", "implementation", "ms", "TFLOP/s", "vs base", "max abs diff", "kernels/call", "notes"]
    wall = any(v.get("wall_us") for r in rows for v in r["impls"].values())
    if wall:  # per-call wall time from Python, where columns have it (kvcache rows)
        hdr.insert(4, "wall us")
    body = []
    for r in rows:
        base = r.get("base")
        for name, v in r["impls"].items():
            if v.get("na"):
                body.append([r["shape"], r["mask"], name, "n/a"] + ["n/a"] * wall + ["n/a", "n/a", "n/a", "", v["na"][:100]])
                continue
            q = ratio(r, name, base) if base and name != base else None
            nk = sum(k["n"] for k in v.get("kernels") or [])
            d = v.get("maxdiff")
            line = [r["shape"], r["mask"], name, num(v["us"] / 1e3 if v.get("us") else None, ".3f"),
                    num(v.get("tflops")), num(q, ".3f") if q else ("base" if name == base else ""),
                    (f"{d:.1e}{flag(d)}" + (f" vs {v['ref']}" if v.get("ref") else "")) if d is not None else "",
                    f"{nk:g}" if nk else "", v.get("note", "")]
            if wall:
                line.insert(4, num(v.get("wall_us"), ".1f"))
            body.append(line)
    return md_table(hdr, body)
