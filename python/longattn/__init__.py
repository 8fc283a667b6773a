"""longattn: long-context attention prefill on Hopper GPUs and x86-64 CPUs.

    import longattn
    out = longattn.flash_attn_func(q, k, v, causal=True)   # NumPy or PyTorch (CPU/CUDA)

FlashAttention-3 compatible (forward): flash_attn_func, flash_attn_varlen_func,
flash_attn_with_kvcache, flash_attn_qkvpacked_func, flash_attn_combine,
get_scheduler_metadata -- also as the drop-in module `longattn.flash_attn_interface`.
`forward` exposes every option of the C++ API; `combine` merges partial results by their
LSEs. Torch tensors go through the custom ops of `longattn.torch_ops` (torch.compile).
"""

import sys as _sys

from ._core import combine, forward
from ._longattn import cuda_available
from ._longattn import version as _version
from .interface import (
    flash_attn_combine,
    flash_attn_func,
    flash_attn_qkvpacked_func,
    flash_attn_varlen_func,
    flash_attn_with_kvcache,
    get_scheduler_metadata,
)

__version__ = _version()

if "torch" in _sys.modules:  # register the custom ops now, outside any traced region
    from . import torch_ops as _torch_ops  # noqa: F401

__all__ = [
    "flash_attn_func",
    "flash_attn_varlen_func",
    "flash_attn_with_kvcache",
    "flash_attn_qkvpacked_func",
    "flash_attn_combine",
    "get_scheduler_metadata",
    "forward",
    "combine",
    "cuda_available",
    "__version__",
]
