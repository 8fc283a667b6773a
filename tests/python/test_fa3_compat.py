"""Drop-in compatibility with FlashAttention-3's `flash_attn_interface` forward functions:
the module imports under FA3's name, the same parameter names in the same order (so
positional calls keep working), speed-only options accepted, every unsupported argument
rejected by name, and C++ validation of the metadata these functions take (page tables,
cache lengths) surfacing as ValueError."""

import importlib
import inspect

import numpy as np
import pytest

import longattn
import longattn.flash_attn_interface as flash_attn_interface
from conftest import assert_oracle, randn

# FA3 (hopper/flash_attn_interface.py) parameters, in order.
FA3_PARAMS = {
    "flash_attn_func": [
        "q", "k", "v", "softmax_scale", "causal", "qv", "q_descale", "k_descale", "v_descale",
        "window_size", "attention_chunk", "softcap", "num_splits", "pack_gqa", "deterministic",
        "sm_margin", "return_attn_probs"],
    "flash_attn_varlen_func": [
        "q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k",
        "seqused_q", "seqused_k", "softmax_scale", "causal", "qv", "q_descale", "k_descale",
        "v_descale", "window_size", "attention_chunk", "softcap", "num_splits", "pack_gqa",
        "deterministic", "sm_margin", "return_attn_probs"],
    "flash_attn_with_kvcache": [
        "q", "k_cache", "v_cache", "k", "v", "qv", "rotary_cos", "rotary_sin", "cache_seqlens",
        "cache_batch_idx", "cache_leftpad", "page_table", "cu_seqlens_q", "cu_seqlens_k_new",
        "max_seqlen_q", "rotary_seqlens", "q_descale", "k_descale", "v_descale",
        "softmax_scale", "causal", "window_size", "attention_chunk", "softcap",
        "rotary_interleaved", "scheduler_metadata", "num_splits", "pack_gqa", "sm_margin",
        "return_softmax_lse"],
    "flash_attn_qkvpacked_func": [
        "qkv", "softmax_scale", "causal", "q_descale", "k_descale", "v_descale", "window_size",
        "attention_chunk", "softcap", "deterministic", "num_heads_q", "sm_margin",
        "return_attn_probs"],
    "flash_attn_combine": ["out_partial", "lse_partial", "out", "out_dtype"],
    "get_scheduler_metadata": [
        "batch_size", "max_seqlen_q", "max_seqlen_k", "num_heads_q", "num_heads_kv", "headdim",
        "cache_seqlens", "qkv_dtype", "headdim_v", "cu_seqlens_q", "cu_seqlens_k_new",
        "cache_leftpad", "page_size", "max_seqlen_k_new", "causal", "window_size",
        "attention_chunk", "has_softcap", "num_splits", "pack_gqa", "sm_margin"],
}
# Our extras come after FA3's parameters and are keyword-only, so they cannot shift them.
EXTRAS = {"flash_attn_combine": ["backend"], "get_scheduler_metadata": []}
FORWARD_EXTRAS = ["sinks", "out", "backend", "num_threads"]
# FA3's defaults (qkv_dtype: torch.bfloat16 in FA3, None here -- importing needs no torch).
FA3_DEFAULTS = {
    "flash_attn_func": dict(softmax_scale=None, causal=False, qv=None, window_size=(-1, -1),
                            attention_chunk=0, softcap=0.0, num_splits=1, pack_gqa=None,
                            deterministic=False, sm_margin=0, return_attn_probs=False),
    "flash_attn_varlen_func": dict(seqused_q=None, seqused_k=None, num_splits=1, return_attn_probs=False),
    "flash_attn_with_kvcache": dict(rotary_interleaved=True, num_splits=0, return_softmax_lse=False),
    "flash_attn_combine": dict(out=None, out_dtype=None),
    "get_scheduler_metadata": dict(max_seqlen_k_new=0, window_size=(-1, -1), num_splits=0, sm_margin=0),
}


@pytest.mark.parametrize("name", sorted(FA3_PARAMS))
def test_parameter_order_and_defaults_match_fa3(name):
    params = inspect.signature(getattr(flash_attn_interface, name)).parameters
    positional = [p.name for p in params.values() if p.kind == p.POSITIONAL_OR_KEYWORD]
    keyword_only = [p.name for p in params.values() if p.kind == p.KEYWORD_ONLY]
    assert positional == FA3_PARAMS[name]
    assert keyword_only == EXTRAS.get(name, FORWARD_EXTRAS)
    for arg, default in FA3_DEFAULTS.get(name, {}).items():
        assert params[arg].default == default, arg


def test_module_is_a_drop_in():
    # `import longattn.flash_attn_interface as flash_attn_interface` exposes FA3's names, the
    # same functions as the top-level package.
    for name in FA3_PARAMS:
        assert getattr(flash_attn_interface, name) is getattr(longattn, name)
    assert set(flash_attn_interface.__all__) == set(FA3_PARAMS)


