"""torch.compile(fullgraph=True) of code calling the FlashAttention-3 style functions on CPU
tensors (CI): every function, GQA, varlen with seqused_q/k, kvcache (int cache_seqlens,
paged), LSE outputs, combine; the custom ops' schemas and fake implementations (opcheck);
backward refused by name; and the import of longattn.torch_ops happening inside a trace."""

import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

import longattn  # noqa: E402
import longattn.flash_attn_interface as fai  # noqa: E402
from longattn import torch_ops  # noqa: E402


def randn(*shape, dtype=torch.float32, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def dense_case():
    return randn(2, 19, 8, 32, seed=1), randn(2, 27, 2, 32, seed=2), randn(2, 27, 2, 32, seed=3)


def varlen_case():
    cu_q = torch.tensor([0, 7, 7, 19], dtype=torch.int32)
    cu_k = torch.tensor([0, 10, 13, 30], dtype=torch.int32)
    return (randn(19, 4, 32, seed=4), randn(30, 2, 32, seed=5), randn(30, 2, 32, seed=6), cu_q, cu_k,
            torch.tensor([5, 0, 12], dtype=torch.int32), torch.tensor([10, 2, 11], dtype=torch.int32))


def f_dense(q, k, v):
    out, lse = fai.flash_attn_func(q, k, v, causal=True, window_size=(6, 0), attention_chunk=8,
                                   return_attn_probs=True)
    return out * 2, lse


def f_varlen(q, k, v, cu_q, cu_k, used_q, used_k):
    out, lse = fai.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 12, 17, seqused_q=used_q, seqused_k=used_k,
                                          causal=True, return_attn_probs=True)
    rows = torch.cat([torch.arange(0, 5), torch.arange(7, 19)])  # the used rows
    return out[rows] + 1, lse[:, rows]


def f_kvcache(q, k, v):
    a, lse, *accum = fai.flash_attn_with_kvcache(q, k, v, cache_seqlens=20, causal=True, return_softmax_lse=True)
    pages_k, pages_v = k.reshape(2 * 9, 3, 2, 32), v.reshape(2 * 9, 3, 2, 32)  # page size 3
    table = torch.arange(18, dtype=torch.int32).reshape(2, 9).flip(1).contiguous()
    used = torch.tensor([27, 4], dtype=torch.int32)
    b = fai.flash_attn_with_kvcache(q, pages_k, pages_v, cache_seqlens=used, page_table=table, causal=True)
    return a, lse, b, len(accum)


def f_combine(op, lp):
    out, lse = fai.flash_attn_combine(op, lp)
    out4, lse4 = fai.flash_attn_combine(op[:, 0], lp[:, 0])
    return out, lse, out4, lse4


def f_qkvpacked(qkv):
    return fai.flash_attn_qkvpacked_func(qkv, causal=True)


CASES = {
    "dense_gqa_chunk_window_lse": (f_dense, dense_case),
    "varlen_seqused_lse": (f_varlen, varlen_case),
    "kvcache_int_and_paged_lse": (f_kvcache, dense_case),
    "combine_both_layouts": (f_combine, lambda: (randn(3, 2, 5, 4, 16, seed=7), randn(3, 2, 5, 4, seed=8))),
    "qkvpacked": (f_qkvpacked, lambda: (randn(2, 11, 3, 4, 32, seed=9),)),
}


def assert_same(a, b):
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_same(x, y)
    elif isinstance(a, torch.Tensor):
        torch.testing.assert_close(a, b, atol=0, rtol=0)
    else:
        assert a == b


@pytest.mark.parametrize("case", sorted(CASES))
def test_compile_fullgraph_matches_eager(case):
    fn, make = CASES[case]
    args = make()
    torch._dynamo.reset()
    compiled = torch.compile(fn, fullgraph=True, backend="aot_eager")
    assert_same(compiled(*args), fn(*args))


def test_compile_inductor_one_graph():
    # The default backend (inductor) on one graph holding dense, varlen and kvcache calls.
    q, k, v = dense_case()
    vq, vk, vv, cu_q, cu_k, used_q, used_k = varlen_case()

    def model(q, k, v, vq, vk, vv):
        a, lse = f_dense(q, k, v)
        b, vlse = f_varlen(vq, vk, vv, cu_q, cu_k, used_q, used_k)
        c = fai.flash_attn_with_kvcache(q, k, v, cache_seqlens=20, causal=True)
        return a.sum() + lse.sum() + b.sum() + vlse.sum() + c.sum()

    torch._dynamo.reset()
    got = torch.compile(model, fullgraph=True)(q, k, v, vq, vk, vv)
    torch.testing.assert_close(got, model(q, k, v, vq, vk, vv), atol=1e-3, rtol=1e-5)


def test_out_argument_under_compile():
    q, k, v = dense_case()
    ref = fai.flash_attn_func(q, k, v, causal=True)

    def fn(q, k, v, out):
        return fai.flash_attn_func(q, k, v, causal=True, out=out)

    out = torch.full_like(ref, float("nan"))
    torch._dynamo.reset()
    torch.compile(fn, fullgraph=True, backend="aot_eager")(q, k, v, out)
    torch.testing.assert_close(out, ref, atol=0, rtol=0)


