"""Same names as FlashAttention-3's `flash_attn_interface` module, so switching is one line:

    import longattn.flash_attn_interface as flash_attn_interface
"""

from .interface import flash_attn_func, flash_attn_varlen_func, flash_attn_with_kvcache

__all__ = ["flash_attn_func", "flash_attn_varlen_func", "flash_attn_with_kvcache"]
