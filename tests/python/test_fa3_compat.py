"""Drop-in compatibility with FlashAttention-3's `flash_attn_interface` forward functions:
the same parameter names in the same order (so positional calls keep working), speed-only
options accepted, every unsupported argument rejected by name, and C++ validation of the
metadata these functions take (page tables, cache lengths) surfacing as ValueError."""

import inspect

import numpy as np
import pytest

import longattn
from conftest import assert_oracle, randn

# FA3 (hopper/flash_attn_interface.py) forward parameters, in order.
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
}
# Our extras come after FA3's parameters and are keyword-only, so they cannot shift them.
EXTRAS = ["sinks", "out", "backend", "num_threads"]


@pytest.mark.parametrize("name", sorted(FA3_PARAMS))
def test_parameter_order_matches_fa3(name):
    params = inspect.signature(getattr(longattn, name)).parameters
    positional = [p.name for p in params.values() if p.kind == p.POSITIONAL_OR_KEYWORD]
    keyword_only = [p.name for p in params.values() if p.kind == p.KEYWORD_ONLY]
    assert positional == FA3_PARAMS[name]
    assert keyword_only == EXTRAS


def test_positional_call_with_speed_options(rng):
    q, k, v = randn(rng, (2, 19, 4, 32)), randn(rng, (2, 27, 2, 32)), randn(rng, (2, 27, 2, 32))
    # softmax_scale, causal, qv, descales, window, chunk, softcap, num_splits, pack_gqa,
    # deterministic, sm_margin, return_attn_probs -- positionally, as FA3 callers may.
    out, lse = longattn.flash_attn_func(q, k, v, 0.3, True, None, None, None, None, (5, 0), 0,
                                        0.0, 4, True, True, 8, True)
    assert_oracle(out, lse, q, k, v, causal=True, scale=0.3, window=(5, -1))


def test_kvcache_speed_options_are_ignored(rng):
    q, kc, vc = randn(rng, (2, 5, 4, 32)), randn(rng, (2, 30, 2, 32)), randn(rng, (2, 30, 2, 32))
    lens = np.array([30, 11], np.int32)
    plain = longattn.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens, causal=True)
    tuned = longattn.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=lens, causal=True,
                                             num_splits=3, pack_gqa=False, sm_margin=4,
                                             rotary_interleaved=False)
    np.testing.assert_array_equal(plain, tuned)


@pytest.mark.parametrize("arg", ["k", "v", "qv", "rotary_cos", "rotary_sin", "cache_batch_idx",
                                 "cache_leftpad", "cu_seqlens_k_new", "rotary_seqlens"])
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
