"""PyTorch tensors: CPU tensors in CI when torch is installed; CUDA tests (marked `gpu`) run
on a Hopper device with a CUDA build of longattn. Skipped cleanly without torch / a GPU."""

import functools
import os

import numpy as np
import pytest

import longattn
from conftest import assert_oracle
from reference import visible

torch = pytest.importorskip("torch")

HAS_GPU = torch.cuda.is_available() and longattn.cuda_available()
# The device tests run on CUDA; LONGATTN_GPU_TESTS_ON_CPU=1 runs their logic on CPU tensors
# (the CPU backend) to check the tests themselves on a machine without a GPU.
DEV = "cuda" if HAS_GPU else ("cpu" if os.environ.get("LONGATTN_GPU_TESTS_ON_CPU") else None)
gpu = pytest.mark.skipif(DEV is None, reason="needs a CUDA sm_90 device and a CUDA build of longattn")
cuda_only = pytest.mark.skipif(not HAS_GPU, reason="needs a CUDA sm_90 device")


def to_np(x):
    """torch -> numpy float32 (bf16 has no numpy dtype without ml_dtypes)."""
    return x.detach().float().cpu().numpy()


def t_randn(shape, dtype, device, gen, scale=1.0):
    return (torch.randn(shape, generator=gen, dtype=torch.float32) * scale).to(dtype).to(device)


