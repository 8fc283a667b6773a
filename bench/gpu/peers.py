"""The implementations a row compares, each as an Impl on the row's input sets:
longattn through the C ABI (capi.py; override variants too) and through its Python package,
FlashAttention-3 (Dao-AILab's Hopper kernels, libdew_flash_attn3.so, called as a JAX FFI
target on the same memory through DLPack) and cuDNN (torch SDPA restricted to its
CUDNN_ATTENTION backend). A builder raises Unsupported (or anything) when its peer cannot
run a row; the row shows the column as n/a with that reason.
"""
import ctypes
import math
import os
from types import SimpleNamespace

import torch

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16}
# Kernel names each implementation is expected to launch (timing.unmatched checks them):
# longattn's live in namespace longattn::cuda (sm90::fwd_kernel, combine_kernel,
# sm90::tile_list_kernel, fill_empty_kernel); FA3's in namespace flash (FlashAttnFwdSm90,
# its combine and prepare kernels); cuDNN's are named cudnn_generated_..._sdpa_... or similar.
LONGATTN_KERNELS = r"longattn|fwd_kernel|combine_kernel|tile_list"
FA3_KERNELS = r"flash"
CUDNN_KERNELS = r"cudnn|sdpa|fmha|fprop"


class Unsupported(Exception):
    """This implementation cannot run this row (the message says why)."""


class Impl:
    """One column of a row. call(i) launches on input set i without syncing; sync(last)
    waits for all it launched; out(last) gives set 0's result as a torch tensor of q's layout
    (after call(0)); poison() fills a preallocated output with NaN first, so an unwritten
    element shows in the diff. setup() / teardown() bracket every timed window (overrides,
    SDPA's backend context). flops: when it differs from the row's (e.g. ragged vs dense).
    apart: timed in a second interleaved pass after the row's other columns (the window rows'
    plain calls, much longer than the windowed ones, moved the windowed columns beside them:
    docs/history/PERFORMANCE-sessions-16-33.md, "Columns of one library")."""

    def __init__(self, call, out=None, *, sync=None, setup=None, teardown=None, poison=None,
                 expect="", flops=None, note="", diff=True, kernel=True, wall=False, apart=False):
        self._call, self._out, self._sync = call, out, sync
        self._setup, self._teardown, self._poison = setup, teardown, poison
        self.expect, self.flops, self.note = expect, flops, note
        self.diff, self.kernel, self.wall, self.apart = diff, kernel, wall, apart
        self.last = None

    def call(self, i):
        self.last = self._call(i)

    def sync(self):
        if self._sync:
            self._sync(self.last)
        torch.cuda.synchronize()

    def setup(self):
        if self._setup:
            self._setup()

    def teardown(self):
        if self._teardown:
            self._teardown()

    def check(self):
        """One call on set 0; its output (for the diff), or None when it has none."""
        if self._poison:
            self._poison()
        self.setup()
        try:
            self.call(0)
            self.sync()
        finally:
            self.teardown()
        return self._out(self.last) if self._out else self.last


def make_sets(c, n, seed):
    """n input sets (q, k, v, o) of case c, random N(0, 1) (never zeros: STYLE.md)."""
    dt = DTYPES[c.dtype]
    gen = torch.Generator(device="cuda").manual_seed(seed)
    out = []
    for _ in range(n):
        q = torch.randn(c.b, c.sq, c.hq, c.d, device="cuda", dtype=dt, generator=gen)
        k = torch.randn(c.b, c.sk, c.hk, c.d, device="cuda", dtype=dt, generator=gen)
        v = torch.randn(c.b, c.sk, c.hk, c.d_v, device="cuda", dtype=dt, generator=gen)
        out.append(SimpleNamespace(q=q, k=k, v=v, o=torch.empty(c.b, c.sq, c.hq, c.d_v, device="cuda", dtype=dt)))
    return out


def set_bytes(c):
    """Bytes of one input set (q, k, v, o)."""
    el = 1 if c.dtype == "e4m3" else 2
    return el * c.b * (c.sq * c.hq * (c.d + c.d_v) + c.sk * c.hk * (c.d + c.d_v))


# ---- longattn ------------------------------------------------------------------------------

def overrides_hooks(la, spec):
    """(setup, teardown) that set an overrides spec and restore the rules; a bad spec raises now."""
    if not spec:
        return None, None
    with la.overrides(spec):  # validates the spec (raises with the library's message)
        pass
    return (lambda: la.set_overrides(spec)), (lambda: la.set_overrides(""))


