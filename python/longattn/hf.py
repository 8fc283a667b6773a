"""HuggingFace transformers integration: longattn as a model's attention implementation.

    import longattn.hf
    longattn.hf.register()                       # adds attn_implementation="longattn"
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="longattn")

Causal and bidirectional attention, GQA, sliding windows, softcap and attention sinks
(gpt-oss `s_aux`). Padded batches (causal + padding masks, left padding from `generate()`
included) are unpadded to a ragged batch and run through flash_attn_varlen_func, as
transformers' own FlashAttention-2 integration does: `register()` installs a mask function
that hands the attention the 2-D padding mask (transformers >= 4.53). Masks that are more
than causal + padding (packed sequences, image-token overlays, custom 4-D masks) reach the
attention as 4-D masks and raise NotImplementedError unless they equal longattn's own rule.
"""

from __future__ import annotations

import weakref

import torch

from .interface import flash_attn_func, flash_attn_varlen_func

NAME = "longattn"

_is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", lambda: False)

# transformers' mask functions whose pattern longattn computes itself from the module's
# causal / sliding_window: causal, bidirectional, and their sliding-window variants (and_masks
# of these). Anything else (chunked, packed, block overlays, user functions) is "custom".
_PLAIN_MASK_FUNCTIONS = {
    "causal_mask_function",
    "bidirectional_mask_function",
    "sliding_window_overlay.<locals>.inner_mask",
    "sliding_window_bidirectional_overlay.<locals>.inner_mask",
}


def _plain_mask_function(fn, depth: int = 0) -> bool:
    name = getattr(fn, "__qualname__", "")
    if name in _PLAIN_MASK_FUNCTIONS:
        return True
    if name == "and_masks.<locals>.and_mask" and depth < 4 and fn.__closure__:
        parts = [f for c in fn.__closure__ for f in
                 (c.cell_contents if isinstance(c.cell_contents, tuple) else (c.cell_contents,))]
        return bool(parts) and all(callable(f) and _plain_mask_function(f, depth + 1) for f in parts)
    return False


def mask_interface(batch_size, q_length, kv_length, q_offset=0, kv_offset=0, mask_function=None,
                   attention_mask=None, **kwargs):
    """transformers AttentionMaskInterface entry: FA2's 2-D padding mask (or None) when the
    pattern is one longattn applies itself, else SDPA's 4-D boolean mask (checked, and refused
    unless plain, by attention_forward)."""
    from transformers import masking_utils as mu

    if mask_function is None or _plain_mask_function(mask_function):
        return mu.flash_attention_mask(batch_size=batch_size, q_length=q_length, kv_length=kv_length,
                                       q_offset=q_offset, kv_offset=kv_offset,
                                       attention_mask=attention_mask, **kwargs)
    return mu.sdpa_mask(batch_size=batch_size, q_length=q_length, kv_length=kv_length, q_offset=q_offset,
                        kv_offset=kv_offset, mask_function=mask_function, attention_mask=attention_mask,
                        **kwargs)


def _expected(sq: int, sk: int, causal: bool, window, device) -> torch.Tensor:
    """(sq, sk) visibility under longattn's rule (bottom-right aligned)."""
    p = torch.arange(sq, device=device)[:, None] + (sk - sq)
    j = torch.arange(sk, device=device)[None, :]
    vis = torch.ones(sq, sk, dtype=torch.bool, device=device)
    if causal:
        vis &= j <= p
    if window[0] >= 0:
        vis &= j >= p - window[0]
    if window[1] >= 0:
        vis &= j <= p + window[1]
    return vis


def _check_4d(mask, sq, sk, causal, window):
    """A 4-D mask is accepted only when it equals longattn's own rule (no padding)."""
    allowed = mask if mask.dtype == torch.bool else mask == 0
    if tuple(allowed.shape[-2:]) != (sq, sk) or not bool(
            (allowed == _expected(sq, sk, causal, window, allowed.device)).all()):
        raise NotImplementedError(
            "attention_mask: custom masks (more than causal + padding: packed sequences, overlays, "
            "user 4-D masks) are not supported by longattn")


class _Unpad:
    """Ragged-batch metadata of one 2-D padding mask: token indices, cu_seqlens, max length."""

    def __init__(self, keep: torch.Tensor):
        lens = keep.sum(-1, dtype=torch.int32)
        self.cu = torch.nn.functional.pad(torch.cumsum(lens, 0, dtype=torch.int32), (1, 0))
        self.rows, self.cols = keep.nonzero(as_tuple=True)
        self.max = int(lens.max()) if lens.numel() else 0


