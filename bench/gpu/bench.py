#!/usr/bin/env python3
"""longattn side by side with FlashAttention-3 and cuDNN on one Hopper GPU, in one process,
on the same inputs (issues 20 and 21).

  python3 bench/gpu/bench.py --lib build-gpu/bench/gpu/liblongattn_capi.so --fa3 .fa3 --out DIR
      [--long] [--window] [--features] [--fp8] [--variants] [--headline] [--dtype f16]

Suites (any number; none given: the headline suite):
  (default) / --headline  issue 20's table: hdim 128 at 1k (b16) .. 16k (b1), 16 heads;
                 32k 32/8 heads; hdim 64 8k b2; hdim 256 8k b1; full and causal. Kernel time
                 on the same input (the table) and over rotating input sets (--rotate N),
                 and per-call wall time through Python (longattn's package, the capi, FA3
                 through JAX, SDPA).
  --long         64k, 128k, 256k (if memory allows), 32/8 heads, full and causal.
  --window       64k window 4096, 32k window 1024, 64k chunk 8192 (causal), 16k window
                 2048 both sides; visible pairs; beside the same shape without the window.
  --features     sinks, softcap, ragged, split-KV, packed GQA, paged K/V, head dims 192/128.
  --fp8          e4m3, hdim 64/128/256, 4k..16k: longattn fp8, cuDNN fp8 (cudnn-frontend),
                 longattn bf16 and FA3 bf16 on the dequantized inputs.
  --dims         head dims 64..256 (80, 96, 160, 192, 224 on the next compiled kernel; 192/128),
                 8k batch 2, 16 heads, full and causal.
  --variants     longattn's override columns (shapes.VARIANTS or --specs) on the headline
                 shapes and 64k, beside FA3 and cuDNN (n/a on windows and chunks).

Columns: longattn = liblongattn_capi.so through ctypes (capi.py; internal variants through
longattn_bench_set_overrides, always reset to "" after); FA3 = libdew_flash_attn3.so as a
JAX FFI target (--fa3 DIR; n/a without it); cuDNN = torch SDPA restricted to
CUDNN_ATTENTION. A column that cannot run a row is "n/a" with its reason below the table.
Timing: timing.py. FLOPs: shapes.py. Every number goes to DIR/bench.json (one key per
suite and dtype, rewritten after every row) and every table to DIR/tables.md.
"""
import argparse
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import report  # noqa: E402
import shapes  # noqa: E402

SUITES = ("headline", "long", "window", "features", "fp8", "variants", "dims")
TIMING = ("kernel time from CUPTI (torch.profiler): every kernel of a window of N back-to-back calls of one "
          "implementation, summed, / N; implementations interleaved in a shuffled order per round; median of "
          "{rounds} rounds")


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", default="", help="liblongattn_capi.so (default: build-gpu/bench/gpu/liblongattn_capi.so)")
    ap.add_argument("--fa3", default="", metavar="DIR", help="folder holding libdew_flash_attn3.so (fetch_fa3.sh)")
    ap.add_argument("--baseline", action="append", default=[], metavar="LIB",
                    help="another liblongattn_capi.so (e.g. built from an earlier commit): a 'baseline' column "
                         "beside longattn in the dense suites, interleaved with it; repeated: 'baseline2', ...")
    ap.add_argument("--out", default=".", help="folder for bench.json and tables.md")
    ap.add_argument("--dtype", choices=("bf16", "f16"), default="bf16", help="inputs of the bf16/f16 suites")
    for s in SUITES:
        ap.add_argument("--" + s, action="store_true", help=f"run the {s} suite")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (median)")
    ap.add_argument("--rotate", type=int, default=0, help="input sets of the rotating timing (0: 3x L2 worth)")
    ap.add_argument("--no-rotate", action="store_true", help="headline: same-input timing only")
    ap.add_argument("--no-wall", dest="wall", action="store_false", help="headline and fp8: no per-call wall times")
    ap.add_argument("--specs", default="", help="--variants (and --fp8) override columns: 'label:key=v,key=v;label2:...'")
    ap.add_argument("--shapes", default="", help="--variants and --fp8: these rows instead of the suite's, "
                    "'BxS:HQ/HK:D[:causal|full[:wN|cN]];...' (e.g. '4x4096:16/16:256:causal', "
                    "'16x1000:16/16:64:causal:w256'; windows and chunks: --variants only)")
    ap.add_argument("--match", default="", help="only rows whose '[tag] shape mask' text matches this regex "
                    "(e.g. 'd128 b16', 'causal', features tags: paged, ragged, 'packed GQA', split-KV)")
    ap.add_argument("--quick", action="store_true", help="first 4 rows of each suite, 2 rounds")
    ap.add_argument("--timer", choices=("cupti", "wall"), default="cupti", help="wall: no profiler (fallback)")
    ap.add_argument("--window-us", type=float, default=200000.0, help="work per timed window")
    ap.add_argument("--max-calls", type=int, default=20, help="most calls per timed window")
    ap.add_argument("--seed", type=int, default=7, help="seed of the interleaving order")
    a = ap.parse_args(argv)
    if a.quick:
        a.rounds = min(a.rounds, 2)
    other = [s for s in SUITES if getattr(a, s) and s not in ("variants", "fp8")]
    if a.shapes and (other or not (a.variants or a.fp8)):
        ap.error("--shapes: only with --variants and / or --fp8 (and no other suite)")
    return a