def capi_impl(la, c, sets, spec="", softcap=0.0, sinks=None, note="", wall=False):
    """longattn's dense call (bf16 / f16; window, chunk, softcap, sinks) through the C ABI."""
    if la is None:
        raise Unsupported("no liblongattn_capi.so (--lib)")
    if c.dtype not in DTYPES:
        raise Unsupported(f"dense capi call takes bf16/f16, not {c.dtype}")
    setup, teardown = overrides_hooks(la, spec)

    def call(i):
        s = sets[i]
        la.dense(s.q, s.k, s.v, s.o, c.causal, softcap=softcap, sinks=sinks, wl=c.wl, wr=c.wr, chunk=c.chunk)
    return Impl(call, lambda _: sets[0].o, setup=setup, teardown=teardown, poison=lambda: sets[0].o.fill_(math.nan),
                expect=LONGATTN_KERNELS, note=note or (f"overrides {spec}" if spec else ""), wall=wall)


def py_impl(c, sets):
    """longattn's Python package (flash_attn_func, output allocated per call): wall time only."""
    try:
        import longattn
    except Exception as e:  # noqa: BLE001
        raise Unsupported(f"import longattn failed ({type(e).__name__}: {str(e)[:80]}); PYTHONPATH?") from e
    if not longattn.cuda_available():
        raise Unsupported("longattn Python package built without CUDA")
    kw = {"causal": c.causal}
    if c.wl >= 0 or c.wr >= 0:
        kw["window_size"] = (c.wl, c.wr)
    if c.chunk > 0:
        kw["attention_chunk"] = c.chunk
    return Impl(lambda i: longattn.flash_attn_func(sets[i].q, sets[i].k, sets[i].v, **kw), lambda o: o,
                expect=LONGATTN_KERNELS, kernel=False, wall=True)


# ---- FlashAttention-3 ----------------------------------------------------------------------

class FA3:
    """libdew_flash_attn3.so's forward targets registered with JAX's FFI (as
    /work/shared/bench/fa3_side_by_side.py does). Results: out (q's shape), LSE and two
    scratch outputs; attributes softmax_scale (f64), is_causal, window_size_left/right (i64,
    -1 unbounded; causal takes right = 0). Causal is bottom-right aligned, GQA native."""

    def __init__(self, libdir):
        path = os.path.join(libdir or "", "libdew_flash_attn3.so")
        if not libdir or not os.path.isfile(path):
            raise Unsupported(f"{path} not found (fetch: /work/shared/bench/fetch_fa3.sh DIR; run with --fa3 DIR)")
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX must not take the GPU's memory
        import jax
        import jax.numpy as jnp
        import numpy as np
        self.jax, self.jnp, self.np = jax, jnp, np
        self.lib = ctypes.cdll.LoadLibrary(path)
        for name in ("dew_flash3_mha_fwd", "dew_flash3_mha_varlen_fwd"):
            jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(getattr(self.lib, name)), platform="CUDA")
        self.gpus = jax.devices("gpu")  # raises when JAX has no CUDA backend
        try:
            self.lib.dew_flash3_architectures.restype = ctypes.c_char_p
            self.arch = self.lib.dew_flash3_architectures().decode()
        except Exception:  # noqa: BLE001
            self.arch = "?"
        self.version = jax.__version__

    def why_not(self, c, sinks=False, softcap=0.0):
        if c.dtype not in DTYPES:
            return f"the FA3 library has no {c.dtype} forward"
        if c.chunk > 0:
            return "FA3 has no chunked attention"
        if c.d_v != c.d or c.d % 8 or c.d > 256:
            return "the FFI takes one head dim (multiple of 8, <= 256) for q, k and v"
        if sinks:
            return "sinks are not a kernel feature of this FFI (applied outside it in JAX)"
        if softcap:
            return "this FFI has no softcap attribute"
        return None

    def _attrs(self, c):
        wl = c.wl if c.wl >= 0 else -1
        wr = 0 if c.causal else (c.wr if c.wr >= 0 else -1)
        return dict(softmax_scale=self.np.float64(c.d ** -0.5), is_causal=bool(c.causal),
                    window_size_left=self.np.int64(wl), window_size_right=self.np.int64(wr))

    def _results(self, out_shape, lse_shape, dtype):
        jax, jnp = self.jax, self.jnp
        dt = jnp.bfloat16 if dtype == "bf16" else jnp.float16
        return (jax.ShapeDtypeStruct(out_shape, dt), jax.ShapeDtypeStruct(lse_shape, jnp.float32),
                jax.ShapeDtypeStruct((1, 1, 1, 1), jnp.float32), jax.ShapeDtypeStruct((1, 1, 1), jnp.float32))

    def dense_fn(self, c):
        call = self.jax.ffi.ffi_call("dew_flash3_mha_fwd",
                                     self._results((c.b, c.sq, c.hq, c.d), (c.b, c.hq, c.sq), c.dtype))
        attrs = self._attrs(c)
        return self.jax.jit(lambda q, k, v: call(q, k, v, **attrs)[0])

    def varlen_fn(self, total, hq, d, max_len, c):
        call = self.jax.ffi.ffi_call("dew_flash3_mha_varlen_fwd", self._results((total, hq, d), (hq, total), c.dtype))
        attrs = self._attrs(c)
        ml = self.np.int64(max_len)
        return self.jax.jit(lambda q, k, v, cu: call(q, k, v, cu, cu, max_seqlen=ml, max_seqlen_k=ml, **attrs)[0])

    def to_jax(self, t):
        return self.jax.dlpack.from_dlpack(t)

    def to_torch(self, a):
        try:
            return torch.from_dlpack(a)
        except Exception:  # noqa: BLE001 - older pairs: a host round trip
            return torch.from_numpy(self.np.asarray(a.astype(self.jnp.float32))).cuda()

    @staticmethod
    def sync(last):
        if last is not None:
            last.block_until_ready()