def torch_reference(q, k, v, causal=False, scale=None, window=(-1, -1), sinks=None, chunk=0):
    """float64 PyTorch attention (dense, bottom-right aligned masks, GQA)."""
    q, k, v = (x.double() for x in (q, k, v))
    B, Sq, H, D = q.shape
    Sk, Hkv = k.shape[1], k.shape[2]
    k = k.repeat_interleave(H // Hkv, dim=2)
    v = v.repeat_interleave(H // Hkv, dim=2)
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) * (scale or D ** -0.5)
    vis = torch.from_numpy(visible(Sq, Sk, causal=causal, window=window, chunk=chunk)).to(q.device)
    s = s.masked_fill(~vis, float("-inf"))
    if sinks is not None:
        sink = sinks.double().view(1, H, 1, 1).expand(B, H, Sq, 1)
        s = torch.cat([s, sink], dim=-1)
    prob = torch.softmax(s, dim=-1).nan_to_num(0.0)
    if sinks is not None:
        prob = prob[..., :-1]
    return torch.einsum("bhqk,bkhd->bqhd", prob, v)


# ---------------------------------------------------------------- CPU tensors (CI if torch)

@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_cpu_tensors_in_torch_out(dtype):
    g = torch.Generator().manual_seed(1)
    q, k, v = (t_randn(s, dtype, "cpu", g) for s in ((2, 33, 4, 64), (2, 45, 2, 64), (2, 45, 2, 64)))
    out, lse = longattn.flash_attn_func(q, k, v, causal=True, return_attn_probs=True)
    assert isinstance(out, torch.Tensor) and out.dtype == dtype and out.device.type == "cpu"
    assert lse.dtype == torch.float32 and lse.shape == (2, 4, 33)
    name = {torch.bfloat16: "bf16", torch.float16: "f16", torch.float32: "f32"}[dtype]
    qn, kn, vn = (to_np(x) for x in (q, k, v))  # exact: every value is representable in f32
    assert_oracle(to_np(out), to_np(lse), qn, kn, vn, in_dtype=name, causal=True)


def test_cpu_non_contiguous_and_out():
    g = torch.Generator().manual_seed(2)
    q = t_randn((2, 4, 21, 32), torch.float32, "cpu", g).transpose(1, 2)  # (b, s, h, d) view
    k = t_randn((2, 2, 30, 32), torch.float32, "cpu", g).transpose(1, 2)
    v = t_randn((2, 2, 30, 32), torch.float32, "cpu", g).transpose(1, 2)
    out = torch.full((2, 21, 4, 32), float("nan"))
    res = longattn.flash_attn_func(q, k, v, causal=True, out=out)
    assert res is out
    torch.testing.assert_close(out.double(), torch_reference(q, k, v, causal=True), atol=1e-4, rtol=0)


def test_custom_op_and_compile_cpu():
    lt = pytest.importorskip("longattn.torch_ops")
    g = torch.Generator().manual_seed(3)
    q, k, v = (t_randn(s, torch.float32, "cpu", g) for s in ((1, 17, 2, 32), (1, 17, 1, 32), (1, 17, 1, 32)))
    ref = longattn.flash_attn_func(q, k, v, causal=True)
    torch.testing.assert_close(lt.flash_attn_func(q, k, v, causal=True), ref, atol=0, rtol=0)
    args = (q, k, v, None, None, None, None, None, 0, 0, None, None, None, None, None, 0.0, True,
            -1, -1, 0, "auto", 0, 0)
    out, lse = torch.ops.longattn.fwd(*args)
    torch.testing.assert_close(out, ref, atol=0, rtol=0)
    torch.library.opcheck(torch.ops.longattn.fwd.default, args,
                          test_utils=("test_schema", "test_faketensor"))
    # A graph with the op compiles without a break (aot_eager: no C++ compiler needed).
    f = torch.compile(lambda a, b, c: lt.flash_attn_func(a, b, c, causal=True) * 2,
                      backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(f(q, k, v), ref * 2, atol=0, rtol=0)


def test_errors_keep_types():
    q = torch.randn(1, 9, 4, 32)
    k = torch.randn(1, 9, 3, 32)
    with pytest.raises(ValueError, match="kv heads"):
        longattn.flash_attn_func(q, k, k)
    with pytest.raises(TypeError, match="unsupported dtype"):
        longattn.flash_attn_func(q.double(), k.double(), k.double())
    with pytest.raises(TypeError, match="^k: expected a torch.Tensor"):  # no mixing frameworks
        longattn.flash_attn_func(q, k.numpy(), k)


# ---------------------------------------------------------------- CUDA tensors (device)

def skip_unsupported(test):
    """A feature the CUDA backend does not implement yet shows up as a skip with its reason
    (NotImplementedError carries the C++ message), not as a failure."""

    @functools.wraps(test)
    def wrapper(*args, **kwargs):
        try:
            return test(*args, **kwargs)
        except NotImplementedError as e:  # pragma: no cover - device only
            pytest.skip(f"not supported by the CUDA backend yet: {e}")

    return wrapper


@gpu
@pytest.mark.gpu
@skip_unsupported
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seq", [1, 127, 1000, 4099])
@pytest.mark.parametrize("dim", [64, 80, 96, 128, 192, 256])
def test_cuda_vs_float64_and_sdpa(causal, seq, dim):
    g = torch.Generator().manual_seed(seq + dim)
    q = t_randn((2, seq, 8, dim), torch.bfloat16, DEV, g)
    k = t_randn((2, seq, 2, dim), torch.bfloat16, DEV, g)
    v = t_randn((2, seq, 2, dim), torch.bfloat16, DEV, g)
    out, lse = longattn.flash_attn_func(q, k, v, causal=causal, return_attn_probs=True)
    assert out.device == q.device and out.dtype == torch.bfloat16
    assert not out.isnan().any() and not lse.isnan().any()
    ref = torch_reference(q, k, v, causal=causal)
    # Naive bf16: the same math with bf16 P (oracle rule, STYLE.md).
    naive = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal,
        enable_gqa=True).transpose(1, 2)
    err = (out.double() - ref).abs().max().item()
    naive_err = (naive.double() - ref).abs().max().item()
    assert err <= 2 * naive_err + 1e-3, (err, naive_err)


@gpu
@pytest.mark.gpu
@skip_unsupported
def test_cuda_features():
    g = torch.Generator().manual_seed(7)
    q = t_randn((2, 300, 8, 128), torch.bfloat16, DEV, g)
    k = t_randn((2, 333, 2, 128), torch.bfloat16, DEV, g)
    v = t_randn((2, 333, 2, 128), torch.bfloat16, DEV, g)
    sinks = torch.randn(8, generator=g).to(DEV)
    for kw in (dict(causal=True, window=(64, -1)), dict(causal=False, window=(20, 30)),
               dict(causal=True, sinks=sinks), dict(causal=True, scale=0.05)):
        out = longattn.flash_attn_func(q, k, v, causal=kw["causal"], window_size=kw.get("window", (-1, -1)),
                                       sinks=kw.get("sinks"), softmax_scale=kw.get("scale"))
        ref = torch_reference(q, k, v, causal=kw["causal"], window=kw.get("window", (-1, -1)),
                              sinks=kw.get("sinks"), scale=kw.get("scale"))
        assert (out.double() - ref).abs().max().item() < 2e-2, kw


@gpu
@pytest.mark.gpu
@skip_unsupported
def test_cuda_varlen_and_paged_match_dense():
    g = torch.Generator().manual_seed(8)
    lens = [100, 1, 513, 77]
    cu = torch.tensor([0] + list(np.cumsum(lens)), dtype=torch.int32, device=DEV)
    q = t_randn((sum(lens), 4, 128), torch.bfloat16, DEV, g)
    k = t_randn((sum(lens), 2, 128), torch.bfloat16, DEV, g)
    v = t_randn((sum(lens), 2, 128), torch.bfloat16, DEV, g)
    out = longattn.flash_attn_varlen_func(q, k, v, cu, cu, max(lens), max(lens), causal=True)
    for b, n in enumerate(lens):
        s = slice(int(cu[b]), int(cu[b + 1]))
        dense = longattn.flash_attn_func(q[None, s], k[None, s], v[None, s], causal=True)
        torch.testing.assert_close(out[s], dense[0], atol=2e-2, rtol=0)
    # Paged cache: one sequence of 700 keys in shuffled 64-token pages.
    P, n = 64, 700
    kd = t_randn((1, n, 2, 128), torch.bfloat16, DEV, g)
    vd = t_randn((1, n, 2, 128), torch.bfloat16, DEV, g)
    qd = t_randn((1, 50, 4, 128), torch.bfloat16, DEV, g)
    npg = -(-n // P)
    perm = torch.randperm(npg + 3, generator=g)[:npg]
    kp = torch.zeros(npg + 3, P, 2, 128, dtype=torch.bfloat16, device=DEV)
    vp = torch.zeros_like(kp)
    for i in range(npg):
        rows = slice(i * P, min(n, (i + 1) * P))
        kp[perm[i], : rows.stop - rows.start] = kd[0, rows]
        vp[perm[i], : rows.stop - rows.start] = vd[0, rows]
    table = perm.to(torch.int32).to(DEV)[None]
    paged = longattn.flash_attn_with_kvcache(qd, kp, vp, cache_seqlens=n, page_table=table, causal=True)
    dense = longattn.flash_attn_func(qd, kd, vd, causal=True)
    torch.testing.assert_close(paged, dense, atol=2e-2, rtol=0)


@cuda_only
@pytest.mark.gpu
@skip_unsupported
def test_cuda_honours_current_stream():
    g = torch.Generator().manual_seed(9)
    q, k, v = (t_randn((1, 2048, 8, 128), torch.bfloat16, DEV, g) for _ in range(3))
    expected = longattn.flash_attn_func(q, k, v, causal=True)
    torch.cuda.synchronize()
    s = torch.cuda.Stream()  # PyTorch streams are non-blocking w.r.t. the legacy stream
    with torch.cuda.stream(s):
        # q2 holds zeros until a copy queued behind a ~50 ms sleep on `s` lands. longattn must
        # launch on `s` (the current stream): on any other stream it would read the zeros.
        q2 = torch.zeros_like(q)
        torch.cuda._sleep(100_000_000)
        q2.copy_(q)
        assert longattn._arrays.current_stream(q2) == s.cuda_stream
        out = longattn.flash_attn_func(q2, k, v, causal=True)
    s.synchronize()
    torch.testing.assert_close(out, expected, atol=0, rtol=0)


@gpu
@pytest.mark.gpu
@skip_unsupported
@pytest.mark.parametrize("dims", [(128, 128), (64, 64), (96, 96), (192, 128), (256, 256)])
def test_cuda_fp8(dims):
    # Every fp8 head dim: <= 128 on the fp8 kernel (narrower ones zero-filled), above on the f16
    # kernels after the upcast; descales differ per (sequence, kv head) (GQA 4 / 2, batch 2).
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("torch without float8")
    d, dv = dims
    g = torch.Generator().manual_seed(10 + d + dv)
    q, k = (t_randn((2, 300, h, d), torch.float32, DEV, g, 16).to(torch.float8_e4m3fn) for h in (4, 2))
    v = t_randn((2, 300, 2, dv), torch.float32, DEV, g, 16).to(torch.float8_e4m3fn)
    qd, kd, vd = (torch.rand((2, 2), generator=g).add(0.5).div(16).to(DEV) for _ in range(3))
    out = longattn.flash_attn_func(q, k, v, causal=True, q_descale=qd, k_descale=kd, v_descale=vd)
    assert out.dtype == torch.bfloat16 and out.shape == (2, 300, 4, dv)

    def deq(x, s):  # (b, s, hk, d) x (b, hk)
        return x.float() * s[:, None, :, None]
    ref = torch_reference(deq(q, kd.repeat_interleave(2, 1)) * qd.repeat_interleave(2, 1)[:, None, :, None],
                          deq(k, torch.ones_like(kd)), deq(v, vd), causal=True)
    assert (out.double() - ref).abs().max().item() < 0.1


def test_requires_grad_inputs_forward_only():
    # Forward works; a backward through longattn raises (naming it) instead of silently
    # leaving q/k/v without their attention gradients.
    g = torch.Generator().manual_seed(11)
    q = t_randn((1, 13, 2, 32), torch.float32, "cpu", g).requires_grad_()
    k = t_randn((1, 13, 1, 32), torch.float32, "cpu", g).requires_grad_()
    out = longattn.flash_attn_func(q, k, k, causal=True)
    torch.testing.assert_close(out.detach().double(), torch_reference(q.detach(), k.detach(), k.detach(),
                                                                      causal=True), atol=1e-4, rtol=0)
    with pytest.raises(NotImplementedError, match="^backward: longattn is forward-only"):
        out.sum().backward()
    with torch.no_grad():  # no graph: the plain path, no grad_fn
        assert not longattn.flash_attn_func(q, k, k, causal=True).requires_grad


@cuda_only
@pytest.mark.gpu
@skip_unsupported
def test_cuda_graph_capture_and_compile():
    # The eager path launches on the current stream and allocates through torch: capturable.
    # Compiled graphs (cudagraph trees under mode="reduce-overhead") replay the custom op.
    g = torch.Generator().manual_seed(12)
    q = t_randn((2, 300, 8, 128), torch.bfloat16, DEV, g)
    k = t_randn((2, 300, 2, 128), torch.bfloat16, DEV, g)
    v = t_randn((2, 300, 2, 128), torch.bfloat16, DEV, g)
    ref = longattn.flash_attn_func(q, k, v, causal=True)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        longattn.flash_attn_func(q, k, v, causal=True)  # warm-up outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = longattn.flash_attn_func(q, k, v, causal=True)
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, ref, atol=0, rtol=0)
    f = torch.compile(lambda q, k, v: longattn.flash_attn_func(q, k, v, causal=True) * 2,
                      fullgraph=True, mode="reduce-overhead")
    for _ in range(3):
        got = f(q, k, v)
    torch.testing.assert_close(got, ref * 2, atol=0, rtol=0)


@gpu
@pytest.mark.gpu
@skip_unsupported
def test_cuda_fa3_semantics():
    # Issue 16 on the device: every key sequence empty (max_seqlen_k = 0), seqused_q, chunk +
    # window.
    g = torch.Generator().manual_seed(13)
    cu_q = torch.tensor([0, 100, 100, 357], dtype=torch.int32, device=DEV)
    q = t_randn((357, 8, 128), torch.bfloat16, DEV, g)
    k = t_randn((0, 2, 128), torch.bfloat16, DEV, g)
    out, lse = longattn.flash_attn_varlen_func(q, k, k, cu_q, torch.zeros_like(cu_q), 257, 0, causal=True,
                                               return_attn_probs=True)
    assert (out == 0).all() and (lse == float("-inf")).all()
    kv = t_randn((357, 2, 128), torch.bfloat16, DEV, g)
    dense = longattn.flash_attn_func(q[None], kv[None], kv[None], causal=True, window_size=(50, 0),
                                     attention_chunk=64)
    ref = torch_reference(q[None], kv[None], kv[None], causal=True, window=(50, -1), chunk=64)
    assert (dense.double() - ref).abs().max().item() < 2e-2
    used = torch.tensor([60, 0, 200], dtype=torch.int32, device=DEV)
    out = torch.full_like(q, float("nan"))
    longattn.flash_attn_varlen_func(q, kv, kv, cu_q, cu_q, 257, 257, seqused_q=used, causal=True, out=out)
    for s, e, n in ((0, 100, 60), (100, 357, 200)):  # sequence rows [s, e), n used
        alone = longattn.flash_attn_func(q[None, s:s + n], kv[None, s:e], kv[None, s:e], causal=True)
        torch.testing.assert_close(out[s:s + n], alone[0], atol=2e-2, rtol=0)
    assert out[60:100].isnan().all() and out[300:].isnan().all()


@pytest.mark.parametrize("case", ["strided_q", "list_window", "int_causal", "softcap_none", "no_rows", "no_keys"])
def test_eager_fast_path_inputs(case):
    """The C++ fast path on the inputs it reads itself: q a strided view, window_size a list,
    causal an int, softcap None, no query rows, no keys -- each equal to the general path on
    the same inputs and, element by element, to the float64 reference (the path allocates out itself,
    uninitialised: an element it did not write would not match)."""
    from longattn import flash_attn_interface as fai
    from longattn import torch_ops

    gen = torch.Generator().manual_seed(7 + len(case))
    sq = 0 if case == "no_rows" else 29
    sk = 0 if case == "no_keys" else 41
    q = t_randn((2, sq, 3, 40), torch.bfloat16, "cpu", gen)
    if case == "strided_q":  # heads and rows swapped in memory: q[b, s, h] at a non-packed stride
        q = t_randn((2, 3, sq, 40), torch.bfloat16, "cpu", gen).transpose(1, 2)
    k = t_randn((2, sk, 3, 40), torch.bfloat16, "cpu", gen)
    v = t_randn((2, sk, 3, 40), torch.bfloat16, "cpu", gen)
    fai.flash_attn_func(q, k, v)  # imports torch_ops
    kw = dict(causal=True, window_size=(5, 2))
    if case == "list_window":
        kw = dict(causal=False, window_size=[6, 3])
    if case == "int_causal":
        kw = dict(causal=1)
    if case == "softcap_none":
        kw = dict(causal=False, softcap=None)
    o, lse = fai.flash_attn_func(q, k, v, return_attn_probs=True, **kw)
    wl, wr = kw.get("window_size", (-1, -1))
    causal = bool(kw["causal"])
    # The general path (descriptors): the ops' bodies take the fast path themselves.
    ro, rlse = torch_ops._forward(q, k, v, return_lse=True, causal=causal, window_size=(wl, -1 if causal else wr))
    assert o.shape == (2, sq, 3, 40) and o.is_contiguous() and lse.shape == (2, 3, sq)
    assert torch.equal(o, ro) and torch.equal(lse, rlse) and not o.isnan().any()
    if case == "no_keys" and sq:
        assert (o == 0).all() and (lse == float("-inf")).all()
    if o.numel():
        ref = torch_reference(q, k, v, causal=causal, window=(wl, -1 if causal else wr))
        assert (o.double() - ref).abs().max().item() < 2e-2


def test_eager_fast_path_errors_as_general_path():
    """Inputs the fast path does not serve reach the general path, which names the argument:
    mixed dtypes, a bad backend, a bad window, a k of rank 3."""
    from longattn import flash_attn_interface as fai

    gen = torch.Generator().manual_seed(3)
    q = t_randn((1, 9, 2, 32), torch.bfloat16, "cpu", gen)
    k = t_randn((1, 11, 2, 32), torch.bfloat16, "cpu", gen)
    fai.flash_attn_func(q, k, k)
    with pytest.raises((TypeError, ValueError), match="k|dtype"):
        fai.flash_attn_func(q, k.half(), k)
    with pytest.raises(ValueError, match="backend"):
        fai.flash_attn_func(q, k, k, backend="tpu")
    with pytest.raises(ValueError, match="window_size"):
        fai.flash_attn_func(q, k, k, window_size=(1, 2, 3))
    with pytest.raises(ValueError, match="k"):
        fai.flash_attn_func(q, k[0], k)


@pytest.mark.parametrize("case", ["varlen_seqused", "kvcache_append_rotary", "kvcache_paged", "kvcache_int_seqlens"])
def test_eager_fast_path_varlen_kvcache(case, monkeypatch):
    """flash_attn_varlen_func and flash_attn_with_kvcache on eager tensors run the C++ fast path
    (torch_ops.torch_forward) and return what the registered ops return on the same inputs, bit
    for bit, caches included; cache_seqlens given as an int takes the general path."""
    from longattn import flash_attn_interface as fai
    from longattn import torch_ops

    gen = torch.Generator().manual_seed(len(case))
    bf = torch.bfloat16
    calls = []
    fai.flash_attn_func(*(t_randn((1, 3, 1, 16), bf, "cpu", gen) for _ in range(3)))  # imports torch_ops
    real = torch_ops.torch_forward
    monkeypatch.setattr(torch_ops, "torch_forward", lambda *a: calls.append(real(*a)) or calls[-1])
    if case == "varlen_seqused":
        cu = torch.tensor([0, 19, 19, 60], dtype=torch.int32)
        q, k, v = (t_randn((60, 4, 32), bf, "cpu", gen) for _ in range(3))
        used = torch.tensor([11, 0, 40], dtype=torch.int32)
        o, lse = fai.flash_attn_varlen_func(q, k, v, cu, cu, 41, 41, seqused_q=used, causal=True,
                                            window_size=(7, 0), return_attn_probs=True)
        assert len(calls) == 1 and calls[0] is not None
        monkeypatch.setattr(torch_ops, "torch_forward", real)  # the ops' bodies call it too
        ro, rlse = torch_ops._forward(q, k, v, return_lse=True, cu_seqlens_q=cu, cu_seqlens_k=cu, seqused_q=used,
                                      max_seqlen_q=41, max_seqlen_k=41, causal=True, window_size=(7, -1))
        rows = torch.cat([torch.arange(0, 11), torch.arange(19, 59)])  # the rows seqused_q computes
        assert torch.equal(o[rows], ro[rows]) and torch.equal(lse[:, rows], rlse[:, rows])
        return
    b, hk, d = 2, 2, 32
    q = t_randn((b, 3, 4, d), bf, "cpu", gen)
    knew, vnew = (t_randn((b, 3, hk, d), bf, "cpu", gen) for _ in range(2))
    seqlens = torch.tensor([5, 17], dtype=torch.int32)
    page_table = None
    if case == "kvcache_paged":
        kc, vc = (t_randn((6, 8, hk, d), bf, "cpu", gen) for _ in range(2))
        page_table = torch.tensor([[4, 0, 2], [1, 5, 3]], dtype=torch.int32)
    else:
        kc, vc = (t_randn((b, 24, hk, d), bf, "cpu", gen) for _ in range(2))
    cos = sin = None
    if case == "kvcache_append_rotary":
        ang = torch.rand((30, d // 2), generator=gen) * 6.28
        cos, sin = ang.cos(), ang.sin()
    kc2, vc2 = kc.clone(), vc.clone()
    cache_seqlens = 9 if case == "kvcache_int_seqlens" else seqlens
    o, lse, *_ = fai.flash_attn_with_kvcache(q, kc, vc, knew, vnew, rotary_cos=cos, rotary_sin=sin,
                                             cache_seqlens=cache_seqlens, page_table=page_table, causal=True,
                                             return_softmax_lse=True)
    assert len(calls) == 1 and (calls[0] is None) == (case == "kvcache_int_seqlens")
    monkeypatch.setattr(torch_ops, "torch_forward", real)  # the ops' bodies call it too
    sl = torch.full((b,), 9, dtype=torch.int32) if case == "kvcache_int_seqlens" else seqlens
    kv = {"k_new": knew, "v_new": vnew, "rotary_cos": cos, "rotary_sin": sin, "rotary_interleaved": True}
    ro, rlse = torch_ops._forward(q, kc2, vc2, return_lse=True, seqused_k=sl, page_table=page_table, causal=True,
                                  kvcache=kv)
    assert torch.equal(o, ro) and torch.equal(lse, rlse) and torch.equal(kc, kc2) and torch.equal(vc, vc2)


@pytest.mark.parametrize("case", ["plain", "lse", "dim_v", "window", "scale_cap_chunk", "grad", "f32"])
def test_eager_fast_path_equals_general_path(case, monkeypatch):
    """flash_attn_func's one-step eager call (torch_ops.dense_forward, C++) returns what the
    general path (descriptors, torch_ops._forward) returns on the same inputs, bit for bit; where it does not apply (an input
    that requires grad) it returns None and the general path runs."""
    from longattn import flash_attn_interface as fai
    from longattn import torch_ops

    gen = torch.Generator().manual_seed(hash(case) % 1000)
    dt = torch.float32 if case == "f32" else torch.bfloat16
    dv = 48 if case == "dim_v" else 32
    q = t_randn((2, 37, 4, 32), dt, "cpu", gen)
    k = t_randn((2, 53, 2, 32), dt, "cpu", gen)
    v = t_randn((2, 53, 2, dv), dt, "cpu", gen)
    kw = dict(causal=case != "scale_cap_chunk")
    if case == "window":
        kw["window_size"] = (9, 3)
    if case == "scale_cap_chunk":
        kw.update(softmax_scale=0.3, softcap=5.0, attention_chunk=16)
    if case == "grad":
        q.requires_grad_(True)
    fai.flash_attn_func(q, k, v)  # the first call imports torch_ops (the general path)
    calls = []
    real = torch_ops.dense_forward
    monkeypatch.setattr(torch_ops, "dense_forward", lambda *a: calls.append(real(*a)) or calls[-1])
    o, lse = fai.flash_attn_func(q, k, v, return_attn_probs=True, **kw)
    o1 = fai.flash_attn_func(q, k, v, **kw)
    assert len(calls) == 2 and all((c is None) == (case == "grad") for c in calls)
    wl, wr = kw.get("window_size", (-1, -1))
    if kw["causal"]:
        wr = -1
    with torch.no_grad():
        ro, rlse = torch_ops._forward(q.detach(), k, v, return_lse=True, softmax_scale=kw.get("softmax_scale"),
                                      softcap=kw.get("softcap", 0.0), causal=kw["causal"], window_size=(wl, wr),
                                      attention_chunk=kw.get("attention_chunk", 0))
    assert o.shape == (2, 37, 4, dv) and o.dtype == dt and lse.shape == (2, 4, 37)
    assert torch.equal(o.detach(), ro) and torch.equal(o1.detach(), ro) and torch.equal(lse.detach(), rlse)
    if case == "grad":
        assert o.requires_grad  # through the op, whose backward raises
        with pytest.raises(NotImplementedError, match="forward-only"):
            o.sum().backward()
