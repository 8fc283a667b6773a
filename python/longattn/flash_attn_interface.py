"""Drop-in for FlashAttention-3's `flash_attn_interface` module (forward only):

    import longattn.flash_attn_interface as flash_attn_interface
    from longattn.flash_attn_interface import flash_attn_func, flash_attn_varlen_func

Same function names, argument names, order, defaults and return values as FA3; see
longattn.interface and python/README.md for what is supported, accepted and ignored (speed-only
options), or refused with NotImplementedError (backward, `qv`).
"""

from .interface import (
    flash_attn_combine,
    flash_attn_func,
    flash_attn_qkvpacked_func,
    flash_attn_varlen_func,
    flash_attn_with_kvcache,
    get_scheduler_metadata,
)

__all__ = [
    "flash_attn_func",
    "flash_attn_varlen_func",
    "flash_attn_with_kvcache",
    "flash_attn_qkvpacked_func",
    "flash_attn_combine",
    "get_scheduler_metadata",
]
