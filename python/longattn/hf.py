"""HuggingFace transformers integration: longattn as a model's attention implementation.

    import longattn.hf
    longattn.hf.register()                       # adds attn_implementation="longattn"
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="longattn")

Supports causal (and bidirectional) attention without padding, GQA, sliding windows,
softcap and attention sinks (gpt-oss `s_aux`). A padded batch (an attention mask that is
not the plain causal mask) raises NotImplementedError: pack it and use
flash_attn_varlen_func instead.
"""

from __future__ import annotations

import torch

from ._core import forward

NAME = "longattn"


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


def attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                      is_causal=None, sliding_window=None, softcap=None, s_aux=None, **kwargs):
    """transformers AttentionInterface signature: query (batch, heads, seq_q, dim),
    key/value (batch, kv_heads, seq_k, dim). Returns ((batch, seq_q, heads, dim), None)."""
    if dropout and module.training:
        raise NotImplementedError("dropout: not supported by longattn (inference only)")
    q, k, v = (x.transpose(1, 2) for x in (query, key, value))  # (batch, seq, heads, dim) views
    causal = bool(is_causal if is_causal is not None else getattr(module, "is_causal", True))
    sq, sk = q.shape[1], k.shape[1]
    window = (-1, -1)
    if sliding_window:
        w = int(sliding_window) - 1  # HF counts the query's own position in the window
        window = (w, -1 if causal else w)
    if attention_mask is not None and attention_mask.dim() == 4:
        # The model built a mask; longattn computes the mask itself, so only accept masks
        # that equal its rule (no padding). Anything else would silently change results.
        allowed = attention_mask if attention_mask.dtype == torch.bool else attention_mask == 0
        if tuple(allowed.shape[-2:]) != (sq, sk) or not bool(
                (allowed == _expected(sq, sk, causal, window, allowed.device)).all()):
            raise NotImplementedError(
                "attention_mask: padded or custom masks are not supported by longattn "
                "(use flash_attn_varlen_func for packed batches)")
    sinks = s_aux.float() if s_aux is not None else None
    out = forward(q, k, v, softmax_scale=scaling, causal=causal, window_size=window,
                  softcap=float(softcap or 0.0), sinks=sinks)
    return out, None


def register(name: str = NAME) -> str:
    """Register the attention function (and the SDPA mask format) under `name`."""
    from transformers import AttentionInterface

    AttentionInterface.register(name, attention_forward)
    try:  # transformers >= 4.53 builds masks per implementation
        from transformers import AttentionMaskInterface
        from transformers.masking_utils import sdpa_mask

        AttentionMaskInterface.register(name, sdpa_mask)
    except ImportError:
        pass
    return name
