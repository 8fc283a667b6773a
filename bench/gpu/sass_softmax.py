"""The softmax's exp2 passes in a kernel's SASS (`cuobjdump -sass`; scripts/cuobjdump.sh gives one
on a machine without the CUDA binary utilities), to see how ptxas scheduled the row max against
the exp2s without a GPU.

  python3 sass_softmax.py FILE.sass [--kernel SUBSTRING] [--shape]

For every function whose name holds SUBSTRING (default: every fwd_kernel) and every exp2 pass
in it (a run of at least 30 MUFU.EX2, gaps under 60 instructions): the straight-line path from
the wgmma wait before it (WARPGROUP.DEPBAR; a predicated forward branch in the next 16
instructions, the element mask's skip, is followed) to its first MUFU.EX2: instructions, FMNMX,
SHFL; then the FMNMX issued inside the pass (a row max running under the other row's exp2s).
--shape prints the pass as one letter per instruction (M MUFU.EX2, x FMNMX, S SHFL, f FFMA,
a FADD, p F2FP, B branch / barrier / wgmma, . other), starting 90 before its first MUFU.
"""
import argparse
import re

INS = re.compile(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);")
BRA = re.compile(r"@!?P\d BRA (0x[0-9a-f]+)")


def functions(path):
    text = open(path).read()
    for chunk in re.split(r"\n\s*Function : ", text)[1:]:
        name = chunk.split("\n", 1)[0].strip()
        ins = [(int(m.group(1), 16), m.group(2).strip()) for m in map(INS.match, chunk.split("\n")) if m]
        yield name, ins


def letter(s):
    if s.startswith("MUFU.EX2"):
        return "M"
    for key, c in (("FMNMX", "x"), ("SHFL", "S"), ("F2FP", "p")):
        if key in s:
            return c
    if s.startswith("FFMA"):
        return "f"
    if s.startswith("FADD"):
        return "a"
    if any(k in s for k in ("BRA", "BAR", "WARPGROUP", "HGMMA")):
        return "B"
    return "."


def passes(ins):
    mufu = [i for i, (_, s) in enumerate(ins) if s.startswith("MUFU.EX2")]
    k = 0
    while k < len(mufu):
        e = k
        while e + 1 < len(mufu) and mufu[e + 1] - mufu[e] < 60:
            e += 1
        if e - k + 1 >= 30:
            yield mufu[k], mufu[e]
        k = e + 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file")
    ap.add_argument("--kernel", default="fwd_kernel")
    ap.add_argument("--shape", action="store_true")
    a = ap.parse_args()
    for name, ins in functions(a.file):
        if a.kernel not in name:
            continue
        print(name)
        at = {addr: i for i, (addr, _) in enumerate(ins)}
        for first, last in passes(ins):
            wait = next((i for i in range(first, -1, -1) if "WARPGROUP.DEPBAR" in ins[i][1]), None)
            if wait is None:
                continue
            start = wait + 1
            for i in range(wait + 1, min(wait + 17, first)):
                m = BRA.match(ins[i][1])
                if m and int(m.group(1), 16) in at and wait < at[int(m.group(1), 16)] <= first:
                    start = at[int(m.group(1), 16)]
                    break
            path = [s for _, s in ins[start:first]]
            fm = sum("FMNMX" in s for s in path)
            sh = sum("SHFL" in s for s in path)
            inside = sum("FMNMX" in s for _, s in ins[first:last + 1])
            print(f"  pass at {ins[first][0]:#x}: {len(path)} instructions from the wgmma wait to the first exp2 "
                  f"({fm} FMNMX, {sh} SHFL); {last - first + 1} in the pass, {inside} FMNMX among them")
            if a.shape:
                print("    " + "".join(letter(s) for _, s in ins[max(0, first - 90):last + 1]))


if __name__ == "__main__":
    main()