def test_every_function_positionally_and_by_keyword(rng):
    fai = flash_attn_interface
    q, k, v = randn(rng, (2, 9, 4, 32)), randn(rng, (2, 12, 2, 32)), randn(rng, (2, 12, 2, 32))
    ref = fai.flash_attn_func(q, k, v, softmax_scale=0.2, causal=True, window_size=(4, 0))
    np.testing.assert_array_equal(ref, fai.flash_attn_func(q, k, v, 0.2, True, None, None, None, None, (4, 0)))
    np.testing.assert_array_equal(ref, fai.flash_attn_func(q=q, k=k, v=v, softmax_scale=0.2, causal=True,
                                                           window_size=(4, 0)))
    cu_q, cu_k = np.array([0, 9, 18], np.int32), np.array([0, 12, 24], np.int32)
    qr, kr, vr = q.reshape(18, 4, 32), k.reshape(24, 2, 32), v.reshape(24, 2, 32)
    pos = fai.flash_attn_varlen_func(qr, kr, vr, cu_q, cu_k, 9, 12, None, None, 0.2, True, None, None,
                                     None, None, (4, 0))
    kwd = fai.flash_attn_varlen_func(q=qr, k=kr, v=vr, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=9,
                                     max_seqlen_k=12, softmax_scale=0.2, causal=True, window_size=(4, 0))
    np.testing.assert_array_equal(pos, kwd)
    np.testing.assert_array_equal(pos, ref.reshape(18, 4, 32))
    lens = np.array([12, 12], np.int32)
    pos = fai.flash_attn_with_kvcache(q, k, v, None, None, None, None, None, lens, None, None, None, None,
                                      None, None, None, None, None, None, 0.2, True, (4, 0))
    kwd = fai.flash_attn_with_kvcache(q=q, k_cache=k, v_cache=v, cache_seqlens=lens, softmax_scale=0.2,
                                      causal=True, window_size=(4, 0))
    np.testing.assert_array_equal(pos, ref)
    np.testing.assert_array_equal(kwd, ref)
    qkv = np.stack([q, q, q], axis=2)  # (batch, seqlen, 3, heads, dim)
    np.testing.assert_array_equal(fai.flash_attn_qkvpacked_func(qkv, 0.2, True),
                                  fai.flash_attn_func(q, q, q, 0.2, True))
    gqa = np.concatenate([q, k[:, :9], v[:, :9]], axis=2)  # num_heads_q = 4, 2 kv heads
    np.testing.assert_array_equal(fai.flash_attn_qkvpacked_func(gqa, causal=True, num_heads_q=4),
                                  fai.flash_attn_func(q, k[:, :9], v[:, :9], causal=True))
    _, lse = fai.flash_attn_func(q, k, v, return_attn_probs=True)
    op, lp = np.stack([ref, ref]), np.stack([lse, lse]).transpose(0, 1, 3, 2)
    out, merged = fai.flash_attn_combine(op, lp, None, None)
    np.testing.assert_allclose(out, ref, atol=1e-6)
    out2, _ = fai.flash_attn_combine(out_partial=op, lse_partial=lp, out_dtype=np.float32)
    np.testing.assert_array_equal(out, out2)
    md = fai.get_scheduler_metadata(2, 9, 12, 4, 2, 32, lens, None, None, None, None, None, None, 0, True)
    assert md.size == 0


def test_positional_call_with_speed_options(rng):
    q, k, v = randn(rng, (2, 19, 4, 32)), randn(rng, (2, 27, 2, 32)), randn(rng, (2, 27, 2, 32))
    # softmax_scale, causal, qv, descales, window, chunk, softcap, num_splits, pack_gqa,
    # deterministic, sm_margin, return_attn_probs -- positionally, as FA3 callers may.
    out, lse = longattn.flash_attn_func(q, k, v, 0.3, True, None, None, None, None, (5, 0), 0,
                                        0.0, 4, True, True, 8, True)
    assert_oracle(out, lse, q, k, v, causal=True, scale=0.3, window=(5, -1))


def test_kvcache_speed_options_are_accepted(rng):
    q, kc, vc = randn(rng, (2, 5, 4, 32)), randn(rng, (2, 30, 2, 32)), randn(rng, (2, 30, 2, 32))
    lens = np.array([30, 11], np.int32)
    plain = longattn.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens, causal=True)
    tuned = longattn.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens, causal=True,
                                             num_splits=3, pack_gqa=False, sm_margin=4,
                                             rotary_interleaved=False)
    np.testing.assert_array_equal(plain, tuned)