def _run(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=20, cwd=HERE).stdout.strip()
    except Exception:  # noqa: BLE001
        return ""


def environment():
    import torch
    p = torch.cuda.get_device_properties(0)
    env = {"device": p.name, "sms": p.multi_processor_count, "l2_mb": getattr(p, "L2_cache_size", 0) >> 20,
           "torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    env["driver"] = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]).split("\n")[0] or None
    head = _run(["git", "rev-parse", "--short", "HEAD"])
    dirty = _run(["git", "status", "--porcelain", "--untracked-files=no"])
    env["longattn"] = (head + ("+dirty" if dirty else "")) if head else None
    return env, getattr(p, "L2_cache_size", 50 << 20) or (50 << 20)


def load(args):
    """(LongAttn or None, why not, FA3 or None, why not)."""
    from capi import LongAttn
    from peers import FA3
    from timing import short
    la = fa3 = None
    lib = args.lib or os.path.join(os.path.dirname(os.path.dirname(HERE)), "build-gpu/bench/gpu/liblongattn_capi.so")
    try:
        la = LongAttn(lib)
        la.set_overrides("")
        la_why = None
    except Exception as e:  # noqa: BLE001
        la_why = f"{lib}: {short(e)}"
    if args.fa3:
        try:
            fa3 = FA3(args.fa3)
            fa3_why = None
        except Exception as e:  # noqa: BLE001
            fa3_why = str(e) if type(e).__name__ == "Unsupported" else short(e)
    else:
        fa3_why = "no --fa3 DIR given"
    return la, la_why, fa3, fa3_why


def tables(name, rows, env, args, extra=""):
    """Markdown of one suite's results: a title naming the device, timing and FLOP convention."""
    dtype = {"fp8": "e4m3", "features": "bf16"}.get(name, args.dtype)
    head = [f"## {name} ({dtype}) -- {env['device']}",
            report.env_header(env), "timing: " + TIMING.format(rounds=args.rounds)]
    conv = {"window": shapes.PAIRS_CONVENTION, "features": f"{shapes.FA_CONVENTION} on square plain rows; "
            f"{shapes.PAIRS_CONVENTION} elsewhere (ragged, short seq_q, windows)"}.get(name, shapes.FA_CONVENTION)
    head.append(f"TFLOP/s: {conv}. Ratios: longattn over the peer (> 1: longattn faster).")
    if extra:
        head.append(extra)
    body = []
    if name == "headline":
        body += ["Kernel TFLOP/s, same input every call (the issue-20 targets use this table):",
                 report.peer_table(rows),
                 "", "Same input vs rotating input sets (rotating: the sets together hold 3x L2, so a call's "
                 "K/V are not left in L2 by the calls before it; same input: K/V (and Q) may stay L2-resident "
                 f"between calls, which favours short shapes whose working set is near the {env['l2_mb']} MB L2). "
                 "Both are CUPTI kernel time, so launch gaps are in neither; the old event timing over "
                 "back-to-back calls counted gaps too:", report.rotate_table(rows),
                 "", "Per-call wall time through Python (N back-to-back calls then a sync; host overhead "
                 "included: argument checks, output allocation, JAX dispatch):", report.wall_table(rows)]
    elif name in ("long", "dims"):
        body.append(report.peer_table(rows))
    elif name == "window":
        body.append(report.window_table(rows))
    elif name == "fp8":
        body += ["errors: max |out - fp32 reference of the dequantized inputs| on 128 rows of batch 0; cuDNN "
                 "fp8 writes e4m3 output (its error includes that rounding), the others bf16.",
                 report.fp8_table(rows, [lab for lab, _ in shapes.parse_specs(args.specs)] if args.specs else ())]
        if any(v.get("wall_us") for r in rows for v in r["impls"].values()):
            body += ["", "Per-call wall time through Python (N back-to-back calls then a sync; host overhead "
                     "included: argument checks, output allocation, longattn's V transpose pre-pass and its "
                     "scratch, JAX dispatch):", report.wall_table(rows, report.FP8_WALL, kernel="longattn fp8")]
    elif name == "variants":
        labels = [lab for lab, _ in (shapes.parse_specs(args.specs) if args.specs else shapes.VARIANTS)]
        body += ["TFLOP/s; in brackets a column over longattn's shipped rules (> 1: that column is faster; "
                 "the other tables' ratios are longattn over the peer):", report.variants_table(rows, labels)]
    else:
        body.append(report.long_table(rows))
    notes = report.na_notes(rows)
    if notes:
        body += ["", "n/a:"] + notes
    wide = report.spread_lines(rows)
    if wide:
        body += ["", "rounds spread (max - min over the median) above 3%: these rows' ratios carry that noise:"] + wide
    ks = report.kernel_lines(rows)
    if ks:
        body += ["", "kernels per call (first row of each column; ** = no kernel matched the expected name):"] + ks
    return "\n".join(head + [""] + body)


def main(argv=None):
    args = parse(argv)
    import torch

    from runner import free, run_row
    from timing import short
    if not torch.cuda.is_available():
        print("no CUDA device")
        return 1
    env, l2 = environment()
    la, la_why, fa3, fa3_why = load(args)
    if fa3 is not None:
        env["jax"] = fa3.version
    print(report.env_header(env), flush=True)
    print(f"longattn: {la.path if la else 'n/a: ' + la_why}", flush=True)
    print(f"FA3: {'libdew_flash_attn3.so (' + fa3.arch + ')' if fa3 else 'n/a: ' + fa3_why}", flush=True)
    import features
    import suites
    ctx = suites.Ctx(args, la, la_why, fa3, fa3_why, l2)
    for i, path in enumerate(args.baseline):
        from capi import LongAttn
        name = "baseline" if i == 0 else f"baseline{i + 1}"
        try:
            lib = LongAttn(path)
            lib.set_overrides("")
            ctx.bases.append((name, lib))
        except Exception as e:  # noqa: BLE001
            print(f"{name} {path}: not loaded ({type(e).__name__}: {str(e)[:200]})", flush=True)
    ctx.base = ctx.bases[0][1] if ctx.bases else None
    wanted = [s for s in SUITES if getattr(args, s)] or ["headline"]
    os.makedirs(args.out, exist_ok=True)
    jpath, tpath = os.path.join(args.out, "bench.json"), os.path.join(args.out, "tables.md")
    pat = re.compile(args.match) if args.match else None
    t0 = time.time()
    for name in wanted:
        key = name if name in ("fp8", "features") else f"{name}_{args.dtype}"  # those two fix their dtypes
        print(f"\n== suite {name} ({key}) ==", flush=True)
        todo = features.feature_rows(ctx) if name == "features" else suites.suite_rows(ctx, "default" if name == "headline" else name)
        todo = [(t[0], t[1], f"{t[2] + ' ' if len(t) > 2 else ''}{shapes.shape_name(t[0])} {shapes.mask_name(t[0])}")
                for t in todo]
        todo = [t for t in todo if not pat or pat.search(t[2])]
        if args.quick:
            todo = todo[:4]
        results = []
        for c, build, _ in todo:
            row = None
            try:
                row = build()
                results.append(run_row(row, args, t0))
            except Exception as e:  # noqa: BLE001 - a row that cannot run is a row of n/a, not the end
                msg = short(e)
                print(f"[{time.time() - t0:7.1f}s] {shapes.shape_name(c)} {shapes.mask_name(c)}: row failed: {msg}", flush=True)
                results.append({"label": shapes.shape_name(c), "case": c.asdict(), "shape": shapes.shape_name(c),
                                "mask": shapes.mask_name(c), "impls": {}, "notes": ["row failed: " + msg]})
            finally:
                del row
                try:
                    free()
                except Exception as e:  # noqa: BLE001
                    print(f"  free failed: {short(e)}", flush=True)
            if la is not None:
                try:
                    la.set_overrides("")
                except Exception:  # noqa: BLE001
                    pass
            report.save_json(jpath, key, {"env": env, "timing": TIMING.format(rounds=args.rounds), "rows": results,
                                          "args": vars(args)})
        extra = ""
        if name == "fp8" and ctx._cf8 is not None:
            extra = f"cudnn-frontend {ctx._cf8.version}"
        text = tables(name, results, env, args, extra)
        print("\n" + text, flush=True)
        report.append_text(tpath, text)
    print(f"\ndone in {time.time() - t0:.0f}s; {jpath}, {tpath}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
