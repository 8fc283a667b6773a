"""longattn: long-context attention prefill on Hopper GPUs and x86-64 CPUs.

    import longattn
    out = longattn.flash_attn_func(q, k, v, causal=True)   # NumPy or PyTorch (CPU/CUDA)

FlashAttention-3 compatible: flash_attn_func, flash_attn_varlen_func,
flash_attn_with_kvcache. `forward` exposes every option of the C++ API; `combine` merges
partial results by their LSEs. `longattn.torch_ops` (imported on demand) registers the
forward as a torch.library custom op for torch.compile.
"""

from ._core import combine, forward
from ._longattn import cuda_available
from ._longattn import version as _version
from .interface import flash_attn_func, flash_attn_varlen_func, flash_attn_with_kvcache

__version__ = _version()

__all__ = [
    "flash_attn_func",
    "flash_attn_varlen_func",
    "flash_attn_with_kvcache",
    "forward",
    "combine",
    "cuda_available",
    "__version__",
]
