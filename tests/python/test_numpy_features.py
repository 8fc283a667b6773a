"""NumPy inputs on the CPU backend (and the reference backend) against a NumPy float64
reference: every feature of the FlashAttention-style API."""

import numpy as np
import pytest

import longattn
from conftest import NP_DTYPES, assert_oracle, randn

BACKENDS = ["cpu", "reference"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["bf16", "f16", "f32"])
@pytest.mark.parametrize("causal", [False, True])
def test_dense_dtypes_gqa(rng, backend, dtype, causal):
    q = randn(rng, (2, 37, 6, 64), dtype)
    k = randn(rng, (2, 53, 2, 64), dtype)
    v = randn(rng, (2, 53, 2, 64), dtype)
    out, lse = longattn.flash_attn_func(q, k, v, causal=causal, return_attn_probs=True,
                                        backend=backend)
    assert out.dtype == q.dtype and out.shape == (2, 37, 6, 64)
    assert lse.dtype == np.float32 and lse.shape == (2, 6, 37)
    assert_oracle(out, lse, q, k, v, in_dtype=dtype, causal=causal)


@pytest.mark.parametrize("sq,sk", [(50, 20), (20, 50), (1, 33)])
def test_causal_alignment(rng, sq, sk):
    q, k, v = randn(rng, (1, sq, 2, 32)), randn(rng, (1, sk, 2, 32)), randn(rng, (1, sk, 2, 32))
    for top_left in (False, True):
        out, lse = longattn.forward(q, k, v, causal=True, top_left=top_left, return_lse=True,
                                    backend="cpu")
        assert_oracle(out, lse, q, k, v, causal=True, top_left=top_left)
    # Bottom-right with more queries than keys: the first sq - sk rows see nothing.
    out, lse = longattn.flash_attn_func(q, k, v, causal=True, return_attn_probs=True)
    if sq > sk:
        assert (out[0, : sq - sk] == 0).all()
        assert np.isneginf(lse[0, :, : sq - sk]).all()


@pytest.mark.parametrize("window", [(5, 0), (3, 7), (-1, 2), (0, 0)])
@pytest.mark.parametrize("causal", [False, True])
def test_sliding_window(rng, window, causal):
    q, k, v = randn(rng, (2, 41, 4, 64), "bf16"), randn(rng, (2, 41, 2, 64), "bf16"), randn(rng, (2, 41, 2, 64), "bf16")
    out = longattn.flash_attn_func(q, k, v, causal=causal, window_size=window)
    assert_oracle(out, None, q, k, v, in_dtype="bf16", causal=causal, window=window)


@pytest.mark.parametrize("chunk", [4, 16, 100])
def test_chunked(rng, chunk):
    q, k, v = randn(rng, (1, 45, 2, 32)), randn(rng, (1, 45, 2, 32)), randn(rng, (1, 45, 2, 32))
    out = longattn.flash_attn_func(q, k, v, causal=True, attention_chunk=chunk)
    assert_oracle(out, None, q, k, v, causal=True, chunk=chunk)


def test_softcap_scale_sinks(rng):
    q, k, v = randn(rng, (2, 29, 4, 64), scale=3), randn(rng, (2, 31, 4, 64), scale=3), randn(rng, (2, 31, 4, 64))
    sinks = (rng.standard_normal(4) + 1).astype(np.float32)
    out, lse = longattn.flash_attn_func(q, k, v, softmax_scale=0.3, softcap=4.0, causal=True,
                                        return_attn_probs=True, sinks=sinks)
    assert_oracle(out, lse, q, k, v, scale=0.3, softcap=4.0, causal=True, sinks=sinks)
    # Rows with no visible key (more queries than keys, bottom-right causal): out 0, and the
    # LSE is the sink logit.
    q2 = randn(rng, (1, 40, 4, 64))
    out2, lse2 = longattn.flash_attn_func(q2, k[:1], v[:1], causal=True, sinks=sinks,
                                          return_attn_probs=True)
    assert (out2[0, :9] == 0).all()
    np.testing.assert_allclose(lse2[0, :, :9], np.repeat(sinks[:, None], 9, axis=1), atol=1e-6, rtol=0)
    assert_oracle(out2, lse2, q2, k[:1], v[:1], causal=True, sinks=sinks)
    # A -inf sink changes nothing.
    base = longattn.flash_attn_func(q, k, v, causal=True)
    same = longattn.flash_attn_func(q, k, v, causal=True, sinks=np.full(4, -np.inf, np.float32))
    np.testing.assert_array_equal(base, same)


