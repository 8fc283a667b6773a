"""Bad inputs: C++ validation errors surface as ValueError / NotImplementedError with the
argument named; unsupported FlashAttention arguments raise NotImplementedError."""

import numpy as np
import pytest

import longattn
from conftest import randn


def qkv(rng, dtype="f32"):
    return randn(rng, (1, 9, 4, 32), dtype), randn(rng, (1, 9, 2, 32), dtype), randn(rng, (1, 9, 2, 32), dtype)


def test_heads_not_divisible(rng):
    q = randn(rng, (1, 9, 4, 32))
    k = randn(rng, (1, 9, 3, 32))
    with pytest.raises(ValueError, match="k: 3 kv heads do not divide 4 query heads"):
        longattn.flash_attn_func(q, k, k)


def test_dtype_mismatch_and_unsupported_dtypes(rng):
    q, k, v = qkv(rng)
    with pytest.raises(ValueError, match="k"):
        longattn.flash_attn_func(q, k.astype(np.float16), v)
    with pytest.raises(TypeError, match="q: unsupported dtype"):
        longattn.flash_attn_func(q.astype(np.float64), k, v)
    with pytest.raises(TypeError, match="expected a numpy.ndarray"):
        longattn.flash_attn_func([[1.0]], k, v)


def test_bad_shapes(rng):
    q, k, v = qkv(rng)
    with pytest.raises(ValueError, match="q"):
        longattn.flash_attn_func(q[0], k, v)
    with pytest.raises(ValueError, match="head dim"):
        longattn.flash_attn_func(randn(rng, (1, 9, 4, 300)), randn(rng, (1, 9, 2, 300)), randn(rng, (1, 9, 2, 300)))
    with pytest.raises(ValueError):
        longattn.flash_attn_func(q, k, v[:, :5])


def test_last_dim_not_contiguous(rng):
    q, k, v = qkv(rng)
    qq = randn(rng, (1, 9, 4, 64))[..., ::2]
    with pytest.raises(ValueError, match="q"):
        longattn.flash_attn_func(qq, k, v)


def test_bad_options(rng):
    q, k, v = qkv(rng)
    with pytest.raises(ValueError, match="softcap"):
        longattn.flash_attn_func(q, k, v, softcap=-1.0)
    with pytest.raises(ValueError, match="scale"):
        longattn.flash_attn_func(q, k, v, softmax_scale=float("nan"))
    with pytest.raises(ValueError, match="window"):
        longattn.flash_attn_func(q, k, v, window_size=(-3, 0))
    with pytest.raises(ValueError, match="window_size"):
        longattn.flash_attn_func(q, k, v, window_size=(1, 2, 3))
    with pytest.raises(ValueError, match="backend"):
        longattn.flash_attn_func(q, k, v, backend="tpu")


def test_bad_cu_seqlens(rng):
    q = randn(rng, (20, 4, 32))
    k = randn(rng, (20, 2, 32))
    with pytest.raises(ValueError, match="cu_seqlens_q"):
        longattn.flash_attn_varlen_func(q, k, k, np.array([0, 12, 5, 20], np.int32),
                                        np.array([0, 5, 10, 20], np.int32), 12, 10)
    with pytest.raises(ValueError, match="cu_seqlens_k"):
        longattn.flash_attn_varlen_func(q, k, k, np.array([0, 5, 10, 20], np.int32),
                                        np.array([0, 5, 10, 30], np.int32), 10, 10)


def test_fp8_descales_default_to_one(rng):
    # FA3 defaults every descale to 1.0; the C++ API (longattn.forward) still requires them.
    q, k, v = qkv(rng, "e4m3")
    ones = np.ones((1, 2), np.float32)
    np.testing.assert_array_equal(longattn.flash_attn_func(q, k, v),
                                  longattn.flash_attn_func(q, k, v, q_descale=ones, k_descale=ones,
                                                           v_descale=ones))
    half = ones / 2
    np.testing.assert_array_equal(longattn.flash_attn_func(q, k, v, k_descale=half),
                                  longattn.flash_attn_func(q, k, v, q_descale=ones, k_descale=half,
                                                           v_descale=ones))
    with pytest.raises(ValueError, match="^q_descale: required"):
        longattn.forward(q, k, v)


def test_sinks_wrong_shape(rng):
    q, k, v = qkv(rng)
    with pytest.raises(ValueError, match="sinks"):
        longattn.flash_attn_func(q, k, v, sinks=np.zeros(3, np.float32))


def test_out_errors(rng):
    q, k, v = qkv(rng)
    with pytest.raises(ValueError, match="out"):
        longattn.flash_attn_func(q, k, v, out=np.empty((1, 9, 4, 16), np.float32))
    ro = np.empty((1, 9, 4, 32), np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="out: array is read-only"):
        longattn.flash_attn_func(q, k, v, out=ro)
    # Output overlapping an input is rejected, and the input is left untouched.
    before = q.copy()
    with pytest.raises(ValueError, match="overlap"):
        longattn.flash_attn_func(q, k, v, out=q)
    np.testing.assert_array_equal(q, before)


@pytest.mark.parametrize("arg", ["qv"])
def test_unsupported_func_args(rng, arg):
    q, k, v = qkv(rng)
    with pytest.raises(NotImplementedError, match=arg):
        longattn.flash_attn_func(q, k, v, **{arg: q})


def test_kvcache_serving_args_misused_are_named(rng):
    """The kvcache serving inputs (issue 17) in wrong shapes or without what they need:
    ValueError naming the argument (test_kvcache.py covers them working)."""
    q, k, v = qkv(rng)
    lens = np.full(q.shape[0], 2, np.int32)
    for kw, arg in ((dict(k=k), "v"), (dict(v=v), "k"), (dict(k=k, v=v), "seqused_k"),
                    (dict(k=k, v=v, cache_seqlens=lens, cu_seqlens_k_new=lens), "k_new"),
                    (dict(rotary_cos=k[0, :, 0], rotary_sin=k[0, :, 0]), "rotary_cos"),
                    (dict(cache_batch_idx=lens.astype(np.float32)), "cache_batch_idx"),
                    (dict(cache_leftpad=lens[:0]), "cache_leftpad")):
        with pytest.raises(ValueError, match=f"^{arg}:"):
            longattn.flash_attn_with_kvcache(q, k, v, **kw)


def test_cuda_backend_on_host_arrays(rng):
    q, k, v = qkv(rng)
    with pytest.raises(NotImplementedError, match="cuda"):
        longattn.flash_attn_func(q, k, v, backend="cuda")