def fa3_impl(fa3, c, sets, note=""):
    if fa3 is None:
        raise Unsupported("FA3 not loaded")
    why = fa3.why_not(c)
    if why:
        raise Unsupported(why)
    f = fa3.dense_fn(c)
    torch.cuda.synchronize()  # JAX reads the inputs on its own stream
    js = [(fa3.to_jax(s.q), fa3.to_jax(s.k), fa3.to_jax(s.v)) for s in sets]
    return Impl(lambda i: f(*js[i]), fa3.to_torch, sync=fa3.sync, expect=FA3_KERNELS, note=note)


def fa3_varlen_impl(fa3, c, q, k, v, cu, max_len):
    """FA3 over packed (total, heads, d) sequences sharing int32 offsets cu (one input set)."""
    if fa3 is None:
        raise Unsupported("FA3 not loaded")
    why = fa3.why_not(c)
    if why:
        raise Unsupported(why)
    f = fa3.varlen_fn(q.shape[0], q.shape[1], q.shape[2], max_len, c)
    torch.cuda.synchronize()
    j = (fa3.to_jax(q), fa3.to_jax(k), fa3.to_jax(v), fa3.to_jax(cu))
    return Impl(lambda i: f(*j), fa3.to_torch, sync=fa3.sync, expect=FA3_KERNELS)


# ---- cuDNN (torch SDPA) ----------------------------------------------------------------------

def sdpa_impl(c, sets, note=""):
    """torch SDPA restricted to cuDNN. SDPA's is_causal is top-left aligned, so causal rows
    with seq_q != seq_k pass an explicit boolean bottom-right mask (named in the note; n/a if
    cuDNN refuses it: torch's causal_lower_right would silently run the math path under a
    cuDNN-only restriction). GQA: enable_gqa, else K/V expanded once before timing."""
    if c.dtype not in DTYPES:
        raise Unsupported("SDPA takes bf16/f16 here (fp8: the fp8 suite's cuDNN column)")
    if not c.plain:
        raise Unsupported("SDPA has no sliding-window or chunk argument")
    import contextlib

    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    g = c.hq // c.hk
    views = [(s.q.transpose(1, 2), s.k.transpose(1, 2), s.v.transpose(1, 2)) for s in sets]
    if c.causal and c.sq != c.sk:
        mask = torch.ones(c.sq, c.sk, dtype=torch.bool, device="cuda").tril(diagonal=c.sk - c.sq)
        masks = [("bottom-right bool mask", {"attn_mask": mask})]
    else:
        masks = [("", {"is_causal": True} if c.causal else {})]
    tries = [(m, kw, native) for m, kw in masks for native in ((True, False) if g > 1 else (True,))]
    errs = []
    for mnote, kw, native in tries:
        kw = dict(kw)
        try:
            if g > 1 and native:
                kw["enable_gqa"] = True
                vs = views
            elif g > 1:
                vs = [(q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)) for q, k, v in views]
            else:
                vs = views
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                F.scaled_dot_product_attention(*vs[0], **kw)
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001
            errs.append(f"[{'enable_gqa' if native and g > 1 else 'plain'}] {type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}")
            continue
        stack = contextlib.ExitStack()

        def setup(stack=stack):
            stack.enter_context(sdpa_kernel([SDPBackend.CUDNN_ATTENTION]))

        notes = [x for x in (note, mnote, "" if native or g == 1 else "K/V expanded (no enable_gqa)") if x]
        return Impl(lambda i, vs=vs, kw=kw: F.scaled_dot_product_attention(*vs[i], **kw), lambda o: o.transpose(1, 2),
                    setup=setup, teardown=stack.close, expect=CUDNN_KERNELS, note="; ".join(notes))
    raise Unsupported("cuDNN refused: " + " | ".join(errs))
