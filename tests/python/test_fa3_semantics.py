"""FlashAttention-3 semantics added by issue 16, on NumPy inputs against the float64 reference
(tests/python/reference.py): seqused_q, empty key sets and max_seqlen_k = 0, empty batches,
chunk + window masks, flash_attn_combine's layouts and get_scheduler_metadata."""

import numpy as np
import pytest

import longattn.flash_attn_interface as flash_attn_interface
from conftest import assert_oracle, randn
from reference import attention

BACKENDS = ["cpu", "reference"]


def cumsum0(lens):
    return np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mask", [dict(causal=True), dict(causal=True, window=(6, -1)),
                                  dict(causal=False, window=(3, 2)), dict(causal=True, chunk=8)])
def test_seqused_q_computes_only_used_rows(rng, backend, mask):
    # FA3: sequence b has seqused_q[b] queries -- its first rows; masks align to that length
    # (bottom-right: the last used query sees the last used key); later rows are not written.
    q_lens, k_lens = [20, 7, 0, 33], [25, 7, 4, 30]
    used_q = np.array([12, 7, 0, 1], np.int32)
    used_k = np.array([25, 3, 0, 30], np.int32)
    cu_q, cu_k = cumsum0(q_lens), cumsum0(k_lens)
    q = randn(rng, (sum(q_lens), 4, 32), "bf16")
    k, v = randn(rng, (sum(k_lens), 2, 32), "bf16"), randn(rng, (sum(k_lens), 2, 32), "bf16")
    out = np.full((sum(q_lens), 4, 32), np.nan, np.float32).astype(q.dtype)
    res, lse = flash_attn_interface.flash_attn_varlen_func(
        q, k, v, cu_q, cu_k, max(q_lens), max(k_lens), seqused_q=used_q, seqused_k=used_k,
        causal=mask["causal"], window_size=mask.get("window", (-1, -1)),
        attention_chunk=mask.get("chunk", 0), return_attn_probs=True, out=out, backend=backend)
    assert res is out
    rows = np.concatenate([np.arange(cu_q[b], cu_q[b] + used_q[b]) for b in range(4)]).astype(int)
    unused = np.setdiff1d(np.arange(sum(q_lens)), rows)
    assert np.isnan(out[unused].astype(np.float32)).all(), "a row past seqused_q was written"
    # The used rows equal the problem whose sequences hold only those rows.
    assert_oracle(out[rows], lse[:, rows], q[rows], k, v, in_dtype="bf16", q_lens=list(used_q),
                  k_lens=k_lens, k_used=used_k, causal=mask["causal"],
                  window=mask.get("window", (-1, -1)), chunk=mask.get("chunk", 0))


