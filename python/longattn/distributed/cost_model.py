"""Cost model of context-parallel prefill: per-rank compute, communication volume and what
of it stays exposed, and the extra memory traffic each method adds, for one attention
layer. docs/distributed.md explains it and shows its tables (`python -c "import
longattn.distributed.cost_model as m; m.main()"`); the default rule (`default_method`)
follows the measurements there, which add the split overhead this model leaves out.

Assumptions (each a named field of `Hardware`):
- every rank's kernels run at the single-GPU throughput `tflops` (FLOPs of visible pairs,
  so causal counts half); what splitting the work costs on one GPU (smaller calls, tails,
  partial outputs) is measured by tests/gpu/cp_one_gpu.py ("split overhead") and enters
  as `split_overhead`;
- zigzag balances causal work exactly (equal chunks): every rank computes 1/W of the pairs;
- a transfer runs at `link_GBps` per direction per GPU (NVLink through NVSwitch: the ring
  all-gather and the p2p ring both move (W-1)/W of the K/V into every GPU at that rate),
  overlapped with compute issued before it is waited for;
- extra memory traffic (packing the local K/V slice; with `reorder`, putting the gathered
  K/V in sequence order, which the zigzag all-gather no longer does; float32 partials and
  their merge) runs at `hbm_TBps` and is not overlapped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Hardware:
    name: str = "H100 SXM (NVLink 4 / NVSwitch)"
    tflops: float = 650.0  # attention forward, bf16 hdim 128, long sequences
    link_GBps: float = 450.0  # per direction, per GPU
    hbm_TBps: float = 2.8  # achieved copy bandwidth (of 3.35 peak)
    call_us: float = 8.0  # launch + tail per attention call or copy kernel


H100 = Hardware()


@dataclass(frozen=True)
class Prediction:
    method: str
    world: int
    tokens: int
    t_one: float  # seconds on one GPU (the whole sequence, one call)
    t_compute: float  # seconds of attention per rank (t_one / world)
    comm_bytes: float  # bytes each rank receives
    t_comm: float  # seconds those bytes take on the link
    t_exposed: float  # seconds of communication not hidden behind compute
    t_extra: float  # seconds of extra memory traffic and calls
    memory_bytes: float  # extra device memory per rank (buffers, partials)

    @property
    def t_total(self) -> float:
        return self.t_compute + self.t_exposed + self.t_extra

    @property
    def speedup(self) -> float:
        return self.t_one / self.t_total

    @property
    def efficiency(self) -> float:
        return self.speedup / self.world


def attention_flops(tokens: int, heads_q: int, dim: int, dim_v: int, causal: bool) -> float:
    pairs = tokens * (tokens + 1) / 2 if causal else float(tokens) * tokens
    return 2.0 * pairs * heads_q * (dim + dim_v)


def all_gather_bytes(tokens: int, heads_kv: int, kv_groups: int, dim: int = 128, dim_v: Optional[int] = None,
                     elem_bytes: int = 2, reorder: bool = True) -> int:
    """Device memory the all-gather holds per rank: one group's gathered K/V, the next group's
    gather in flight and, with `reorder`, the sequence-order copy (the zigzag path reads the
    gathered K/V in place, but a call the backend refuses falls back to the copy, so the
    kv_groups rule counts it)."""
    dim_v = dim if dim_v is None else dim_v
    return (3 if reorder else 2) * tokens * (heads_kv // kv_groups) * (dim + dim_v) * elem_bytes


def default_kv_groups(heads_kv: int, tokens: int = 0, dim: int = 128, dim_v: Optional[int] = None,
                      elem_bytes: int = 2, free_bytes: int = -1) -> int:
    """Head groups the all-gather pipelines: the first group's gather is exposed (1/G of the
    transfer) and every group is a separate set of calls (smaller kernels), so 2 when
    heads_kv is even, else 1; more (the next divisors of heads_kv) while the gathered buffers
    would take over half of `free_bytes` (the smallest free device memory over the ranks;
    -1: unknown, host memory)."""
    g = 2 if heads_kv % 2 == 0 else 1
    if free_bytes < 0 or tokens <= 0:
        return g
    for cand in (x for x in range(g, heads_kv + 1) if heads_kv % x == 0):
        g = cand
        if all_gather_bytes(tokens, heads_kv, g, dim, dim_v, elem_bytes) <= free_bytes // 2:
            break
    return g


def predict(method: str, world: int, tokens: int, heads_q: int = 32, heads_kv: int = 8, dim: int = 128,
            dim_v: Optional[int] = None, causal: bool = True, elem_bytes: int = 2,
            kv_groups: Optional[int] = None, split_overhead: float = 0.0, hw: Hardware = H100,
            reorder: bool = False) -> Prediction:
    """Predicted time of one context-parallel attention call (one layer) on `world` GPUs.
    `reorder`: the all-gather puts the gathered K/V in sequence order and calls each chunk
    (windows, the contiguous layout); else the zigzag path, one call over them in place."""
    dim_v = dim if dim_v is None else dim_v
    t_one = attention_flops(tokens, heads_q, dim, dim_v, causal) / (hw.tflops * 1e12)
    x = t_one / world * (1.0 + split_overhead)
    local = tokens / world
    shard = local * heads_kv * (dim + dim_v) * elem_bytes  # one rank's K+V
    bw, hbm, call = hw.link_GBps * 1e9, hw.hbm_TBps * 1e12, hw.call_us * 1e-6
    comm = (world - 1) * shard
    t_comm = comm / bw
    if world == 1:
        return Prediction(method, 1, tokens, t_one, t_one, 0.0, 0.0, 0.0, 0.0, 0.0)
    if method == "all_gather_kv":
        g = kv_groups or default_kv_groups(heads_kv)
        per = t_comm / g
        exposed = per + (g - 1) * max(0.0, per - x / g)
        # pack the local slice (r+w) and one call per group; with the reorder, the gathered
        # K/V into sequence order (r+w), two copies and two calls per group
        if reorder:
            extra = (2 * shard + 2 * world * shard) / hbm + g * (2 + 2) * call
        else:
            extra = 2 * shard / hbm + g * 2 * call
        memory = all_gather_bytes(tokens, heads_kv, g, dim, dim_v, elem_bytes, reorder)
    elif method == "ring":
        step = shard / bw
        exposed = (world - 1) * max(0.0, step - x / world)
        # float32 partials: the slowest rank writes and re-reads up to W of them per token
        rows = world * local
        extra = (8.0 * rows * heads_q * dim_v + 2 * shard) / hbm + world * 2 * call
        memory = 2 * shard + world * local * heads_q * dim_v * 4 + world * heads_q * local * 4
    else:
        raise ValueError(f"method: {method!r}")
    return Prediction(method, world, tokens, t_one, x, comm, t_comm, exposed, extra, memory)


def default_method(world: int, heads_q: int, heads_kv: int) -> str:
    """The documented default (docs/distributed.md): `all_gather_kv` for every shape, MHA
    included. This model favours the ring for MHA (it exposes none of the ring's transfers
    and 1/G of the gather's), but the ring's per-step calls, float32 partials and merge cost
    more than the gather exposes: measured on four GPUs, the all-gather is the faster method
    under MHA and GQA alike (docs/distributed.md). The arguments stay for callers; memory does
    not change the method, it raises kv_groups (default_kv_groups)."""
    del world, heads_q, heads_kv
    return "all_gather_kv"


def _table(heads_q=32, heads_kv=8, causal=True, hw=H100) -> str:
    lines = [
        "| tokens | W | one GPU (s) | method | per rank compute (s) | received (GB) | link (ms) | exposed (ms) "
        "| extra (ms) | extra memory (GB) | efficiency |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for tokens in (131072, 262144, 524288, 1048576):
        for world in (2, 4, 8):
            for method in ("all_gather_kv", "ring"):
                p = predict(method, world, tokens, heads_q, heads_kv, causal=causal, hw=hw)
                lines.append(
                    f"| {tokens // 1024}k | {world} | {p.t_one:.3f} | {method} | {p.t_compute:.3f} | "
                    f"{p.comm_bytes / 1e9:.2f} | {p.t_comm * 1e3:.2f} | {p.t_exposed * 1e3:.2f} | "
                    f"{p.t_extra * 1e3:.2f} | {p.memory_bytes / 1e9:.1f} | {p.efficiency * 100:.1f}% |"
                )
    return "\n".join(lines)


def _targets(hw=H100) -> str:
    """Split overhead each target of issue 19 tolerates under the model (GQA 32/8, causal)."""
    lines = ["| W | tokens | target speedup | method | allowed split overhead |", "|---|---|---|---|---|"]
    for world, tokens, target in ((2, 262144, 1.85), (4, 1048576, 3.6), (8, 1048576, 7.0)):
        for method in ("all_gather_kv", "ring"):
            p = predict(method, world, tokens, hw=hw)
            # speedup = t_one / (t_one/W (1+s) + exposed + extra) = target  ->  s
            s = ((p.t_one / target) - p.t_exposed - p.t_extra) / (p.t_one / world) - 1.0
            lines.append(f"| {world} | {tokens // 1024}k | {target} | {method} | {s * 100:.1f}% |")
    return "\n".join(lines)


def main():
    """Print the tables of docs/distributed.md."""
    print(f"## {H100.name}: {H100.tflops} TFLOP/s, link {H100.link_GBps} GB/s, HBM {H100.hbm_TBps} TB/s\n")
    print("### causal, 32 query / 8 kv heads, hdim 128, bf16\n")
    print(_table())
    print("\n### causal, 32 / 32 heads (MHA)\n")
    print(_table(heads_kv=32))
    print("\n### targets of issue 19\n")
    print(_targets())


if __name__ == "__main__":
    main()
