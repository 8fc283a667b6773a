"""The --fp8 suite's inputs and its two fp8 columns: longattn (capi
longattn_bench_forward_fp8: e4m3 q / k / v, float32 (batch, heads_kv) descales, bf16 out)
and cuDNN's FP8 SDPA graph through the nvidia-cudnn-frontend wheel (module `cudnn`),
following /work/shared/bench/cudnn_fp8_sdpa.py: BSHD memory, per-tensor power-of-2
descales, scale_s = 448, e4m3 output with scale_o (Hopper's engine writes fp8 only; timings
compare equal inputs, not equal output bytes), causal TOP_LEFT + right_bound 0 (square rows
only, where that equals bottom-right) else use_causal_mask.

Accuracy: each column's output on 128 rows of batch 0 against float32 attention of the
dequantized inputs (the inputs every column sees, up to its own rounding).
"""
import glob
import math
import os
import re
import site
from types import SimpleNamespace

import torch

from peers import LONGATTN_KERNELS, Impl, Unsupported, overrides_hooks

FP8_MAX = 448.0
NROWS = 128
U = dict(q=1, k=2, v=3, o=4, dq=5, dk=6, dv=7, ds=8, ss=9, so=10, amax_s=11, amax_o=12)


def quant(x):
    """(e4m3 tensor, descale, exact bf16 dequantization) with a power-of-2 per-tensor scale."""
    scale = 2.0 ** math.floor(math.log2(FP8_MAX / x.abs().max().clamp_min(1e-6).item()))
    x8 = (x.float() * scale).to(torch.float8_e4m3fn)
    return x8, 1.0 / scale, x8.to(torch.bfloat16) * (1.0 / scale)


def make_fp8_set(c, seed):
    """One input set: e4m3 q8 / k8 / v8, descale floats and (b, hk) descale tensors, the
    bf16 dequantized q / k / v (what the bf16 columns run on), a bf16 out."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    s = SimpleNamespace()
    for n, h, seq in (("q", c.hq, c.sq), ("k", c.hk, c.sk), ("v", c.hk, c.sk)):
        x8, ds, xd = quant(torch.randn(c.b, seq, h, c.d, device="cuda", dtype=torch.bfloat16, generator=gen))
        setattr(s, n + "8", x8)
        setattr(s, n, xd)
        setattr(s, n + "_ds", ds)
        setattr(s, n + "_dst", torch.full((c.b, c.hk), ds, device="cuda", dtype=torch.float32))
    s.o = torch.empty(c.b, c.sq, c.hq, c.d, device="cuda", dtype=torch.bfloat16)
    return s


def reference_rows(c, s):
    """(rows, fp32 reference (hq, rows, d)) of batch 0 on the dequantized inputs."""
    rows = torch.linspace(0, c.sq - 1, NROWS, device="cuda").long()
    qr = s.q[0, rows].float().transpose(0, 1)
    kr, vr = (x[0].float().transpose(0, 1).repeat_interleave(c.hq // c.hk, 0) for x in (s.k, s.v))
    sc = torch.einsum("hrd,hsd->hrs", qr, kr) / math.sqrt(c.d)
    keys = torch.arange(c.sk, device="cuda")[None, None, :]
    diag = (rows + c.sk - c.sq)[None, :, None]  # bottom-right
    if c.causal:
        sc.masked_fill_(keys > diag, float("-inf"))
    if c.wr >= 0:
        sc.masked_fill_(keys > diag + c.wr, float("-inf"))
    if c.wl >= 0:
        sc.masked_fill_(keys < diag - c.wl, float("-inf"))
    if c.chunk > 0:  # the chunk of the row's bottom-right position
        first = torch.div(diag, c.chunk, rounding_mode="floor") * c.chunk
        sc.masked_fill_((keys < first) | (keys >= first + c.chunk), float("-inf"))
    return rows, torch.einsum("hrs,hsd->hrd", sc.softmax(-1), vr)


def row_error(out, rows, ref):
    """max |out - ref| on the sampled rows of batch 0 (out: (b, s, h, d), any float dtype)."""
    o = out[0].float()[rows].transpose(0, 1)
    return (o - ref).abs().max().item()


def longattn_fp8_impl(la, c, s, spec=""):
    """longattn's fp8 call through the C ABI; `spec`: internal overrides for this column."""
    if la is None:
        raise Unsupported("no liblongattn_capi.so (--lib)")
    if not la.has("longattn_bench_forward_fp8"):
        raise Unsupported("this liblongattn_capi.so has no longattn_bench_forward_fp8 (rebuild)")
    setup, teardown = overrides_hooks(la, spec)
    if not c.plain and not la.has("longattn_bench_forward_fp8_ex"):
        raise Unsupported("this liblongattn_capi.so has no fp8 windows (longattn_bench_forward_fp8_ex)")
    if c.chunk > 0 and not la.has("longattn_bench_forward_fp8_mask"):
        raise Unsupported("this liblongattn_capi.so has no fp8 chunks (longattn_bench_forward_fp8_mask)")
    return Impl(lambda i: la.fp8(s.q8, s.k8, s.v8, s.o, s.q_dst, s.k_dst, s.v_dst, c.causal, wl=c.wl, wr=c.wr,
                                 chunk=c.chunk),
                lambda _: s.o,
                setup=setup, teardown=teardown, poison=lambda: s.o.fill_(math.nan), expect=LONGATTN_KERNELS,
                note=f"overrides {spec}" if spec else "")


