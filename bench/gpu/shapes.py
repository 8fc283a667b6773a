"""The benchmark's suites as plain data, and how each row counts its FLOPs. No torch here:
`python3 bench/gpu/selftest.py` checks this file anywhere.

FLOP conventions (every table names the one it uses):
- FA convention for plain masks with seq_q == seq_k: 4*b*h*sq*sk*d, causal counting half
  (FlashAttention's papers and FA3's benchmark do this; cuDNN's and ours follow).
- Visible (query, key) pairs for everything else (windows, chunks, causal with
  seq_q != seq_k, ragged batches): 2*(d_qk + d_v) FLOPs per visible pair. A plain causal
  square mask has s*(s+1)/2 visible pairs, 0.5/s more than the FA convention.
"""
from dataclasses import asdict, dataclass, replace

FA_CONVENTION = "FA convention: 4*b*h*sq*sk*d, causal counts half of full"
PAIRS_CONVENTION = "visible (query, key) pairs: 2*(d_qk+d_v) FLOPs per visible pair"


@dataclass(frozen=True)
class Case:
    """One attention problem: dense (b, sq, hq, d) queries against (b, sk, hk, d) keys.
    Causal is bottom-right aligned (longattn's and FA3's default). wl / wr: sliding window
    in keys before / after the query's diagonal (-1: unbounded), chunk: llama4 chunks."""
    b: int
    sq: int
    sk: int
    hq: int
    hk: int
    d: int
    causal: bool
    dtype: str = "bf16"  # bf16 | f16 | e4m3
    wl: int = -1
    wr: int = -1
    chunk: int = 0
    dv: int = 0  # head dim of v (0: d)

    @property
    def d_v(self):
        return self.dv or self.d

    @property
    def plain(self):
        return self.wl < 0 and self.wr < 0 and self.chunk <= 0

    def with_(self, **kw):
        return replace(self, **kw)

    def asdict(self):
        return asdict(self)


def mask_name(c):
    """'full', 'causal', 'causal, window 4096', 'window (2048, 2048)', 'causal, chunk 8192'."""
    parts = ["causal"] if c.causal else []
    if c.wl >= 0 or c.wr >= 0:
        parts.append(f"window {c.wl}" if c.causal and c.wr < 0 else f"window ({c.wl}, {c.wr})")
    if c.chunk > 0:
        parts.append(f"chunk {c.chunk}")
    return ", ".join(parts) or "full"


def shape_name(c):
    """'d128 b16 x 1k, 16/16 heads'; '16q x 8k keys' when seq_q != seq_k."""
    seq = kseq(c.sq) if c.sq == c.sk else f"{kseq(c.sq)}q x {kseq(c.sk)} keys"
    dims = f"d{c.d}" if c.d_v == c.d else f"d{c.d}/{c.d_v}"
    return f"{dims} b{c.b} x {seq}, {c.hq}/{c.hk} heads"


def kseq(n):
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else str(n)


