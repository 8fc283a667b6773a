"""NumPy float64 attention reference (and its same-precision "naive" twin) for the tests.

Semantics: ../../include/longattn/longattn.h. Written independently of the C++ reference so
the Python tests check the binding, the layouts and the kernels against a second oracle."""

from __future__ import annotations

import numpy as np

try:
    import ml_dtypes
except ImportError:  # pragma: no cover
    ml_dtypes = None


def visible(sq, sk, causal=False, top_left=False, window=(-1, -1), chunk=0):
    """Boolean (sq, sk) mask: key j visible to query i."""
    off = 0 if top_left else sk - sq
    p = np.arange(sq)[:, None] + off
    j = np.arange(sk)[None, :]
    vis = np.ones((sq, sk), dtype=bool)
    if causal:
        vis &= j <= p
    if window[0] >= 0:
        vis &= j >= p - window[0]
    if window[1] >= 0:
        vis &= j <= p + window[1]
    if chunk > 0:
        vis &= (j // chunk) == (p // chunk)  # floor division, also for p < 0
    return vis


def round_to(x, dtype):
    """Round float array x to `dtype` ('bf16', 'f16', 'f32', 'e4m3') and back to float32."""
    if dtype == "f32":
        return x.astype(np.float32)
    if dtype == "f16":
        return x.astype(np.float16).astype(np.float32)
    if dtype == "bf16":
        return x.astype(ml_dtypes.bfloat16).astype(np.float32)
    if dtype == "e4m3":
        return x.astype(ml_dtypes.float8_e4m3fn).astype(np.float32)
    raise ValueError(dtype)


def attend(q, k, v, vis, scale, softcap=0.0, sink=None, precision=None, out_dtype="f32"):
    """One (sequence, head): q (sq, d), k (sk, d), v (sk, dv). Returns out (sq, dv), lse (sq,).

    precision None: float64 throughout (the oracle). precision 'bf16'/'f16'/'f32'/'e4m3':
    float32 math with P rounded to that dtype before P.V and out rounded to out_dtype."""
    ft = np.float64 if precision is None else np.float32
    q, k, v = q.astype(ft), k.astype(ft), v.astype(ft)
    s = (q @ k.T) * ft(scale)
    if softcap > 0:
        s = ft(softcap) * np.tanh(s / ft(softcap))
    s = np.where(vis, s, -np.inf)
    m = s.max(axis=1, initial=-np.inf)
    if sink is not None:
        m = np.maximum(m, ft(sink))
    empty = ~vis.any(axis=1)
    m_safe = np.where(np.isfinite(m), m, 0)
    p = np.exp(s - m_safe[:, None])
    den = p.sum(axis=1)
    if sink is not None:
        den = den + np.exp(ft(sink) - m_safe)
    if precision is not None:
        p = round_to(p, precision)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (p @ v) / den[:, None]
        lse = np.log(den) + m_safe
    out[empty] = 0
    # No visible key: LSE -inf, or the sink logit (it is still in the denominator).
    lse[empty] = -np.inf if sink is None else sink
    if precision is not None:
        out = round_to(out, out_dtype)
    return out, lse


def to_f64(x):
    return np.asarray(x).astype(np.float32).astype(np.float64)


def attention(q, k, v, *, q_lens=None, k_lens=None, k_used=None, scale=None, causal=False, top_left=False,
              window=(-1, -1), chunk=0, softcap=0.0, sinks=None, descales=None, precision=None,
              out_dtype="f32"):
    """Dense (B, S, H, D) or ragged (T, H, D) with q_lens / k_lens (stored keys per sequence);
    k_used (seqused_k) limits the keys each sequence sees. descales: (q, k, v) arrays (B, Hkv) or None.
    Returns out (float64 or rounded float32) and lse (dense (B, H, S), ragged (H, T))."""
    ragged = q.ndim == 3
    qf, kf, vf = to_f64(q), to_f64(k), to_f64(v)
    if ragged:
        B = len(q_lens)
        q_starts = np.concatenate([[0], np.cumsum(q_lens)]).astype(int)
        k_lens = k_lens if k_lens is not None else q_lens
    else:
        B, Sq = q.shape[0], q.shape[1]
        q_lens = [Sq] * B
        k_lens = [k.shape[1]] * B
    k_used = k_used if k_used is not None else k_lens
    H, D = q.shape[-2], q.shape[-1]
    Hkv, Dv = k.shape[-2], v.shape[-1]
    group = H // Hkv
    if scale is None:
        scale = 1.0 / np.sqrt(D)
    out = np.zeros(q.shape[:-1] + (Dv,), dtype=np.float64)
    lse = np.zeros((H, q.shape[0]) if ragged else (B, H, q.shape[1]), dtype=np.float64)
    k_off = 0
    for b in range(B):
        sq, sk = int(q_lens[b]), int(k_used[b])
        vis = visible(sq, sk, causal, top_left, window, chunk)
        for h in range(H):
            hk = h // group
            qd = kd = vd = 1.0
            if descales is not None:
                qd, kd, vd = (float(np.asarray(d)[b, hk]) for d in descales)
            if ragged:
                qs = q_starts[b]
                qb = qf[qs:qs + sq, h]
                kb = kf[k_off:k_off + sk, hk]
                vb = vf[k_off:k_off + sk, hk]
            else:
                qb, kb, vb = qf[b, :, h], kf[b, :sk, hk], vf[b, :sk, hk]
            sink = None if sinks is None else float(sinks[h])
            o, l = attend(qb, kb, vb, vis, scale * qd * kd, softcap, sink, precision, out_dtype)
            if ragged:
                out[qs:qs + sq, h] = o * vd
                lse[h, qs:qs + sq] = l
            else:
                out[b, :, h] = o * vd
                lse[b, h] = l
        if ragged:
            k_off += int(k_lens[b])
    return out, lse
