"""Rows of the dense suites (default / --long / --window / --fp8 / --variants), built from
shapes.py's cases: which columns each row has and on what inputs. --features is in
features.py."""
from types import SimpleNamespace

import torch

import shapes
from fp8 import longattn_fp8_impl, make_fp8_set, py_fp8_impl, reference_rows, row_error
from peers import Unsupported, capi_impl, fa3_impl, make_sets, py_impl, sdpa_impl, set_bytes
from runner import Row


class Ctx:
    """What every row builder needs: the loaded implementations (or why each is missing),
    the L2 size and the command line."""

    def __init__(self, cfg, la, la_why, fa3, fa3_why, l2):
        self.cfg, self.la, self.la_why, self.fa3, self.fa3_why, self.l2 = cfg, la, la_why, fa3, fa3_why, l2
        self._cf8, self._cf8_why = None, None
        self.base = None  # --baseline: a second capi library (an earlier build) for A/B
        self.bases = []  # every --baseline: (column name, library)

    def need_fa3(self):
        if self.fa3 is None:
            raise Unsupported(self.fa3_why)
        return self.fa3

    def need_la(self):
        if self.la is None:
            raise Unsupported(self.la_why)
        return self.la

    def cudnn_fp8(self):
        """cuDNN's FP8 graph builder, loaded on first use (or the reason it is not there)."""
        if self._cf8 is None and self._cf8_why is None:
            try:
                from fp8 import CudnnFp8
                self._cf8 = CudnnFp8()
            except Exception as e:  # noqa: BLE001
                self._cf8_why = (f"cudnn-frontend not importable ({type(e).__name__}: {str(e)[:100]}); "
                                 "pip install .whl/nvidia_cudnn_frontend-*.whl")
        if self._cf8 is None:
            raise Unsupported(self._cf8_why)
        return self._cf8


def check_memory(need_bytes, what):
    """Raises MemoryError when the GPU has less free memory than need_bytes."""
    free, _ = torch.cuda.mem_get_info()
    if free < need_bytes:
        raise MemoryError(f"{what}: needs ~{need_bytes / 2**30:.1f} GiB, {free / 2**30:.1f} GiB free")


def label(c):
    return shapes.shape_name(c) + ("" if c.dtype == "bf16" else f" {c.dtype}")


def dense_row(ctx, c, *, rotate=False, wall=False, variants=(), peers=("FA3", "cuDNN"), seed=1):
    """A dense row: FA3 / cuDNN / longattn on the same inputs; rotate: also time over input
    sets cycled (shapes.rotate_sets); wall: per-call Python times, longattn's package too;
    variants: (label, overrides spec) longattn columns."""
    nsets = shapes.rotate_sets(set_bytes(c), ctx.l2, ctx.cfg.rotate) if rotate else 1
    check_memory(set_bytes(c) * (nsets + 3), label(c))
    sets = make_sets(c, nsets, seed)
    row = Row(label(c), c)
    row.rotate = nsets if rotate else 0
    row.ref = ["FA3", "cuDNN"]
    if "FA3" in peers:
        row.add("FA3", lambda: fa3_impl(ctx.need_fa3(), c, sets))
    if "cuDNN" in peers:
        row.add("cuDNN", lambda: sdpa_impl(c, sets))
    row.add("longattn", lambda: capi_impl(ctx.need_la(), c, sets))
    for name, lib in ctx.bases:
        row.add(name, lambda lib=lib: capi_impl(lib, c, sets))
    for lab, spec in variants:
        row.add(lab, lambda spec=spec: capi_impl(ctx.need_la(), c, sets, spec=spec))
    if wall:
        for impl in row.impls.values():
            impl.wall = True
        row.add("longattn (py)", lambda: py_impl(c, sets))
    return row