def test_sm_margin_reaches_the_backend_and_is_validated(rng):
    """sm_margin (FA3's SMs left free) is passed to longattn::Args, not dropped: a negative one
    is refused naming it (nothing written), by every FA3 call, NumPy and torch, fast path and
    general path; valid ones leave the CPU backend's results unchanged."""
    q, k, v = randn(rng, (2, 9, 4, 32)), randn(rng, (2, 13, 2, 32)), randn(rng, (2, 13, 2, 32))
    cu = np.array([0, 9], np.int32)
    cuk = np.array([0, 13], np.int32)
    lens = np.array([13, 7], np.int32)
    plain = longattn.flash_attn_func(q, k, v, causal=True)
    np.testing.assert_array_equal(longattn.flash_attn_func(q, k, v, causal=True, sm_margin=5), plain)
    calls = [
        lambda m, q, k, v, cu, cuk, lens: longattn.flash_attn_func(q, k, v, causal=True, sm_margin=m),
        lambda m, q, k, v, cu, cuk, lens: longattn.flash_attn_varlen_func(q[0], k[0], v[0], cu, cuk, 9, 13,
                                                                          causal=True, sm_margin=m),
        lambda m, q, k, v, cu, cuk, lens: longattn.flash_attn_with_kvcache(q, k, v, cache_seqlens=lens,
                                                                           causal=True, sm_margin=m),
    ]
    for f in calls:
        with pytest.raises(ValueError, match="sm_margin"):
            f(-1, q, k, v, cu, cuk, lens)
    torch = pytest.importorskip("torch")
    tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
    tcu, tcuk, tlens = (torch.from_numpy(x) for x in (cu, cuk, lens))
    for f in calls:
        want = f(0, tq, tk, tv, tcu, tcuk, tlens)
        torch.testing.assert_close(f(2**40, tq, tk, tv, tcu, tcuk, tlens), want, atol=0, rtol=0)
        with pytest.raises(ValueError, match="sm_margin"):
            f(-3, tq, tk, tv, tcu, tcuk, tlens)  # the C++ fast path
    poisoned = torch.full_like(tq, float("nan"))
    with pytest.raises(ValueError, match="sm_margin"):  # the general path (an out given)
        longattn.flash_attn_func(tq, tk, tv, causal=True, sm_margin=-3, out=poisoned)
    assert poisoned.isnan().all()
    torch_ops = importlib.import_module("longattn.torch_ops")  # registers the ops
    assert torch_ops.fwd is torch.ops.longattn.fwd.default
    args = (tq, tk, tv, None, None, None, None, None, 0, 0, None, None, None, None, None, 0.0, True,
            -1, -1, 0, "auto", 0)
    out, _ = torch.ops.longattn.fwd(*args, 7)
    torch.testing.assert_close(out, torch.from_numpy(plain), atol=0, rtol=0)
    with pytest.raises(ValueError, match="sm_margin"):
        torch.ops.longattn.fwd(*args, -1)


@pytest.mark.parametrize("arg", ["qv"])
def test_kvcache_unsupported_args_named(rng, arg):
    q, kc = randn(rng, (1, 4, 2, 32)), randn(rng, (1, 9, 2, 32))
    with pytest.raises(NotImplementedError, match=f"^{arg}: not supported"):
        longattn.flash_attn_with_kvcache(q, kc, kc, **{arg: kc})


def test_varlen_unsupported_args_named(rng):
    q = randn(rng, (9, 2, 32))
    cu = np.array([0, 9], np.int32)
    with pytest.raises(NotImplementedError, match="^qv: not supported"):
        longattn.flash_attn_varlen_func(q, q, q, cu, cu, 9, 9, qv=q)


def paged(rng, pages=5, page=4):
    q = randn(rng, (2, 3, 2, 32))
    kp, vp = randn(rng, (pages, page, 1, 32)), randn(rng, (pages, page, 1, 32))
    table = np.array([[0, 1], [2, 3]], np.int32)
    return q, kp, vp, table


def test_page_table_entry_out_of_range(rng):
    q, kp, vp, table = paged(rng)
    table[1, 0] = 5  # 5 pages: 0..4
    out = np.full((2, 3, 2, 32), np.nan, np.float32)
    with pytest.raises(ValueError, match=r"^page_table: .*\[1, 0\] = 5"):
        longattn.flash_attn_with_kvcache(q, kp, vp, cache_seqlens=8, page_table=table, out=out)
    assert np.isnan(out).all(), "an invalid call wrote its output"


def test_cache_seqlens_above_capacity(rng):
    q, kp, vp, table = paged(rng)
    with pytest.raises(ValueError, match="^seqused_k: "):  # 2 pages of 4 hold 8 keys
        longattn.flash_attn_with_kvcache(q, kp, vp, cache_seqlens=np.array([8, 9], np.int32),
                                         page_table=table)


def test_page_size_zero(rng):
    q = randn(rng, (1, 3, 2, 32))
    kp = np.zeros((4, 0, 1, 32), np.float32)
    with pytest.raises(ValueError, match="page size 0"):
        longattn.flash_attn_with_kvcache(q, kp, kp, page_table=np.zeros((1, 2), np.int32))


def test_int_dtype_metadata_only(rng):
    q, kp, vp, table = paged(rng)
    with pytest.raises(ValueError, match="^page_table: "):
        longattn.flash_attn_with_kvcache(q, kp, vp, cache_seqlens=8, page_table=table.astype(np.float32))
