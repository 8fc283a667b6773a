"""longattn's forward as a torch.library custom op, so torch.compile graphs can call it
without a graph break. Importing this module registers `torch.ops.longattn.fwd`; plain
calls through longattn.flash_attn_func never import it (and never import torch).

    import longattn.torch_ops as lt
    out = torch.compile(lambda q, k, v: lt.flash_attn_func(q, k, v, causal=True))(q, k, v)

Forward only: the op has no autograd formula.
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

import torch

from ._core import forward

__all__ = ["fwd", "flash_attn_func", "flash_attn_varlen_func"]


@torch.library.custom_op("longattn::fwd", mutates_args=())
def fwd(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens_q: Optional[torch.Tensor],
    cu_seqlens_k: Optional[torch.Tensor],
    seqused_k: Optional[torch.Tensor],
    page_table: Optional[torch.Tensor],
    max_seqlen_q: int,
    max_seqlen_k: int,
    sinks: Optional[torch.Tensor],
    q_descale: Optional[torch.Tensor],
    k_descale: Optional[torch.Tensor],
    v_descale: Optional[torch.Tensor],
    softmax_scale: Optional[float],
    softcap: float,
    causal: bool,
    window_left: int,
    window_right: int,
    attention_chunk: int,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """(out, lse) of longattn.forward; every argument explicit (custom-op schema)."""
    return forward(
        q, k, v, return_lse=True, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
        seqused_k=seqused_k, page_table=page_table, max_seqlen_q=max_seqlen_q,
        max_seqlen_k=max_seqlen_k, sinks=sinks, q_descale=q_descale, k_descale=k_descale,
        v_descale=v_descale, softmax_scale=softmax_scale, softcap=softcap, causal=causal,
        window_size=(window_left, window_right), attention_chunk=attention_chunk,
    )


@fwd.register_fake
def _fwd_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, page_table, max_seqlen_q,
              max_seqlen_k, sinks, q_descale, k_descale, v_descale, softmax_scale, softcap,
              causal, window_left, window_right, attention_chunk):
    fp8 = getattr(torch, "float8_e4m3fn", None)
    out_dtype = torch.bfloat16 if q.dtype == fp8 else q.dtype
    out = q.new_empty(tuple(q.shape[:-1]) + (v.shape[-1],), dtype=out_dtype)
    if cu_seqlens_q is not None:
        lse = q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32)
    else:
        lse = q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32)
    return out, lse


def _window(window_size: Sequence[int], causal: bool):
    left, right = int(window_size[0]), int(window_size[1])
    return left, (-1 if causal else right)  # FA3: causal ignores the right window


def flash_attn_func(q, k, v, softmax_scale=None, causal=False, q_descale=None, k_descale=None,
                    v_descale=None, window_size=(-1, -1), attention_chunk=0, softcap=0.0,
                    return_attn_probs=False, *, sinks=None):
    """longattn.flash_attn_func through the custom op (torch.compile friendly)."""
    wl, wr = _window(window_size, causal)
    out, lse = fwd(q, k, v, None, None, None, None, 0, 0, sinks, q_descale, k_descale,
                   v_descale, softmax_scale, float(softcap), bool(causal), wl, wr,
                   int(attention_chunk))
    return (out, lse) if return_attn_probs else out


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           seqused_k=None, softmax_scale=None, causal=False, q_descale=None,
                           k_descale=None, v_descale=None, window_size=(-1, -1),
                           attention_chunk=0, softcap=0.0, return_attn_probs=False, *,
                           sinks=None):
    """longattn.flash_attn_varlen_func through the custom op."""
    wl, wr = _window(window_size, causal)
    out, lse = fwd(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, None, int(max_seqlen_q),
                   int(max_seqlen_k), sinks, q_descale, k_descale, v_descale, softmax_scale,
                   float(softcap), bool(causal), wl, wr, int(attention_chunk))
    return (out, lse) if return_attn_probs else out