def test_head_dims_differ(rng):
    q, k, v = randn(rng, (1, 19, 2, 96)), randn(rng, (1, 23, 1, 96)), randn(rng, (1, 23, 1, 48))
    out = longattn.flash_attn_func(q, k, v)
    assert out.shape == (1, 19, 2, 48)
    assert_oracle(out, None, q, k, v)


@pytest.mark.parametrize("backend", BACKENDS)
def test_varlen(rng, backend):
    q_lens, k_lens = [5, 0, 40, 17], [9, 3, 60, 17]
    cu_q = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(k_lens)]).astype(np.int32)
    q = randn(rng, (sum(q_lens), 4, 64), "bf16")
    k = randn(rng, (sum(k_lens), 2, 64), "bf16")
    v = randn(rng, (sum(k_lens), 2, 64), "bf16")
    out, lse = longattn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max(q_lens), max(k_lens),
                                               causal=True, return_attn_probs=True, backend=backend)
    assert lse.shape == (4, sum(q_lens))
    assert_oracle(out, lse, q, k, v, in_dtype="bf16", q_lens=q_lens, k_lens=k_lens, causal=True)
    # seqused_k: only the first keys of each sequence count.
    used = np.array([4, 3, 31, 1], np.int32)
    out = longattn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max(q_lens), max(k_lens),
                                          seqused_k=used, causal=True, backend=backend)
    assert_oracle(out, None, q, k, v, in_dtype="bf16", q_lens=q_lens, k_lens=k_lens,
                  k_used=used, causal=True)