# One forward pass hands the same mask object to every layer: unpad it once (the nonzero and
# the max length are a host synchronisation each on a GPU).
_last = {"ref": None, "key": None, "val": None}


def _unpad_cached(mask, keep_k, sq):
    key = (mask._version, tuple(mask.shape), keep_k.shape[1], sq)
    if not _is_compiling() and _last["ref"] is not None and _last["ref"]() is mask and _last["key"] == key:
        return _last["val"]
    uk = _Unpad(keep_k)
    uq = uk if sq == keep_k.shape[1] else (None if sq == 1 else _Unpad(keep_k[:, -sq:]))
    if not _is_compiling():
        _last.update(ref=weakref.ref(mask), key=key, val=(uk, uq))
    return uk, uq


def _padded(q, k, v, mask, kw):
    """Padded batch through the ragged layout (transformers' FA2 scheme): keys of each sequence
    are its unmasked positions; queries the last q_len positions' unmasked ones (all of them
    when decoding one token); outputs of padded query rows are zero."""
    b, sq, h = q.shape[0], q.shape[1], q.shape[2]
    if k.shape[1] > mask.shape[-1]:  # static cache: slots past the mask are unused
        k, v = k[:, :mask.shape[-1]], v[:, :mask.shape[-1]]
    keep = mask[:, -k.shape[1]:].bool()
    uk, uq = _unpad_cached(mask, keep, sq)
    ku, vu = k[uk.rows, uk.cols], v[uk.rows, uk.cols]
    if uq is None:  # one new token per sequence: every query kept, aligned to its last key
        cu_q = torch.arange(b + 1, dtype=torch.int32, device=q.device)
        out = flash_attn_varlen_func(q[:, 0], ku, vu, cu_q, uk.cu, 1, uk.max, **kw)
        return out.unsqueeze(1)
    out = flash_attn_varlen_func(q[uq.rows, uq.cols], ku, vu, uq.cu, uk.cu, uq.max, uk.max, **kw)
    full = out.new_zeros((b, sq, h, out.shape[-1]))
    full[uq.rows, uq.cols] = out
    return full


def attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                      is_causal=None, sliding_window=None, softcap=None, s_aux=None, **kwargs):
    """transformers AttentionInterface signature: query (batch, heads, seq_q, dim),
    key/value (batch, kv_heads, seq_k, dim). Returns ((batch, seq_q, heads, dim), None)."""
    if dropout and module.training:
        raise NotImplementedError("dropout: not supported by longattn (inference only)")
    q, k, v = (x.transpose(1, 2) for x in (query, key, value))  # (batch, seq, heads, dim) views
    causal = bool(is_causal if is_causal is not None else getattr(module, "is_causal", True))
    window = (-1, -1)
    if sliding_window:
        w = int(sliding_window) - 1  # HF counts the query's own position in the window
        window = (w, -1 if causal else w)
    kw = dict(softmax_scale=scaling, causal=causal, window_size=window, softcap=float(softcap or 0.0),
              sinks=s_aux.float() if s_aux is not None else None)
    if attention_mask is not None and attention_mask.dim() == 4:
        _check_4d(attention_mask, q.shape[1], k.shape[1], causal, window)
        attention_mask = None
    cu_q, cu_k = kwargs.get("cu_seq_lens_q"), kwargs.get("cu_seq_lens_k")
    if attention_mask is None and cu_q is not None and cu_k is not None and q.shape[0] == 1:
        # Padding-free packed batch (e.g. DataCollatorWithFlattening): the lengths are given.
        out = flash_attn_varlen_func(q[0], k[0], v[0], cu_q.int(), cu_k.int(), int(kwargs["max_length_q"]),
                                     int(kwargs["max_length_k"]), **kw)
        return out.unsqueeze(0), None
    if attention_mask is None:
        return flash_attn_func(q, k, v, **kw), None
    return _padded(q, k, v, attention_mask, kw), None


def register(name: str = NAME) -> str:
    """Register the attention function (and its mask function) under `name`."""
    from transformers import AttentionInterface

    AttentionInterface.register(name, attention_forward)
    try:  # transformers >= 4.53 builds masks per implementation
        from transformers import AttentionMaskInterface

        AttentionMaskInterface.register(name, mask_interface)
    except ImportError:
        pass
    return name