def test_seqused_q_from_padding_helpers(rng):
    # FA3's unpad_input(..., unused_mask) returns cu_seqlens over the used + unused tokens and
    # seqused over the used ones: a padded sequence computes exactly its own tokens.
    q = randn(rng, (15, 2, 16))
    cu = np.array([0, 10, 15], np.int32)
    used = np.array([6, 5], np.int32)
    out = flash_attn_interface.flash_attn_varlen_func(q, q, q, cu, cu, 10, 10, seqused_q=used,
                                                      seqused_k=used, causal=True)
    for b, (s, n) in enumerate(zip(cu[:-1], used)):
        alone = flash_attn_interface.flash_attn_func(q[None, s:s + n], q[None, s:s + n], q[None, s:s + n],
                                                     causal=True)
        np.testing.assert_array_equal(out[s:s + n], alone[0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_all_key_sequences_empty(rng, backend):
    # FA3: max_seqlen_k = 0 (every key sequence empty) gives zeros and softmax_lse -inf.
    cu_q = np.array([0, 5, 5, 12], np.int32)
    cu_k = np.zeros(4, np.int32)
    q = randn(rng, (12, 4, 32))
    k = np.zeros((0, 2, 32), np.float32)
    out, lse = flash_attn_interface.flash_attn_varlen_func(q, k, k, cu_q, cu_k, 7, 0, causal=True,
                                                           return_attn_probs=True, backend=backend)
    np.testing.assert_array_equal(out, np.zeros_like(out))
    assert lse.shape == (4, 12) and (lse == -np.inf).all()
    # Keys stored but none used (seqused_k = 0), and a dense cache of length 0.
    kk = randn(rng, (9, 2, 32))
    out, lse = flash_attn_interface.flash_attn_varlen_func(
        q, kk, kk, cu_q, np.array([0, 3, 3, 9], np.int32), 7, 0, seqused_k=np.zeros(3, np.int32),
        return_attn_probs=True, backend=backend)
    assert (out == 0).all() and (lse == -np.inf).all()
    dq = randn(rng, (1, 4, 4, 32))
    out, lse, *_ = flash_attn_interface.flash_attn_with_kvcache(dq, kk[None], kk[None], cache_seqlens=0,
                                                                return_softmax_lse=True)
    assert (out == 0).all() and (lse == -np.inf).all()


def test_empty_batch():
    q = np.zeros((0, 4, 32), np.float32)
    cu = np.zeros(1, np.int32)
    out, lse = flash_attn_interface.flash_attn_varlen_func(q, q[:, :2], q[:, :2], cu, cu, 0, 0,
                                                           return_attn_probs=True)
    assert out.shape == (0, 4, 32) and lse.shape == (4, 0)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("causal,window,chunk", [(True, (5, 0), 8), (True, (20, -1), 7), (False, (3, 3), 10),
                                                 (False, (-1, 4), 6), (True, (0, 0), 3)])
def test_chunk_with_window(rng, backend, causal, window, chunk):
    # FA3 applies both: a key is visible when the window and the chunk allow it.
    q, k, v = randn(rng, (2, 37, 4, 32), "bf16"), randn(rng, (2, 45, 2, 32), "bf16"), randn(rng, (2, 45, 2, 32), "bf16")
    out, lse = flash_attn_interface.flash_attn_func(q, k, v, causal=causal, window_size=window,
                                                    attention_chunk=chunk, return_attn_probs=True,
                                                    backend=backend)
    # FA3 ignores the right window under causal; the reference gets what FA3 computes.
    ref_window = (window[0], -1) if causal else window
    assert_oracle(out, lse, q, k, v, in_dtype="bf16", causal=causal, window=ref_window, chunk=chunk)


def combine_reference(out_partial, lse_partial):
    """float64 merge over axis 0: weights softmax(lse); all -inf gives 0 and -inf."""
    lse = lse_partial.astype(np.float64)
    m = lse.max(axis=0)
    m_safe = np.where(np.isfinite(m), m, 0.0)
    w = np.exp(lse - m_safe)
    total = w.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (w[..., None] * np.nan_to_num(out_partial.astype(np.float64))).sum(axis=0) / total[..., None]
        merged = np.log(total) + m_safe
    out[total == 0] = 0
    merged[total == 0] = -np.inf
    return out, merged


def test_combine_fa3_layouts(rng):
    # Batched: out_partial (splits, batch, seqlen, heads, dim), lse_partial (splits, batch,
    # seqlen, heads) -- FA3 allocates the LSE seqlen-contiguous; one split empty for a row.
    op = randn(rng, (3, 2, 7, 4, 24))
    lp = randn(rng, (3, 2, 4, 7)).transpose(0, 1, 3, 2)
    lp[1, 0, 2, :] = -np.inf
    lp[:, 1, 3, 1] = -np.inf  # every split empty: out 0, lse -inf
    out, lse = flash_attn_interface.flash_attn_combine(op, lp)
    ref, ref_lse = combine_reference(op, lp)
    assert out.shape == (2, 7, 4, 24) and lse.shape == (2, 7, 4) and out.dtype == np.float32
    np.testing.assert_allclose(out, ref, atol=1e-5)
    np.testing.assert_allclose(lse, ref_lse, atol=1e-5)
    # Varlen: out_partial (splits, total_q, heads, dim), lse_partial (splits, total_q, heads).
    out, lse = flash_attn_interface.flash_attn_combine(op[:, 0], lp[:, 0], out_dtype="bf16")
    np.testing.assert_allclose(out.astype(np.float32), ref[0], atol=1e-2)
    np.testing.assert_allclose(lse, ref_lse[0], atol=1e-5)
    dst = np.full((2, 7, 4, 24), np.nan, np.float32)
    res, _ = flash_attn_interface.flash_attn_combine(op, lp, out=dst)
    assert res is dst
    np.testing.assert_allclose(dst, ref, atol=1e-5)


def test_combine_split_kv_equals_whole(rng):
    # Attention over keys [0, 20) and [20, 50) separately, merged: the attention over all 50.
    q, k, v = randn(rng, (2, 9, 4, 32)), randn(rng, (2, 50, 2, 32)), randn(rng, (2, 50, 2, 32))
    a = flash_attn_interface.flash_attn_func(q, k[:, :20], v[:, :20], return_attn_probs=True)
    b = flash_attn_interface.flash_attn_func(q, k[:, 20:], v[:, 20:], return_attn_probs=True)
    op = np.stack([a[0], b[0]])                          # (2, batch, seqlen, heads, dim)
    lp = np.stack([a[1], b[1]]).transpose(0, 1, 3, 2)    # (2, batch, seqlen, heads)
    full, full_lse = flash_attn_interface.flash_attn_func(q, k, v, return_attn_probs=True)
    out, lse = flash_attn_interface.flash_attn_combine(op, lp)
    np.testing.assert_allclose(out, full, atol=1e-5)
    np.testing.assert_allclose(lse, full_lse.transpose(0, 2, 1), atol=1e-5)


def test_get_scheduler_metadata_is_accepted_and_ignored(rng):
    q, kc = randn(rng, (2, 3, 4, 32)), randn(rng, (2, 20, 2, 32))
    lens = np.array([20, 9], np.int32)
    md = flash_attn_interface.get_scheduler_metadata(2, 3, 20, 4, 2, 32, lens, causal=True,
                                                     num_splits=4, pack_gqa=True)
    assert md.dtype == np.int32 and md.size == 0
    a = flash_attn_interface.flash_attn_with_kvcache(q, kc, kc, cache_seqlens=lens, causal=True,
                                                     scheduler_metadata=md, num_splits=4)
    b = flash_attn_interface.flash_attn_with_kvcache(q, kc, kc, cache_seqlens=lens, causal=True)
    np.testing.assert_array_equal(a, b)