def test_kvcache_dense_and_paged(rng):
    B, Sq, H, Hkv, D, cap = 3, 7, 4, 2, 64, 50
    lens = np.array([50, 12, 33], np.int32)
    q = randn(rng, (B, Sq, H, D), "bf16")
    k_cache = randn(rng, (B, cap, Hkv, D), "bf16")
    v_cache = randn(rng, (B, cap, Hkv, D), "bf16")
    out = longattn.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=lens, causal=True)
    kw = dict(in_dtype="bf16", causal=True)

    def dense_ref(out, k_used):
        # Dense cache with per-sequence used lengths: compare sequence by sequence.
        for b in range(B):
            n = int(k_used[b])
            assert_oracle(out[b:b + 1], None, q[b:b + 1], k_cache[b:b + 1, :n], v_cache[b:b + 1, :n], **kw)

    dense_ref(out, lens)
    # An int cache_seqlens applies to every sequence.
    out = longattn.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=20, causal=True)
    dense_ref(out, [20] * B)
    # Paged: scatter the cache into pages in a random order.
    P = 16
    pages_per = -(-cap // P)
    order = rng.permutation(B * pages_per + 1).astype(np.int32)
    k_pages = randn(rng, (B * pages_per + 1, P, Hkv, D), "bf16")
    v_pages = randn(rng, (B * pages_per + 1, P, Hkv, D), "bf16")
    table = order[: B * pages_per].reshape(B, pages_per)
    for b in range(B):
        for i in range(pages_per):
            rows = slice(i * P, min(cap, (i + 1) * P))
            n = rows.stop - rows.start
            k_pages[table[b, i], :n] = k_cache[b, rows]
            v_pages[table[b, i], :n] = v_cache[b, rows]
    # FA3 returns (out, softmax_lse, out_accum, softmax_lse_accum); no split-KV: empty.
    out_p, lse_p, *accum = longattn.flash_attn_with_kvcache(q, k_pages, v_pages, cache_seqlens=lens,
                                                            page_table=table, causal=True,
                                                            return_softmax_lse=True)
    dense_ref(out_p, lens)
    assert lse_p.shape == (B, H, Sq)
    assert [a.shape for a in accum] == [(0,), (0,)]


def test_fp8_e4m3(rng):
    B, S, H, D = 2, 33, 4, 64
    q = randn(rng, (B, S, H, D), "e4m3", scale=16)
    k = randn(rng, (B, S, 2, D), "e4m3", scale=16)
    v = randn(rng, (B, S, 2, D), "e4m3", scale=16)
    ds = [np.full((B, 2), 1 / 16, np.float32) for _ in range(3)]
    out = longattn.flash_attn_func(q, k, v, causal=True, q_descale=ds[0], k_descale=ds[1],
                                   v_descale=ds[2])
    assert out.dtype == NP_DTYPES["bf16"]
    assert_oracle(out, None, q, k, v, in_dtype="e4m3", causal=True, descales=ds)


def test_out_argument_and_strided_inputs(rng):
    # q/k/v as (batch, heads, seq, dim) transposed views: strided, last dim contiguous.
    qt = randn(rng, (2, 4, 21, 32))
    kt = randn(rng, (2, 2, 25, 32))
    vt = randn(rng, (2, 2, 25, 32))
    q, k, v = (x.transpose(0, 2, 1, 3) for x in (qt, kt, vt))
    out = np.full((2, 21, 4, 32), np.nan, np.float32)
    res = longattn.flash_attn_func(q, k, v, causal=True, out=out)
    assert res is out
    assert_oracle(out, None, np.ascontiguousarray(q), np.ascontiguousarray(k),
                  np.ascontiguousarray(v), causal=True)
    # f32 output from bf16 inputs through out=.
    qb, kb, vb = (x.astype(NP_DTYPES["bf16"]) for x in (q, k, v))
    out32 = np.full((2, 21, 4, 32), np.nan, np.float32)
    longattn.flash_attn_func(qb, kb, vb, out=out32)
    assert_oracle(out32, None, qb, kb, vb, in_dtype="bf16", out_dtype="f32")


def test_combine_two_halves_equal_whole(rng):
    q, k, v = randn(rng, (1, 13, 2, 32)), randn(rng, (1, 40, 2, 32)), randn(rng, (1, 40, 2, 32))
    whole, whole_lse = longattn.flash_attn_func(q, k, v, return_attn_probs=True)
    parts = [longattn.flash_attn_func(q, k[:, s], v[:, s], return_attn_probs=True)
             for s in (slice(0, 17), slice(17, 40))]
    out_partial = np.stack([p[0][0] for p in parts])  # (splits, tokens, heads, dim)
    lse_partial = np.stack([p[1][0].transpose(0, 1) for p in parts])  # (splits, heads, tokens)
    out, lse = longattn.combine(out_partial, lse_partial, return_lse=True)
    np.testing.assert_allclose(out, whole[0], atol=1e-5)
    np.testing.assert_allclose(lse, whole_lse[0], atol=1e-5)


def test_threads_do_not_change_results(rng):
    q, k, v = randn(rng, (1, 70, 4, 64), "bf16"), randn(rng, (1, 70, 2, 64), "bf16"), randn(rng, (1, 70, 2, 64), "bf16")
    a = longattn.flash_attn_func(q, k, v, causal=True, num_threads=1)
    b = longattn.flash_attn_func(q, k, v, causal=True, num_threads=2)
    np.testing.assert_array_equal(a.view(np.uint16), b.view(np.uint16))


def test_flash_attn_interface_alias(rng):
    import longattn.flash_attn_interface as fai

    q, k, v = randn(rng, (1, 11, 2, 32)), randn(rng, (1, 11, 2, 32)), randn(rng, (1, 11, 2, 32))
    np.testing.assert_array_equal(fai.flash_attn_func(q, k, v, causal=True),
                                  longattn.flash_attn_func(q, k, v, causal=True))


def test_empty_arrays(rng):
    # NumPy gives zero-size arrays strides of 0; such calls are valid and return empty results.
    q = np.zeros((2, 0, 4, 32), np.float32)
    k, v = randn(rng, (2, 9, 2, 32)), randn(rng, (2, 9, 2, 32))
    out, lse = longattn.flash_attn_func(q, k, v, causal=True, return_attn_probs=True)
    assert out.shape == (2, 0, 4, 32) and lse.shape == (2, 4, 0)
    # No key at all: rows are 0 with LSE -inf (never NaN).
    q = randn(rng, (2, 5, 4, 32))
    empty_kv = np.zeros((2, 0, 2, 32), np.float32)
    out, lse = longattn.flash_attn_func(q, empty_kv, empty_kv, return_attn_probs=True)
    assert (out == 0).all() and np.isneginf(lse).all()
