"""flash_attn_with_kvcache's serving path (issue 17): the append of k / v into the cache
(dense and paged), rotary embedding (GPT-J / GPT-NeoX, rotary_dim <= d, rotary_seqlens),
cache_batch_idx, cache_leftpad, cu_seqlens_k_new, on NumPy arrays and CPU torch tensors,
against a NumPy float64 model of FA3's semantics written here (the cache after the call,
every slot but the appended ones untouched; out / lse by the oracle rule); torch.compile
with the cache mutated in place; bad inputs named, nothing written. The CUDA backend runs
the same checks under the `gpu` marker."""
import numpy as np
import pytest

import longattn
import reference
from conftest import NP_DTYPES, randn

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")


def f64(x):
    return np.asarray(x).astype(np.float32).astype(np.float64)


def rope_tables(seqlen_ro, rotary_dim, dtype="f32"):
    t = np.arange(seqlen_ro)[:, None] * (10000.0 ** (-np.arange(0, rotary_dim, 2) / rotary_dim))[None, :]
    return np.cos(t).astype(np.float32).astype(NP_DTYPES[dtype]), np.sin(t).astype(np.float32).astype(NP_DTYPES[dtype])


def rotate(x, cos, sin, pos, interleaved):
    """x (n, h, d) float64 rotated at positions pos (n,): the textbook RoPE formulas."""
    rd = 2 * cos.shape[1]
    c, s = f64(cos)[pos][:, None, :], f64(sin)[pos][:, None, :]
    y = x.copy()
    if interleaved:
        a, b = x[..., 0:rd:2], x[..., 1:rd:2]
        y[..., 0:rd:2], y[..., 1:rd:2] = a * c - b * s, a * s + b * c
    else:
        a, b = x[..., :rd // 2], x[..., rd // 2:rd]
        y[..., :rd // 2], y[..., rd // 2:rd] = a * c - b * s, a * s + b * c
    return y


class Model:
    """FA3's flash_attn_with_kvcache on NumPy: expected caches after the call, then per
    sequence the rotated q (rounded to its dtype) and the keys / values it attends to."""

    def __init__(self, q, k_cache, v_cache, k=None, v=None, cache_seqlens=None, page_table=None,
                 cache_batch_idx=None, cache_leftpad=None, cu_seqlens_q=None, cu_seqlens_k_new=None,
                 rotary_cos=None, rotary_sin=None, rotary_seqlens=None, rotary_interleaved=True, causal=False,
                 window=(-1, -1), dtype="f32"):
        B = len(cu_seqlens_q) - 1 if cu_seqlens_q is not None else q.shape[0]
        self.kc, self.vc = k_cache.copy(), v_cache.copy()
        ps = k_cache.shape[1]
        cap = ps * page_table.shape[1] if page_table is not None else ps
        per_row = causal or window[0] >= 0 or window[1] >= 0
        self.seqs = []
        for b in range(B):
            row = int(cache_batch_idx[b]) if cache_batch_idx is not None else b
            end = int(cache_seqlens[b]) if cache_seqlens is not None else cap
            lp = int(cache_leftpad[b]) if cache_leftpad is not None else 0
            if k is None:
                kn = vn = np.zeros((0,) + k_cache.shape[2:])
            elif cu_seqlens_k_new is not None:
                kn, vn = (f64(x[cu_seqlens_k_new[b]:cu_seqlens_k_new[b + 1]]) for x in (k, v))
            else:
                kn, vn = f64(k[b]), f64(v[b])
            qb = f64(q[cu_seqlens_q[b]:cu_seqlens_q[b + 1]]) if cu_seqlens_q is not None else f64(q[b])
            if rotary_cos is not None:
                r0 = int(rotary_seqlens[b]) if rotary_seqlens is not None else end
                kn = rotate(kn, rotary_cos, rotary_sin, r0 + np.arange(len(kn)), rotary_interleaved)
                pos = r0 + (np.arange(len(qb)) if per_row else np.zeros(len(qb), int))
                qb = rotate(qb, rotary_cos, rotary_sin, pos, rotary_interleaved)
                qb = reference.round_to(qb, dtype).astype(np.float64)
            slots = end + np.arange(len(kn))
            self._put(self.kc, page_table, row, slots, kn)
            self._put(self.vc, page_table, row, slots, vn)
            keys = np.arange(lp, end + len(kn))
            self.seqs.append((qb, self._get(self.kc, page_table, row, keys), self._get(self.vc, page_table, row, keys)))

    @staticmethod
    def _index(cache, table, row, slots):
        if table is None:
            return (row, slots)
        ps = cache.shape[1]
        return (np.asarray(table)[row, slots // ps], slots % ps)

    def _put(self, cache, table, row, slots, x):
        if len(slots):
            cache[self._index(cache, table, row, slots)] = x.astype(np.float32).astype(cache.dtype)

    def _get(self, cache, table, row, slots):
        return f64(cache[self._index(cache, table, row, slots)])

    def check(self, out, lse, *, dtype="f32", causal=False, window=(-1, -1), atol=1e-3, ragged_q=None):
        """out / lse (the call's, dense (B, S, H, dv) or ragged (T, H, dv)) by the oracle rule."""
        out = f64(out)
        lse = None if lse is None else np.asarray(lse, np.float64)
        err = naive_err = 0.0
        for b, (qb, kb, vb) in enumerate(self.seqs):
            vis = reference.visible(len(qb), len(kb), causal, False, window)
            H, Hk = qb.shape[1], kb.shape[1]
            for h in range(H):
                hk = h // (H // Hk)
                scale = 1 / np.sqrt(qb.shape[-1])
                ref, ref_l = reference.attend(qb[:, h], kb[:, hk], vb[:, hk], vis, scale)
                nv, _ = reference.attend(qb[:, h], kb[:, hk], vb[:, hk], vis, scale, precision=dtype, out_dtype=dtype)
                got = out[ragged_q[b]:ragged_q[b + 1], h] if ragged_q is not None else out[b, :, h]
                assert not np.isnan(got).any(), f"sequence {b} head {h}: NaN in out"
                if got.size:
                    err, naive_err = max(err, np.abs(got - ref).max()), max(naive_err, np.abs(nv - ref).max())
                if lse is not None:
                    gl = lse[h, ragged_q[b]:ragged_q[b + 1]] if ragged_q is not None else lse[b, h]
                    fin = np.isfinite(ref_l)
                    assert np.array_equal(np.isfinite(gl), fin)
                    if fin.any():
                        assert np.abs(gl[fin] - ref_l[fin]).max() < 1e-3
        assert err <= 2 * naive_err + atol, f"max error {err} > 2 x naive {naive_err} + {atol}"


def make(rng, *, B=3, Sq=5, Hq=4, Hk=2, D=32, cap=40, new=4, page=0, dtype="f32", rotary_dim=0, ragged_new=False,
         batch_idx=False, leftpad=False, rotary_seqlens=False, ragged_q=False, table_dtype=None):
    """Random inputs: caches NaN outside the slots each sequence reads (a stray read shows)."""
    rows = B + 2 if batch_idx else B
    if page:
        mp = -(-cap // page)
        cap = mp * page
        pages = rng.permutation(rows * mp + 3)[:rows * mp].astype(np.int32).reshape(rows, mp)
        shape = (rows * mp + 3, page, Hk, D)
    else:
        pages, shape = None, (rows, cap, Hk, D)
    kc = np.full(shape, np.nan, np.float32).astype(NP_DTYPES[dtype])
    vc = kc.copy()
    idx = rng.permutation(rows)[:B].astype(np.int32) if batch_idx else None
    nl = rng.integers(0, new + 1, B) if ragged_new else np.full(B, new)
    nl[0] = new
    ends = np.array([rng.integers(0, cap - n + 1) for n in nl], np.int32)
    ends[0] = cap - nl[0]
    lp = np.array([rng.integers(0, e + 1) for e in ends], np.int32) if leftpad else None
    for b in range(B):
        r = idx[b] if batch_idx else b
        for t in range((lp[b] if leftpad else 0), ends[b]):
            at = (pages[r, t // page], t % page) if page else (r, t)
            kc[at] = randn(rng, (Hk, D), dtype)
            vc[at] = randn(rng, (Hk, D), dtype)
    kw = dict(cache_seqlens=ends, page_table=pages, cache_batch_idx=idx, cache_leftpad=lp)
    if ragged_new:
        cu = np.concatenate([[0], np.cumsum(nl)]).astype(np.int32)
        kw.update(k=randn(rng, (int(cu[-1]), Hk, D), dtype), v=randn(rng, (int(cu[-1]), Hk, D), dtype), cu_seqlens_k_new=cu)
    elif new >= 0:
        kw.update(k=randn(rng, (B, new, Hk, D), dtype), v=randn(rng, (B, new, Hk, D), dtype))
    if ragged_q:
        ql = rng.integers(0, Sq + 1, B)
        ql[0] = Sq
        cuq = np.concatenate([[0], np.cumsum(ql)]).astype(np.int32)
        q = randn(rng, (int(cuq[-1]), Hq, D), dtype)
        kw.update(cu_seqlens_q=cuq, max_seqlen_q=Sq)
    else:
        q = randn(rng, (B, Sq, Hq, D), dtype)
    if rotary_dim:
        kw["rotary_cos"], kw["rotary_sin"] = rope_tables(cap + max(Sq, new) + 2, rotary_dim, table_dtype or dtype)
        if rotary_seqlens:
            kw["rotary_seqlens"] = rng.integers(0, cap + 1, B).astype(np.int32)
    return q, kc, vc, kw


def run_numpy(rng, causal=True, window=(-1, -1), interleaved=True, dtype="f32", **spec):
    q, kc, vc, kw = make(rng, dtype=dtype, **spec)
    model_kw = {n: x for n, x in kw.items() if n != "max_seqlen_q"}
    model = Model(q, kc, vc, rotary_interleaved=interleaved, causal=causal, window=window, dtype=dtype, **model_kw)
    out, lse, *_ = longattn.flash_attn_with_kvcache(q, kc, vc, causal=causal, window_size=window,
                                                    rotary_interleaved=interleaved, return_softmax_lse=True, **kw)
    # Every cache slot: the appended ones as the model writes them (rotation rounded once to the
    # cache's dtype; f32 within float32 rounding of the float64 rotation), the rest untouched.
    np.testing.assert_allclose(f64(kc), f64(model.kc), rtol=1e-6, atol=0)
    np.testing.assert_array_equal(f64(vc), f64(model.vc))
    model.check(out, lse, dtype=dtype, causal=causal, window=window, ragged_q=kw.get("cu_seqlens_q"))
    return q, kc, vc, kw


# --- NumPy: each argument ----------------------------------------------------------------------

def test_append_dense(rng):
    run_numpy(rng)


@pytest.mark.parametrize("page", [1, 4, 16])
def test_append_paged(rng, page):
    run_numpy(rng, page=page)


@pytest.mark.parametrize("interleaved", [True, False])
@pytest.mark.parametrize("rotary_dim", [8, 32])
def test_rotary_styles_and_dims(rng, interleaved, rotary_dim):
    run_numpy(rng, rotary_dim=rotary_dim, interleaved=interleaved, page=4)


def test_rotary_fixed_position_without_mask(rng):
    run_numpy(rng, causal=False, rotary_dim=16)


def test_rotary_per_row_with_a_window(rng):
    run_numpy(rng, causal=False, window=(6, 2), rotary_dim=16)


def test_rotary_seqlens_and_f32_tables_bf16(rng):
    run_numpy(rng, dtype="bf16", rotary_dim=16, rotary_seqlens=True, table_dtype="f32")


def test_rotary_seqlens_ignored_without_rotary(rng):
    q, kc, vc, kw = make(rng)
    a = longattn.flash_attn_with_kvcache(q, kc.copy(), vc.copy(), causal=True, **kw)
    b = longattn.flash_attn_with_kvcache(q, kc.copy(), vc.copy(), causal=True,
                                         rotary_seqlens=np.array([-9], np.int32), **kw)
    np.testing.assert_array_equal(a, b)


def test_cache_batch_idx_and_leftpad(rng):
    run_numpy(rng, batch_idx=True, leftpad=True, rotary_dim=8)
    run_numpy(rng, batch_idx=True, page=4, rotary_dim=8)


def test_batch_idx_and_leftpad_without_append(rng):
    q, kc, vc, kw = make(rng, batch_idx=True, leftpad=True)
    del kw["k"], kw["v"]
    before_k, before_v = kc.copy(), vc.copy()
    model = Model(q, kc, vc, causal=True, **kw)
    out = longattn.flash_attn_with_kvcache(q, kc, vc, causal=True, **kw)
    np.testing.assert_array_equal(f64(kc), f64(before_k))
    np.testing.assert_array_equal(f64(vc), f64(before_v))
    model.check(out, None, causal=True)


def test_cu_seqlens_k_new_and_ragged_q(rng):
    run_numpy(rng, ragged_new=True, ragged_q=True, rotary_dim=16, B=4)
    run_numpy(rng, ragged_new=True, page=4, rotary_dim=16, B=4)


def test_decode_one_token(rng):
    run_numpy(rng, Sq=1, new=1, rotary_dim=32, page=16, interleaved=False)


# --- bad inputs: named, nothing written -------------------------------------------------------------

def _unchanged(kc, vc):
    k0, v0 = kc.copy(), vc.copy()
    return lambda: np.testing.assert_array_equal(kc.view(np.uint8), k0.view(np.uint8)) or \
        np.testing.assert_array_equal(vc.view(np.uint8), v0.view(np.uint8))


def test_overflowing_the_cache_is_named(rng):
    q, kc, vc, kw = make(rng, rotary_dim=8)
    kw["cache_seqlens"] = kw["cache_seqlens"].copy()
    kw["cache_seqlens"][1] = kc.shape[1] - 1
    same = _unchanged(kc, vc)
    with pytest.raises(ValueError, match=r"^k_new: sequence 1 appends 4 keys"):
        longattn.flash_attn_with_kvcache(q, kc, vc, causal=True, **kw)
    same()


def test_page_table_entry_out_of_range_is_named(rng):
    q, kc, vc, kw = make(rng, page=4)
    kw["page_table"] = kw["page_table"].copy()
    kw["page_table"][0, -1] = 10 ** 6
    same = _unchanged(kc, vc)
    with pytest.raises(ValueError, match=r"^page_table: entry \[0, "):
        longattn.flash_attn_with_kvcache(q, kc, vc, causal=True, **kw)
    same()


def test_rotary_table_too_short_is_named(rng):
    q, kc, vc, kw = make(rng, rotary_dim=8)
    kw["rotary_cos"], kw["rotary_sin"] = kw["rotary_cos"][:10], kw["rotary_sin"][:10]
    same = _unchanged(kc, vc)
    with pytest.raises(ValueError, match=r"^rotary_cos: sequence 0 uses rotary positions"):
        longattn.flash_attn_with_kvcache(q, kc, vc, causal=True, **kw)
    same()


def test_mismatched_dtypes_are_named(rng):
    q, kc, vc, kw = make(rng, rotary_dim=8)
    same = _unchanged(kc, vc)
    with pytest.raises(ValueError, match=r"^k_new: dtype f16 differs from the cache's"):
        longattn.flash_attn_with_kvcache(q, kc, vc, **{**kw, "k": kw["k"].astype(np.float16)})
    with pytest.raises(ValueError, match=r"^rotary_cos: dtype f16 not supported"):
        longattn.flash_attn_with_kvcache(q, kc, vc, **{**kw, "rotary_cos": kw["rotary_cos"].astype(np.float16),
                                                       "rotary_sin": kw["rotary_sin"].astype(np.float16)})
    same()


def test_k_without_v_and_rotary_without_append(rng):
    q, kc, vc, kw = make(rng, rotary_dim=8)
    with pytest.raises(ValueError, match="^v: "):
        longattn.flash_attn_with_kvcache(q, kc, vc, k=kw["k"], cache_seqlens=kw["cache_seqlens"])
    with pytest.raises(ValueError, match="^rotary_cos: needs k_new"):
        longattn.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=kw["cache_seqlens"], rotary_cos=kw["rotary_cos"],
                                         rotary_sin=kw["rotary_sin"])


def test_read_only_cache_is_refused(rng):
    q, kc, vc, kw = make(rng)
    kc.flags.writeable = False
    with pytest.raises(ValueError, match="^k: array is read-only"):
        longattn.flash_attn_with_kvcache(q, kc, vc, **kw)


# --- torch (CPU tensors in CI) ------------------------------------------------------------------------

def _torch(kw, device="cpu"):
    conv = {}
    for n, x in kw.items():
        if isinstance(x, np.ndarray):
            t = torch.from_numpy(x.astype(np.float32) if x.dtype.kind == "f" and x.dtype != np.float32 else x)
            conv[n] = t.to(device)
        else:
            conv[n] = x
    return conv


@needs_torch
@pytest.mark.parametrize("page", [0, 4])
def test_torch_append_rotary(rng, page):
    q, kc, vc, kw = make(rng, page=page, rotary_dim=16, batch_idx=True)
    model = Model(q, kc, vc, rotary_interleaved=False, causal=True, **kw)
    tq, tkc, tvc = (torch.from_numpy(x) for x in (q, kc, vc))
    out, lse, *_ = longattn.flash_attn_with_kvcache(tq, tkc, tvc, causal=True, rotary_interleaved=False,
                                                    return_softmax_lse=True, **_torch(kw))
    np.testing.assert_allclose(f64(tkc.numpy()), f64(model.kc), rtol=1e-6, atol=0)
    np.testing.assert_array_equal(f64(tvc.numpy()), f64(model.vc))
    model.check(out.numpy(), lse.numpy(), causal=True)
    np.testing.assert_array_equal(tq.numpy(), q)  # the caller's q is never rotated in place


@needs_torch
def test_torch_int_cache_seqlens(rng):
    q, kc, vc, kw = make(rng, rotary_dim=8)
    for c in (kc, vc):  # every sequence now reads slots 0..19: give them values
        nan = np.isnan(c)
        c[nan] = rng.standard_normal(int(nan.sum()))
    kw["cache_seqlens"] = 20
    model = Model(q, kc, vc, causal=True, **{**kw, "cache_seqlens": np.full(3, 20)})
    tkc, tvc = torch.from_numpy(kc), torch.from_numpy(vc)
    out = longattn.flash_attn_with_kvcache(torch.from_numpy(q), tkc, tvc, causal=True, **_torch(kw))
    np.testing.assert_allclose(f64(tkc.numpy()), f64(model.kc), rtol=1e-6, atol=0)
    model.check(out.numpy(), None, causal=True)


def _fresh(rng, **spec):
    q, kc, vc, kw = make(rng, **spec)
    return (torch.from_numpy(q), torch.from_numpy(kc), torch.from_numpy(vc), _torch(kw)), (q, kc, vc, kw)


@needs_torch
@pytest.mark.parametrize("backend,page", [("aot_eager", 0), ("aot_eager", 4), ("inductor", 4)])
def test_torch_compile_mutates_the_cache(rng, backend, page):
    """torch.compile(fullgraph) through longattn::fwd_kvcache (declared to mutate the caches):
    the compiled call writes the caller's cache exactly as the eager call does, call after call."""
    from longattn import flash_attn_interface as fai

    def f(q, kc, vc, k, v, lens, cos, sin, table):
        return fai.flash_attn_with_kvcache(q, kc, vc, k=k, v=v, cache_seqlens=lens, rotary_cos=cos, rotary_sin=sin,
                                           page_table=table, causal=True) * 2

    g = torch.compile(f, fullgraph=True, backend=backend)
    for _ in range(2):  # a second cache through the same compiled graph
        (tq, tkc, tvc, kw), _ = _fresh(rng, rotary_dim=16, page=page)
        args = (kw["k"], kw["v"], kw["cache_seqlens"], kw["rotary_cos"], kw["rotary_sin"], kw["page_table"])
        ekc, evc = tkc.clone(), tvc.clone()
        want = f(tq, ekc, evc, *args)
        got = g(tq, tkc, tvc, *args)
        torch.testing.assert_close(got, want, rtol=0, atol=0)
        assert torch.equal(tkc.nan_to_num(7.0), ekc.nan_to_num(7.0))
        assert torch.equal(tvc.nan_to_num(7.0), evc.nan_to_num(7.0))


@needs_torch
def test_torch_op_check(rng):
    """torch.library.opcheck on longattn::fwd_kvcache (schema incl. its mutations, fake)."""
    from torch.library import opcheck

    import longattn.torch_ops  # noqa: F401  (registers the ops)
    (tq, tkc, tvc, kw), _ = _fresh(rng, page=4, rotary_dim=8)
    tkc, tvc = tkc.nan_to_num(0.0), tvc.nan_to_num(0.0)  # opcheck compares results: no NaN slots
    args = (tq, tkc, tvc, kw["k"], kw["v"], None, None, kw["cache_seqlens"], None, None, kw["page_table"],
            kw["rotary_cos"], kw["rotary_sin"], None, True, 0, None, None, None, None, None, 0.0, True, -1, -1, 0,
            "auto", 0, 0)
    opcheck(torch.ops.longattn.fwd_kvcache.default, args,
            test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_dynamic"))


# --- CUDA (marker gpu; skipped without a CUDA build and a Hopper GPU) -------------------------------------

def _cuda_ok():
    return torch is not None and torch.cuda.is_available() and longattn.cuda_available()


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_ok(), reason="needs a CUDA build of longattn and an sm_90 GPU")
@pytest.mark.parametrize("page", [0, 16])
@pytest.mark.parametrize("spec", [dict(Sq=1, new=1), dict(Sq=16, new=16, ragged_new=True), dict(batch_idx=True)])
def test_cuda_append_rotary(rng, page, spec):
    q, kc, vc, kw = make(rng, dtype="bf16", D=128, Hq=8, Hk=2, cap=300, page=page, rotary_dim=64, **spec)
    model = Model(q, kc, vc, rotary_interleaved=False, causal=True, dtype="bf16",
                  **{n: x for n, x in kw.items() if n != "max_seqlen_q"})
    dev = {n: (torch.from_numpy(x.view(np.uint16)).view(torch.bfloat16).cuda() if x.dtype == NP_DTYPES["bf16"]
               else torch.from_numpy(x).cuda()) if isinstance(x, np.ndarray) else x for n, x in kw.items()}
    bf = lambda x: torch.from_numpy(x.view(np.uint16)).view(torch.bfloat16).cuda()  # noqa: E731
    tq, tkc, tvc = bf(q), bf(kc), bf(vc)
    out, lse, *_ = longattn.flash_attn_with_kvcache(tq, tkc, tvc, causal=True, rotary_interleaved=False,
                                                    return_softmax_lse=True, **dev)
    torch.cuda.synchronize()
    got_k = tkc.float().cpu().numpy()
    np.testing.assert_allclose(got_k, f64(model.kc), rtol=2 ** -7, atol=0)  # one bf16 ulp: float32 rotation
    np.testing.assert_array_equal(tvc.float().cpu().numpy(), f64(model.vc))
    model.check(out.float().cpu().numpy(), lse.cpu().numpy(), dtype="bf16", causal=True)
