"""fmha_jit: fused multi-head attention for PyTorch, compiled on first use.

    import fmha_jit
    out = fmha_jit.flash_attn_func(q, k, v, causal=True)              # (batch, seqlen, heads, dim)
    out = fmha_jit.scaled_dot_product_attention(q, k, v, is_causal=True)  # (batch, heads, seqlen, dim)
    out = fmha_jit.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max_q, max_k)  # (total, heads, dim)

Kernels are compiled by NVRTC the first time a config is used (logged at info level on the
"fmha_jit" logger) and kept in the same disk cache as the `fmha-jit` CLI; `prebuild` warms it ahead
of time, on a machine with or without a GPU.
"""

from fmha_jit import _log  # noqa: F401  (routes the library's log lines to logging)
from fmha_jit._C import CacheError, CompileError, DeviceError, Error, InvalidInputError
from fmha_jit.cache import cache_info, default_cache_dir, prebuild
from fmha_jit.interface import (
    flash_attn_func,
    flash_attn_varlen_func,
    scaled_dot_product_attention,
)
from fmha_jit import ops  # noqa: F401  (registers torch.ops.fmha_jit.fwd / bwd)

__version__ = "0.1.0"

__all__ = [
    "CacheError",
    "CompileError",
    "DeviceError",
    "Error",
    "InvalidInputError",
    "cache_info",
    "default_cache_dir",
    "flash_attn_func",
    "flash_attn_varlen_func",
    "prebuild",
    "scaled_dot_product_attention",
]