def window_row(ctx, c, seed=2):
    """A window / chunk row, TFLOP/s on visible pairs for every column; 'plain' columns run
    the same inputs without the window (the per-visible-key comparison). The plain calls run
    much longer than the windowed ones; interleaved with them, copies of one library read apart
    on the windowed call (docs/history/PERFORMANCE-sessions-16-33.md,
    "Columns of one library"), so they are timed in
    a pass of their own after the windowed columns (Impl.apart)."""
    check_memory(set_bytes(c) * 4, label(c))
    sets = make_sets(c, 1, seed)
    row = Row(label(c), c)
    row.ref = ["FA3"]
    plain = c.with_(wl=-1, wr=-1, chunk=0)
    plain_flops = 2.0 * c.b * c.hq * (c.d + c.d_v) * shapes.visible_pairs(c.sq, c.sk, c.causal)
    row.add("FA3", lambda: fa3_impl(ctx.need_fa3(), c, sets))
    row.add("cuDNN", lambda: sdpa_impl(c, sets))
    row.add("longattn", lambda: capi_impl(ctx.need_la(), c, sets))
    for name, lib in ctx.bases:  # earlier trees (run.sh .old*): the windowed call
        row.add(name, lambda lib=lib: capi_impl(lib, c, sets))
    for name, build in (("FA3 plain", lambda: fa3_impl(ctx.need_fa3(), plain, sets)),
                        ("longattn plain", lambda: capi_impl(ctx.need_la(), plain, sets))):
        impl = row.add(name, build)
        if impl:
            impl.flops, impl.diff, impl.note = plain_flops, False, f"{shapes.mask_name(plain)}, no window"
            impl.apart = True
    return row


def fp8_row(ctx, c, seed=3, variants=(), wall=False):
    """longattn fp8 and cuDNN fp8 on e4m3 inputs; longattn bf16 and FA3 bf16 on their exact
    bf16 dequantization. Errors against float32 attention of the dequantized inputs.
    variants: (label, overrides spec) longattn fp8 columns ("<label> fp8"); wall: per-call
    Python times, longattn's package on the e4m3 inputs too."""
    check_memory(set_bytes(c.with_(dtype="bf16")) * 4, label(c))
    s = make_fp8_set(c, seed)
    rows, ref = reference_rows(c, s)
    row = Row(label(c), c)
    row.error_of = lambda o: row_error(o, rows, ref)
    row.add("longattn fp8", lambda: longattn_fp8_impl(ctx.need_la(), c, s))
    for name, lib in ctx.bases:
        row.add(f"{name} fp8", lambda lib=lib: longattn_fp8_impl(lib, c, s))
    for lab, spec in variants:
        row.add(f"{lab} fp8", lambda spec=spec: longattn_fp8_impl(ctx.need_la(), c, s, spec=spec))
    row.add("cuDNN fp8", lambda: ctx.cudnn_fp8().impl(c, s, ref.abs().max().item()))
    cb = c.with_(dtype="bf16")
    sets = [SimpleNamespace(q=s.q, k=s.k, v=s.v, o=torch.empty_like(s.q))]
    row.add("longattn bf16", lambda: capi_impl(ctx.need_la(), cb, sets))
    row.add("FA3 bf16", lambda: fa3_impl(ctx.need_fa3(), cb, sets))
    if wall:
        for impl in row.impls.values():
            impl.wall = True
        row.add("longattn fp8 (py)", lambda: py_fp8_impl(c, s))
    return row


def suite_rows(ctx, name):
    """(label, mask, builder) of every row of a dense suite."""
    cfg = ctx.cfg
    if name == "default":
        cases = shapes.headline(cfg.dtype)
        return [(c, lambda c=c: dense_row(ctx, c, rotate=not cfg.no_rotate, wall=cfg.wall)) for c in cases]
    if name == "long":
        return [(c, lambda c=c: dense_row(ctx, c)) for c in shapes.long_context(cfg.dtype)]
    if name == "window":
        return [(c, lambda c=c: window_row(ctx, c)) for c in shapes.windows(cfg.dtype)]
    if name == "fp8":
        specs = shapes.parse_specs(cfg.specs) if cfg.specs else ()
        rows = shapes.parse_shapes(cfg.shapes, "e4m3") if cfg.shapes else shapes.fp8()
        return [(c, lambda c=c: fp8_row(ctx, c, variants=specs, wall=cfg.wall)) for c in rows]
    if name == "dims":
        # 192 / 128: the features suite's split row (the capi's dense entry takes dv = d).
        import features  # imports this module
        return [(c, (lambda c=c: features.split_dims_row(ctx, c.causal, b=c.b, s=c.sq, h=c.hq)) if c.d_v != c.d
                 else (lambda c=c: dense_row(ctx, c))) for c in shapes.head_dims(cfg.dtype)]
    if name == "variants":
        specs = shapes.parse_specs(cfg.specs) if cfg.specs else shapes.VARIANTS
        rows = shapes.parse_shapes(cfg.shapes, cfg.dtype) if cfg.shapes else shapes.variant_rows(cfg.dtype)
        return [(c, lambda c=c: dense_row(ctx, c, variants=specs)) for c in rows]
    raise ValueError(name)