def test_export():
    class Attn(torch.nn.Module):
        def forward(self, q, k, v):
            return fai.flash_attn_func(q, k, v, causal=True)

    q, k, v = dense_case()
    ep = torch.export.export(Attn(), (q, k, v))
    assert any("longattn.fwd" in str(n.target) for n in ep.graph.nodes)
    torch.testing.assert_close(ep.module()(q, k, v), Attn()(q, k, v), atol=0, rtol=0)


def test_opcheck_schemas_and_fakes():
    q, k, v = dense_case()
    vq, vk, vv, cu_q, cu_k, used_q, used_k = varlen_case()
    utils = ("test_schema", "test_faketensor", "test_autograd_registration")
    torch.library.opcheck(torch.ops.longattn.fwd.default,
                          (q, k, v, None, None, None, None, None, 0, 0, None, None, None, None, 0.3, 0.0,
                           True, 4, -1, 0, "auto", 0, 0), test_utils=utils)
    torch.library.opcheck(torch.ops.longattn.fwd.default,
                          (vq, vk, vv, cu_q, cu_k, used_q, used_k, None, 12, 17, torch.zeros(4), None,
                           None, None, None, 5.0, True, -1, -1, 4, "cpu", 1, 3), test_utils=utils)
    op, lp = randn(3, 10, 4, 16), randn(3, 4, 10)
    torch.library.opcheck(torch.ops.longattn.combine.default, (op, lp, torch.bfloat16, "auto"),
                          test_utils=utils)


def test_backward_is_refused_by_name():
    q, k, v = (t.requires_grad_() for t in dense_case())
    out = fai.flash_attn_func(q, k, v, causal=True)
    assert out.requires_grad
    with pytest.raises(NotImplementedError, match="^backward: longattn is forward-only"):
        out.sum().backward()


def test_first_call_inside_compile():
    # longattn imported before torch: longattn.torch_ops is first imported inside the trace.
    code = ("import sys, longattn, torch\n"
            "assert 'longattn.torch_ops' not in sys.modules\n"
            "q = torch.randn(1, 9, 2, 16)\n"
            "f = torch.compile(lambda q: longattn.flash_attn_func(q, q, q, causal=True) + 1,\n"
            "                  fullgraph=True, backend='aot_eager')\n"
            "torch.testing.assert_close(f(q), longattn.flash_attn_func(q, q, q, causal=True) + 1)\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_eager_plain_tensors_skip_the_dispatcher(monkeypatch):
    # Eager calls on plain tensors run the op body directly (less host time); tracing, fake
    # tensors and grad-requiring inputs take the op.
    q, k, v = dense_case()
    calls = []
    real = torch_ops.fwd
    monkeypatch.setattr(torch_ops, "fwd", lambda *a: calls.append(1) or real(*a))
    direct = fai.flash_attn_func(q, k, v, causal=True)
    assert calls == []
    via_op = fai.flash_attn_func(q.requires_grad_(), k, v, causal=True)
    assert calls == [1]
    torch.testing.assert_close(direct, via_op.detach(), atol=0, rtol=0)


def test_op_autograd_kernel_paths():
    # The ops' Autograd kernel runs the body itself only for plain tensors: a dispatch mode
    # still sees the op; the kvcache op bumps its caches' versions and refuses backward by name.
    from torch.utils._python_dispatch import TorchDispatchMode

    class Seen(TorchDispatchMode):
        ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Seen.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    q, k, v = dense_case()
    args = (None, None, None, None, None, 0, 0, None, None, None, None, None, 0.0, True, -1, -1, 0, "auto", 0, 0)
    plain = torch.ops.longattn.fwd(q, k, v, *args)
    with Seen():
        moded = torch.ops.longattn.fwd(q, k, v, *args)
    assert "longattn.fwd.default" in Seen.ops
    assert_same(moded, plain)
    kc, vc = k.clone(), v.clone()
    versions = kc._version, vc._version
    cache_args = (k[:, :1], v[:, :1], None, None, torch.tensor([20, 20], dtype=torch.int32), None, None, None,
                  None, None, None, True, 0, None, None, None, None, None, 0.0, True, -1, -1, 0, "auto", 0, 0)
    torch.ops.longattn.fwd_kvcache(q[:, :1], kc, vc, *cache_args)
    assert (kc._version, vc._version) == (versions[0] + 1, versions[1] + 1)
    out, lse = torch.ops.longattn.fwd_kvcache(q[:, :1].clone().requires_grad_(), k.clone(), v.clone(), *cache_args)
    with pytest.raises(NotImplementedError, match="^backward: longattn is forward-only"):
        out.sum().backward()
    kg = k.clone().requires_grad_()
    with pytest.raises(NotImplementedError, match="writes into an argument that requires grad"):
        torch.ops.longattn.fwd_kvcache(q[:, :1], kg, v.clone(), *cache_args)
    kg = k.clone().requires_grad_()
    with pytest.raises(NotImplementedError, match="writes into an argument that requires grad"):
        torch.ops.longattn.fwd_kvcache(q[:, :1], kg, v.clone(), *cache_args)
