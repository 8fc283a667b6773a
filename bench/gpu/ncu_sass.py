"""Summaries of ncu per-SASS-instruction exports (tests/gpu/run.sh stages ncutile / ncufp8:
`ncu --page source --csv --print-source sass`, gzipped), for comparing kernels' instruction
mixes and where their warps stall.

  python3 ncu_sass.py mix FILE [FILE ...] [--per N]
      executed warp instructions by opcode (and their share of the stall samples); --per N
      divides the counts by N (e.g. logits / 32 for instructions per logit)
  python3 ncu_sass.py counts FILE
      instructions grouped by how often each SASS line ran: code run once per tile, once per
      key block, ... show up as separate execution counts (lines x count)
  python3 ncu_sass.py stalls FILE OPCODE [OPCODE ...]
      the stall reasons of the lines whose opcode starts with each OPCODE
  python3 ncu_sass.py part FILE RUNS
      one part of the code, the lines that ran RUNS times (a comma list: e.g. the two unrolled
      copies of a key-block step, 32768,24576): its lines and stall samples by opcode, its
      stall reasons, and samples per 1000 executions (executions: the sum of RUNS), the figure
      to compare between two kernels doing the same work
"""
import argparse
import collections
import csv
import gzip
import re

OPCODE = re.compile(r"(@!?U?P\w+\s+)?([A-Z0-9_]+(\.[A-Z0-9_]+)*)")
KEEP_SUFFIX = ("HGMMA", "QGMMA", "MUFU", "F2FP")  # opcodes whose variant matters


def load(path):
    with gzip.open(path, "rt") as f:
        rows = list(csv.reader(f))
    head = next(i for i, r in enumerate(rows) if "Source" in r)
    names = rows[head]
    return [dict(zip(names, r)) for r in rows[head + 1:] if len(r) >= len(names)]


def opcode(source, full=False):
    m = OPCODE.match(source.strip())
    if not m:
        return ""
    op = m.group(2)
    return op if full or op.startswith(KEEP_SUFFIX) else op.split(".")[0]


def stall_reasons(rows):
    """The per-reason stall sample columns (all samples, not the not-issued split)."""
    return [k for k in rows[0] if k.startswith("stall_") and "Not Issued" not in k] if rows else []


def num(row, key):
    return int(row.get(key) or 0)


def mix(paths, per):
    for path in paths:
        rows = load(path)
        inst, samp = collections.Counter(), collections.Counter()
        for r in rows:
            op = opcode(r["Source"])
            inst[op] += num(r, "Instructions Executed")
            samp[op] += num(r, "Warp Stall Sampling (All Samples)")
        ti, ts = sum(inst.values()) or 1, sum(samp.values()) or 1
        print(f"{path}: {ti} warp instructions, {ts} stall samples")
        for op, n in inst.most_common(30):
            print(f"  {op:44s} {n / per:14.3f} {100 * n / ti:5.1f}%   samples {100 * samp[op] / ts:5.1f}%")


def counts(path):
    rows = load(path)
    by = collections.defaultdict(lambda: [0, 0])
    for r in rows:
        n = num(r, "Instructions Executed")
        by[n][0] += 1
        by[n][1] += num(r, "Warp Stall Sampling (All Samples)")
    total = sum(n * v[0] for n, v in by.items()) or 1
    print(f"{path}: {total} warp instructions")
    for n, (lines, s) in sorted(by.items(), key=lambda x: -x[0] * x[1][0])[:20]:
        share = 100 * n * lines / total
        print(f"  ran {n:>10} times: {lines:5d} lines, {share:5.1f}% of the instructions, {s} samples")


def stalls(path, ops):
    rows = load(path)
    reasons = stall_reasons(rows)
    for want in ops:
        acc, lines = collections.Counter(), 0
        for r in rows:
            if opcode(r["Source"], full=True).startswith(want):
                lines += 1
                for k in reasons:
                    acc[k] += num(r, k)
        top = ", ".join(f"{k[6:]} {v}" for k, v in acc.most_common(6))
        print(f"{want}: {lines} lines, {sum(acc.values())} samples: {top}")


def part(path, runs):
    rows = [r for r in load(path) if num(r, "Instructions Executed") in runs]
    reasons = stall_reasons(rows)
    lines, samp, why = collections.Counter(), collections.Counter(), collections.Counter()
    for r in rows:
        op = opcode(r["Source"])
        lines[op] += 1
        samp[op] += num(r, "Warp Stall Sampling (All Samples)")
        for k in reasons:
            why[k] += num(r, k)
    total = sum(samp.values())
    print(f"{path}: lines run {sorted(runs)} times: {sum(lines.values())} lines, {total} samples, "
          f"{1000 * total / sum(runs):.1f} samples per 1000 executions")
    print("  stall reasons: " + ", ".join(f"{k[6:]} {v}" for k, v in why.most_common(10)))
    for op, n in samp.most_common(24):
        print(f"  {op:28s} {lines[op]:5d} lines {n:7d} samples")


def step(path, runs):
    rows = [r for r in load(path) if num(r, "Instructions Executed") == runs]
    src = [r["Source"].strip() for r in rows]
    samp = [num(r, "Warp Stall Sampling (All Samples)") for r in rows]
    pv = max((i for i, t in enumerate(src) if "tnspB" in t), default=-1)
    s_wait = next((i for i in range(pv + 1, len(src)) if "DEPBAR" in src[i]), None)
    if pv < 0 or s_wait is None:
        print(f"{path}: no P.V HGMMA followed by a wgmma wait among the lines run {runs} times")
        return
    mufu = [i for i in range(s_wait, len(src)) if src[i].startswith("MUFU.EX2")]
    if not mufu:
        print(f"{path}: no MUFU.EX2 after the S wait")
        return
    cuts = [(0, s_wait + 1, "before S"), (s_wait + 1, mufu[0], "S to the first exp2"),
            (mufu[0], mufu[-1] + 1, "exp2 pass"), (mufu[-1] + 1, len(src), "after")]
    parts = ", ".join(f"{name} {1000 * sum(samp[a:b]) / runs:.1f} ({b - a} lines)" for a, b, name in cuts)
    print(f"{path}: {len(src)} lines run {runs} times, samples per 1000 executions: {parts}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("mix")
    m.add_argument("files", nargs="+")
    m.add_argument("--per", type=float, default=1.0)
    c = sub.add_parser("counts")
    c.add_argument("file")
    s = sub.add_parser("stalls")
    s.add_argument("file")
    s.add_argument("ops", nargs="+")
    pt = sub.add_parser("part")
    pt.add_argument("file")
    pt.add_argument("runs", type=lambda v: {int(x) for x in v.split(",")})
    st = sub.add_parser("step")
    st.add_argument("file")
    st.add_argument("runs", type=int)
    a = ap.parse_args()
    if a.cmd == "mix":
        mix(a.files, a.per)
    elif a.cmd == "counts":
        counts(a.file)
    elif a.cmd == "step":
        step(a.file, a.runs)
    elif a.cmd == "part":
        part(a.file, a.runs)
    else:
        stalls(a.file, a.ops)


if __name__ == "__main__":
    main()
