"""The --features rows tagged 'kvcache' (issue 17): FlashAttention-3's serving call
(flash_attn_with_kvcache with k / v appended and rotary) at decode and chunked prefill, one
call against the composition an engine runs without it. FA3's own flash_attn_with_kvcache is
not in our FA3 build (its FFI has the plain and varlen forwards only), so the composition is
the comparison the issue asks for:

- "longattn kvcache": one call through the C ABI -- the pre-kernels (metadata check, append
  + rotary; src/cuda/append_rotary.cu) and the attention over cache + new keys;
- "attn-only + torch copy + torch rotary": q and the new k rotated by torch (float32 math,
  rounded to bf16 once, tables gathered at each token's position), k / v written into the
  cache by index_copy_ on precomputed slot indices (vLLM's slot mapping), then longattn's
  attention-only call over cache_seqlens + new keys (the row's base and diff reference);
- "longattn attn-only": that attention call alone (no append, no rotary: the time the
  pre-kernels add on top; its output differs, q being unrotated).

Shapes: 32 / 8 heads, hdim 128, NeoX rotary over the whole head, causal (bottom-right);
dense caches and pages of 16 / 64 (a shuffled pool). Decode: 32 sequences of 8k cached keys
(8 of 64k) with 1, 16 or 64 new tokens (seq_q = new tokens). Chunked prefill: one sequence,
512 / 2048 new tokens over 8k / 64k cached. Every column is timed by CUPTI kernel time and
per call from Python (wall: host overhead and launch gaps included, which decode feels).
Each call writes the same slots with the same values (cache_seqlens is fixed), so repeated
calls time a steady state.
"""
import math

import torch

from peers import LONGATTN_KERNELS, Impl
from runner import Row
from shapes import Case, kseq
from suites import check_memory


def _rope(x, cos, sin):
    """x (b, n, h, d) rotated by the NeoX rule at per-token cos / sin (b, n, d / 2), in float32."""
    xf = x.float()
    c, s = cos[:, :, None, :].float(), sin[:, :, None, :].float()
    h = xf.shape[-1] // 2
    x1, x2 = xf[..., :h], xf[..., h:]
    return torch.cat((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).to(x.dtype)


def kvcache_row(ctx, b, n, cached, page, hq=32, hk=8, d=128, seed=17):
    """One serving row: b sequences of `cached` keys, n new tokens each (q and k / v)."""
    la = ctx.need_la()
    cap = cached + n
    c = Case(b, n, cap, hq, hk, d, True)
    dt, dev = torch.bfloat16, "cuda"
    slots_bytes = b * cap * hk * d * 2 * 2
    check_memory(3 * slots_bytes + 64 * 2 ** 20, "kvcache")
    gen = torch.Generator(device=dev).manual_seed(seed)
    q = torch.randn(b, n, hq, d, device=dev, dtype=dt, generator=gen)
    k_new = torch.randn(b, n, hk, d, device=dev, dtype=dt, generator=gen)
    v_new = torch.randn(b, n, hk, d, device=dev, dtype=dt, generator=gen)
    seqlens = torch.full((b,), cached, dtype=torch.int32, device=dev)
    after = seqlens + n
    t = torch.arange(cap + 1, device=dev, dtype=torch.float32)[:, None]
    inv = 10000.0 ** (-torch.arange(0, d, 2, device=dev, dtype=torch.float32) / d)
    cos, sin = torch.cos(t * inv).to(dt), torch.sin(t * inv).to(dt)
    pos = (seqlens[:, None] + torch.arange(n, device=dev, dtype=torch.int32)[None, :]).long()  # (b, n)
    if page:
        mp = -(-cap // page)
        npg = b * mp + 7
        perm = torch.randperm(npg, generator=torch.Generator().manual_seed(page))[: b * mp]
        table = perm.view(b, mp).to(torch.int32).to(dev)
        shape = (npg, page, hk, d)
        slot = pos % page
        flat = (table.long().gather(1, pos // page) * page + slot).reshape(-1)  # slot mapping
    else:
        table, shape = None, (b, cap, hk, d)
        flat = (torch.arange(b, device=dev)[:, None] * cap + pos).reshape(-1)
    kc = torch.randn(shape, device=dev, dtype=dt, generator=gen)
    vc = torch.randn(shape, device=dev, dtype=dt, generator=gen)
    kc2, vc2 = kc.clone(), vc.clone()  # the composition's own caches
    outs = {name: torch.empty_like(q) for name in ("fused", "torch", "attn")}

    def fused(i):
        la.kvcache(q, kc, vc, outs["fused"], seqlens, True, table, k_new, v_new, cos, sin)

    def composition(i):
        qr = _rope(q, cos[pos], sin[pos])
        kr = _rope(k_new, cos[pos], sin[pos])
        kc2.view(-1, hk, d).index_copy_(0, flat, kr.reshape(-1, hk, d))
        vc2.view(-1, hk, d).index_copy_(0, flat, v_new.reshape(-1, hk, d))
        la.kvcache(qr, kc2, vc2, outs["torch"], after, True, table)

    def attn_only(i):
        la.kvcache(q, kc2, vc2, outs["attn"], after, True, table)

    row = Row(f"kvcache {'decode' if n <= 64 and b > 1 else 'chunked prefill'}", c)
    where = f"pages of {page}" if page else "dense cache"
    row.shape = f"d{d} b{b}, {n} new tokens over {kseq(cached)} cached, {hq}/{hk} heads, {where}"
    row.ref, row.base = ["attn-only + torch copy + torch rotary"], "attn-only + torch copy + torch rotary"

    def impl(fn, key, diff=True, note=""):
        o = outs[key]
        return Impl(fn, lambda _: o, poison=lambda: o.fill_(math.nan), expect=LONGATTN_KERNELS, diff=diff, note=note,
                    wall=True)
    row.add("longattn kvcache", lambda: impl(fused, "fused"))
    row.add("attn-only + torch copy + torch rotary", lambda: impl(composition, "torch"))
    row.add("longattn attn-only", lambda: impl(attn_only, "attn", diff=False, note="no append, no rotary"))
    return row


def kvcache_rows(ctx):
    """(case, builder, tag) of the kvcache rows, in table order."""
    out = []
    specs = [(32, n, 8192, page) for n in (1, 16, 64) for page in (0, 16, 64)]
    specs += [(8, 1, 65536, page) for page in (0, 16, 64)]
    specs += [(1, n, cached, page) for cached in (8192, 65536) for n in (512, 2048) for page in (0, 16, 64)]
    for b, n, cached, page in specs:
        c = Case(b, n, cached + n, 32, 8, 128, True)
        tag = f"kvcache {'page ' + str(page) if page else 'dense'}"
        out.append((c, lambda b=b, n=n, cached=cached, page=page: kvcache_row(ctx, b, n, cached, page), tag))
    return out
