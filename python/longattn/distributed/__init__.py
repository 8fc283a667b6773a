"""Context parallelism: one long prefill sharded over the ranks of a torch.distributed group
(NCCL on GPUs, gloo on CPUs), computed with longattn's own kernels.

    import longattn.distributed as cp
    q_r = cp.shard(q, rank, world)                      # zigzag: chunks r and 2W-1-r
    out_r = cp.context_parallel_attn(q_r, k_r, v_r, causal=True)
    out = cp.unshard(all_ranks_out)                      # for checks

Methods: "all_gather_kv" (K/V gathered per group of kv heads, the next group's gather
overlapping this group's compute) and "ring" (K/V shards passed around the ring with
batch_isend_irecv, partials merged by LSE with longattn.combine). Default rule, cost
model and API: docs/distributed.md. Needs PyTorch.
"""

from ._api import context_parallel_attn
from ._plan import LAYOUTS, METHODS
from ._shard import local_cu_seqlens, shard, unshard
from .cost_model import default_kv_groups, default_method

__all__ = [
    "context_parallel_attn",
    "shard",
    "unshard",
    "local_cu_seqlens",
    "default_method",
    "default_kv_groups",
    "LAYOUTS",
    "METHODS",
]
