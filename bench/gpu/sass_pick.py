"""SASS of chosen kernels of a shared library or binary, for reading what a peer's kernels
compile (FA3's scheduler, from its kernels' template names) and comparing code sizes. Needs
cuobjdump and c++filt (the device machine has them; on the build machine scripts/cuobjdump.sh
fetches cuobjdump).

  python3 sass_pick.py LIB OUTPREFIX REGEX [REGEX ...]

Writes OUTPREFIX_index.txt (every kernel: static SASS instruction count, '*' if a REGEX matched
its demangled name, the name) and OUTPREFIX_sass.txt.gz (the matched kernels' SASS).
"""
import gzip
import re
import subprocess
import sys

LINE = re.compile(r"^\s+/\*[0-9a-f]{4,}\*/", re.M)  # one SASS instruction (its address)


def main():
    lib, prefix = sys.argv[1], sys.argv[2]
    pats = [re.compile(p) for p in sys.argv[3:]]
    text = subprocess.run(["cuobjdump", "-sass", lib], capture_output=True, text=True, check=True).stdout
    parts = re.split(r"\n\s*Function : (\S+)\n", text)
    names, bodies = parts[1::2], parts[2::2]
    demangled = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True,
                               check=True).stdout.split("\n")
    with open(prefix + "_index.txt", "w") as idx, gzip.open(prefix + "_sass.txt.gz", "wt") as sel:
        for name, dem, body in zip(names, demangled, bodies):
            hit = any(p.search(dem) for p in pats)
            idx.write(f"{len(LINE.findall(body))}\t{'*' if hit else ' '}\t{dem}\n")
            if hit:
                sel.write(f"\n##### {dem}\n##### {name}\n{body}\n")


if __name__ == "__main__":
    main()