def py_fp8_impl(c, s):
    """longattn's Python package on the e4m3 set (flash_attn_func with (batch, heads_kv)
    descales, bf16 output allocated per call): wall time only."""
    try:
        import longattn
    except Exception as e:  # noqa: BLE001
        raise Unsupported(f"import longattn failed ({type(e).__name__}: {str(e)[:80]}); PYTHONPATH?") from e
    if not longattn.cuda_available():
        raise Unsupported("longattn Python package built without CUDA")
    kw = {"causal": c.causal, "q_descale": s.q_dst, "k_descale": s.k_dst, "v_descale": s.v_dst}
    if c.wl >= 0 or c.wr >= 0:
        kw["window_size"] = (c.wl, c.wr)
    if c.chunk > 0:
        kw["attention_chunk"] = c.chunk
    return Impl(lambda i: longattn.flash_attn_func(s.q8, s.k8, s.v8, **kw), lambda o: o, expect=LONGATTN_KERNELS,
                kernel=False, wall=True)


# ---- cuDNN FP8 through cudnn-frontend ------------------------------------------------------

def _loaded(name_re):
    with open("/proc/self/maps") as fh:
        return sorted(set(re.findall(r"(/\S*/" + name_re + r")$", fh.read(), re.M)))


def load_frontend():
    """The `cudnn` module, pointed at the libcudnn / libcudart torch already loaded (the
    frontend looks in LD_LIBRARY_PATH first) and with NVRTC loaded (Hopper's FP8 SDPA engine
    is runtime-compiled). Raises when the wheel is not importable."""
    import ctypes
    torch.backends.cudnn.version()  # loads libcudnn
    sps = site.getsitepackages() + [site.getusersitepackages()]
    libs = _loaded(r"libcudnn\.so(?:\.\d+)*") or [p for sp in sps for p in glob.glob(f"{sp}/nvidia/cudnn/lib/libcudnn.so.9")]
    if libs:
        os.environ["LD_LIBRARY_PATH"] = os.path.dirname(libs[0]) + os.pathsep + os.environ.get("LD_LIBRARY_PATH", "")
    rt = _loaded(r"libcudart\.so(?:\.\d+)+")
    if rt and "CUDNN_FRONTEND_CUDART_LIB_NAME" not in os.environ:
        os.environ["CUDNN_FRONTEND_CUDART_LIB_NAME"] = rt[0]
    if not _loaded(r"libnvrtc\.so(?:\.\d+)*"):
        for p in sorted(p for sp in sps for p in glob.glob(f"{sp}/nvidia/*/lib/libnvrtc.so.*")):
            try:
                ctypes.CDLL(p, mode=ctypes.RTLD_GLOBAL)
            except OSError:
                pass
    import cudnn
    return cudnn


