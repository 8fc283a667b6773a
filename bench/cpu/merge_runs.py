"""Merge several compare.py tables (saved outputs of bench/cpu/run.sh) into one.

On a shared machine every run is disturbed differently; per shape and per framework this
takes the best wall GFLOP/s and the best GFLOP per CPU-second over the runs, and recomputes
the ratios from those bests. Usage: python3 bench/cpu/merge_runs.py run1.md run2.md ...
"""
import sys


def main(paths):
    best, order = {}, []
    for path in paths:
        with open(path) as f:
            for line in f:
                if not (line.startswith("| bf16") or line.startswith("| f32")):
                    continue
                c = [x.strip() for x in line.strip().strip("|").split("|")]
                key = tuple(c[:5])  # dtype, dim, seq, batch, causal
                vals = (float(c[5]), float(c[6]), float(c[8]), float(c[9]))
                if key not in best:
                    best[key], _ = [0.0] * 4 + [c[12]], order.append(key)
                b = best[key]
                for i, v in enumerate(vals):
                    b[i] = max(b[i], v)
    print("| dtype | dim | seq | batch | causal | longattn GF/s | longattn GF/cpu-s | torch GF/s | "
          "torch GF/cpu-s | ratio (wall) | ratio (cpu-s) | 2x met (cpu-s) | err |")
    print("|" + "---|" * 13)
    for k in order:
        la_w, la_c, pt_w, pt_c, err = best[k]
        rc = la_c / pt_c
        print(f"| {' | '.join(k)} | {la_w:.1f} | {la_c:.1f} | {pt_w:.1f} | {pt_c:.1f} | {la_w / pt_w:.2f}x "
              f"| {rc:.2f}x | {'yes' if rc >= 2 else 'no'} | {err} |")


if __name__ == "__main__":
    main(sys.argv[1:])