def row_range(sq, sk, causal, wl=-1, wr=-1, chunk=0):
    """Visible key range [lo, hi) of each query row i, as a function (mask_rule.h, bottom-right)."""
    off = sk - sq

    def rng(i):
        p = i + off
        lo, hi = 0, sk
        if causal:
            hi = min(hi, p + 1)
        if wl >= 0:
            lo = max(lo, p - wl)
        if wr >= 0:
            hi = min(hi, p + wr + 1)
        if chunk > 0:
            c0 = (p // chunk) * chunk
            lo, hi = max(lo, c0), min(hi, c0 + chunk)
        return lo, max(lo, hi)
    return rng


def visible_pairs(sq, sk, causal, wl=-1, wr=-1, chunk=0):
    """Visible (query, key) pairs of one (batch, head), bottom-right aligned."""
    if wl < 0 and wr < 0 and chunk <= 0:
        if not causal:
            return sq * sk
        off = sk - sq
        lo = max(0, -off)       # first row that sees a key
        hi = min(sq, sk - off)  # rows [lo, hi) see i + off + 1 keys; later rows see all sk
        tot = 0
        if hi > lo:
            a, z = lo + off + 1, hi + off
            tot += (a + z) * (hi - lo) // 2
        return tot + max(0, sq - max(hi, lo)) * sk
    rng = row_range(sq, sk, causal, wl, wr, chunk)
    tot = 0
    for i in range(sq):
        lo, hi = rng(i)
        tot += hi - lo
    return tot


def fa_convention(c):
    """Whether a row counts FLOPs by the FA convention (plain mask, square) or visible pairs."""
    return c.plain and c.sq == c.sk


def pairs(c):
    """Counted (query, key) pairs of one (batch, head) under the row's convention."""
    if fa_convention(c):
        return c.sq * c.sk * (0.5 if c.causal else 1.0)
    return float(visible_pairs(c.sq, c.sk, c.causal, c.wl, c.wr, c.chunk))


def flops(c):
    return 2.0 * c.b * c.hq * (c.d + c.d_v) * pairs(c)


def convention(c):
    return FA_CONVENTION if fa_convention(c) else PAIRS_CONVENTION


def tflops(fl, us):
    """TFLOP/s of `fl` FLOPs in `us` microseconds (None when there is no time)."""
    if us is None or not us > 0:
        return None
    return fl / us / 1e6


# ---- suites ----------------------------------------------------------------------------

def headline(dtype="bf16"):
    """Issue 20's table: hdim 128 at batch*seq = 16k (16 heads), 32k with 32/8 heads, hdim 64
    at 2 x 8k and hdim 256 at 1 x 8k; full and causal."""
    out = []
    shapes = [(16384 // s, s, 16, 16, 128) for s in (1024, 2048, 4096, 8192, 16384)]
    shapes += [(1, 32768, 32, 8, 128), (2, 8192, 16, 16, 64), (1, 8192, 16, 16, 256)]
    for (b, s, hq, hk, d) in shapes:
        for causal in (False, True):
            out.append(Case(b, s, s, hq, hk, d, causal, dtype))
    return out


def long_context(dtype="bf16"):
    """64k, 128k, 256k keys, batch 1, 32/8 heads, hdim 128, full and causal."""
    return [Case(1, s, s, 32, 8, 128, c, dtype) for s in (65536, 131072, 262144) for c in (False, True)]


def windows(dtype="bf16"):
    """Issue 20's window rows (batch 1, 16 heads, hdim 128): 64k causal window 4096, 32k
    causal window 1024, 64k causal chunks of 8192, 16k window 2048 both sides."""
    return [Case(1, 65536, 65536, 16, 16, 128, True, dtype, wl=4096),
            Case(1, 32768, 32768, 16, 16, 128, True, dtype, wl=1024),
            Case(1, 65536, 65536, 16, 16, 128, True, dtype, chunk=8192),
            Case(1, 16384, 16384, 16, 16, 128, False, dtype, wl=2048, wr=2048)]


def head_dims(dtype="bf16"):
    """Issue 16's head dims beside the compiled ones: 8k keys, batch 2, 16 heads, full and
    causal; 80 / 96 run on the hdim-128 kernel, 160 on 192, 224 on 256 (zero-filled columns);
    192 and 192 / 128 on their own kernels; 64 / 128 / 256 as anchors."""
    dims = [(64, 0), (80, 0), (96, 0), (128, 0), (160, 0), (192, 0), (224, 0), (256, 0), (192, 128)]
    return [Case(2, 8192, 8192, 16, 16, d, c, dtype, dv=dv) for d, dv in dims for c in (False, True)]


def fp8():
    """Issue 21: hdim 64 / 128 / 256, seq 4k..16k at batch*seq = 16k, 16 heads, full and causal."""
    return [Case(16384 // s, s, s, 16, 16, d, c, "e4m3")
            for d in (128, 64, 256) for s in (4096, 8192, 16384) for c in (False, True)]


# longattn_bench_set_overrides specs of the --variants columns (label, spec): each changes
# one choice of the shipped rules.
VARIANTS = [
    ("sections=0", "sections=0"),
    ("dynamic=on", "dynamic=on"),
    ("rescale=0", "rescale_threshold=0"),
]


def variant_rows(dtype="bf16"):
    """The headline shapes plus 64k (32/8 heads), where the L2 sections and the dynamic
    scheduler matter, and causal query chunks after a long key prefix (chunked prefill over a
    cache; context parallelism's per-rank calls, 16/4 heads: one of two kv-head groups of
    32/8): long, nearly equal tiles. And causal hdim 256 at batch 4 x 4k and 2 x 8k (16 heads):
    the tile order's cases where the pairs' K/V exceed the L2 (plan.cpp section_list)."""
    prefix = [Case(1, sq, sk, 16, 4, 128, True, dtype)
              for sq, sk in ((32768, 131072), (32768, 98304), (16384, 131072), (8192, 131072), (8192, 73728))]
    d256 = [Case(b, s, s, 16, 16, 256, True, dtype) for b, s in ((4, 4096), (2, 8192))]
    return headline(dtype) + [Case(1, 65536, 65536, 32, 8, 128, c, dtype) for c in (False, True)] + prefix + d256


SHAPE_SYNTAX = "BxS:HQ/HK:D[:causal|full[:wN|cN]]"


def parse_shapes(text, dtype):
    """--shapes: 'BxS:HQ/HK:D[:causal|full[:wN|cN]];...' (both masks where none is named), e.g.
    '4x4096:16/16:256:causal;1x16384:16/16:256;16x1000:16/16:64:causal:w256', as Cases of
    `dtype` (the --variants and --fp8 suites' rows; bench.py refuses it with other suites).
    wN: a window of N >= 0 keys before the diagonal (and N after it with the full mask); cN:
    chunks of N > 0 keys."""
    out = []
    for item in filter(None, (t.strip() for t in text.split(";"))):
        parts = item.split(":")
        bad = ValueError(f"--shapes: '{item}' is not {SHAPE_SYNTAX}")
        if len(parts) not in (3, 4, 5) or parts[3:4] not in ([], ["causal"], ["full"]):
            raise bad
        try:
            b, s = (int(x) for x in parts[0].split("x"))
            hq, hk = (int(x) for x in parts[1].split("/"))
            d = int(parts[2])
            extra = parts[4] if len(parts) == 5 else ""
            n = int(extra[1:]) if extra else 0
        except ValueError:
            raise bad from None
        if extra and (extra[0] not in "wc" or n < 0 or (extra[0] == "c" and n == 0)):
            raise bad
        if min(b, s, hq, hk, d) <= 0 or hq % hk:
            raise ValueError(f"--shapes: '{item}': sizes must be positive and HQ a multiple of HK")
        masks = (False, True) if len(parts) == 3 else (parts[3] == "causal",)
        for c in masks:
            kw = {}
            if extra[:1] == "w":
                kw = dict(wl=n, wr=-1 if c else n)
            elif extra[:1] == "c":
                kw = dict(chunk=n)
            out.append(Case(b, s, s, hq, hk, d, c, dtype, **kw))
    return out


def parse_specs(text):
    """'label:spec;label2:spec2' (spec: key=value,...) -> [(label, spec)]; a bare spec is its
    own label."""
    out = []
    for item in filter(None, (x.strip() for x in text.split(";"))):
        label, sep, spec = item.partition(":")
        out.append((label, spec) if sep else (item, item))
    return out


def rotate_sets(bytes_per_set, l2_bytes, requested=0, cap=16):
    """Input sets for rotating timing: `requested`, or enough that together they are 3x the
    L2 (each call then reads K/V that the previous calls evicted), at least 2."""
    if requested > 0:
        return requested
    return max(2, min(cap, -(-3 * l2_bytes // max(1, bytes_per_set))))


def calls_per_window(est_us, window_us=200000.0, most=20):
    """Calls per timed window: about `window_us` of work, 1..most."""
    if est_us is None or not est_us > 0:
        return most
    return max(1, min(most, int(window_us / est_us)))