class CudnnFp8:
    def __init__(self):
        self.cudnn = load_frontend()
        self.version = f"{self.cudnn.__version__} (backend {self.cudnn.backend_version()})"
        self.handle = self.cudnn.create_handle()

    def _graph(self, c, mask_api):
        cudnn = self.cudnn
        f8, fl = cudnn.data_type.FP8_E4M3, cudnn.data_type.FLOAT
        g = cudnn.pygraph(io_data_type=f8, intermediate_data_type=fl, compute_data_type=fl, handle=self.handle)
        sq = (c.sq * c.hq * c.d, c.d, c.hq * c.d, 1)  # BSHD memory, BHSD dims
        sk = (c.sk * c.hk * c.d, c.d, c.hk * c.d, 1)
        q = g.tensor(uid=U["q"], dim=(c.b, c.hq, c.sq, c.d), stride=sq, data_type=f8)
        k = g.tensor(uid=U["k"], dim=(c.b, c.hk, c.sk, c.d), stride=sk, data_type=f8)
        v = g.tensor(uid=U["v"], dim=(c.b, c.hk, c.sk, c.d), stride=sk, data_type=f8)
        sc = {n: g.tensor(uid=U[n], dim=(1, 1, 1, 1), stride=(1, 1, 1, 1), data_type=fl)
              for n in ("dq", "dk", "dv", "ds", "ss", "so")}
        kw = dict(q=q, k=k, v=v, descale_q=sc["dq"], descale_k=sc["dk"], descale_v=sc["dv"], descale_s=sc["ds"],
                  scale_s=sc["ss"], scale_o=sc["so"], attn_scale=1.0 / math.sqrt(c.d), generate_stats=False)
        if c.causal and mask_api == "bounds":
            kw.update(diagonal_alignment=cudnn.diagonal_alignment.TOP_LEFT, right_bound=0)
        elif c.causal:
            kw.update(use_causal_mask=True)
        o, _stats, amax_s, amax_o = g.sdpa_fp8(**kw)
        o.set_uid(U["o"]).set_output(True).set_dim((c.b, c.hq, c.sq, c.d)).set_stride(sq).set_data_type(f8)
        for t, n in ((amax_s, "amax_s"), (amax_o, "amax_o")):
            t.set_uid(U[n]).set_output(True).set_dim((1, 1, 1, 1)).set_stride((1, 1, 1, 1)).set_data_type(fl)
        g.validate()
        g.build_operation_graph()
        g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        g.check_support()
        g.build_plans()
        return g

    def impl(self, c, s, amax_o):
        """An Impl of the graph on set s; amax_o (an estimate of max |out|) sets scale_o."""
        if c.causal and c.sq != c.sk:
            raise Unsupported("top-left causal only here (rows are square)")
        if not c.plain:
            raise Unsupported("no window or chunk in this cuDNN fp8 graph")
        self.cudnn.set_stream(self.handle, torch.cuda.current_stream().cuda_stream)
        errs, g, api = [], None, ""
        for api in (("bounds", "legacy") if c.causal else ("none",)):
            try:
                g = self._graph(c, api)
                break
            except Exception as e:  # noqa: BLE001
                msg = str(e).strip()
                msg = msg[msg.index("the backend declined"):] if "the backend declined" in msg else msg
                errs.append(f"[mask={api}] {type(e).__name__}: {msg.splitlines()[0][:200] if msg else ''}")
        if g is None:
            raise Unsupported("cuDNN fp8 graph: " + " | ".join(errs))
        scale_o = 2.0 ** math.floor(math.log2(FP8_MAX / max(amax_o * 1.05, 1e-6)))

        def dev(x):
            return torch.full((1, 1, 1, 1), x, dtype=torch.float32, device="cuda")
        o = torch.empty(c.b, c.sq, c.hq, c.d, dtype=torch.float8_e4m3fn, device="cuda")
        pack = {U["q"]: s.q8.transpose(1, 2), U["k"]: s.k8.transpose(1, 2), U["v"]: s.v8.transpose(1, 2),
                U["o"]: o.transpose(1, 2), U["dq"]: dev(s.q_ds), U["dk"]: dev(s.k_ds), U["dv"]: dev(s.v_ds),
                U["ds"]: dev(1.0 / FP8_MAX), U["ss"]: dev(FP8_MAX), U["so"]: dev(scale_o),
                U["amax_s"]: dev(0.0), U["amax_o"]: dev(0.0)}
        ws = torch.empty(max(g.get_workspace_size(), 1), dtype=torch.uint8, device="cuda")
        handle = self.handle
        note = f"fp8 out (scale_o {scale_o:g})" + (f", mask {api}" if c.causal else "")
        return Impl(lambda i: g.execute(pack, ws, handle=handle), lambda _: o.float() / scale_o,
                    expect=r"cudnn|sdpa|fmha|fprop|flash|attn", note=note)
