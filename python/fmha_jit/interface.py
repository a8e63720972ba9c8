"""The two calls attention users already know, with their layouts and semantics:

* flash_attn_func: FlashAttention's (batch, seqlen, heads, dim), causal aligned bottom-right when
  the lengths differ (FlashAttention >= 2.1), sliding windows by window_size;
* scaled_dot_product_attention: torch's (batch, heads, seqlen, dim), causal aligned top-left.

Both take fp16 / bf16 CUDA tensors, GQA / MQA (query heads a multiple of key heads), every head
dim the C++ API takes, and any strides with the head dim contiguous. Bad input raises before any
kernel runs: TypeError for a wrong type, ValueError (fmha_jit.InvalidInputError from the library)
naming the argument, its value and what is accepted.
"""

from __future__ import annotations

import json
import math
from typing import Optional, Tuple

import torch
from torch import Tensor

from fmha_jit import _C, kernels, ops

_ACCEPTED_DTYPES = (torch.float16, torch.bfloat16)
_checked_configs = set()


def _check_config(q: Tensor, hdim_q: int, hdim_v: int, mask: str) -> None:
    """The library's verdict on the call's config (head dims, mask) for q's device, before any
    op is traced or launched; InvalidInputError names the field, its value and what is accepted.
    Asked once per config, never while torch.compile traces (_check_call): a call into the
    extension cannot be traced, so the library raises the same error when the compiled graph
    first runs."""
    key = (q.device, q.dtype, hdim_q, hdim_v, mask)
    if key in _checked_configs:
        return
    if torch.cuda.is_available() and q.device.index is not None:
        arch = kernels.device_arch(q.device.index)
    else:  # fake CUDA tensors on a machine without a GPU (FMHA_JIT_ARCH, else sm_90)
        arch = _C.detect_gpu_arch()
    config = {"family": "fwd", "dtype": kernels.dtype_name(q.dtype), "hdim_q": hdim_q,
              "hdim_v": hdim_v, "arch": arch, "mask": mask}
    _C.canonical_config(json.dumps(config))
    _checked_configs.add(key)


def _check_tensors(q, k, v, layout: str) -> None:
    names = ("q", "k", "v") if layout == "bshd" else ("query", "key", "value")
    dims = "(batch, seqlen, heads, head_dim)" if layout == "bshd" else (
        "(batch, heads, seqlen, head_dim)"
    )
    for name, t in zip(names, (q, k, v)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.device.type != "cuda":
            raise ValueError(
                f"{name} is on device '{t.device}'; accepted: a CUDA device (fmha_jit runs on "
                "the GPU)"
            )
        if t.dtype not in _ACCEPTED_DTYPES:
            raise ValueError(
                f"{name} has dtype {t.dtype}; accepted: torch.float16, torch.bfloat16"
            )
        if t.dim() != 4:
            raise ValueError(
                f"{name} has shape {tuple(t.shape)}; accepted: 4 dims {dims}"
            )
    qn, kn, vn = names
    for name, t in ((kn, k), (vn, v)):
        if t.device != q.device:
            raise ValueError(f"{name} is on {t.device}, {qn} on {q.device}; accepted: one device")
        if t.dtype != q.dtype:
            raise ValueError(f"{name} has dtype {t.dtype}, {qn} {q.dtype}; accepted: one dtype")
    if k.shape[:3] != v.shape[:3]:
        raise ValueError(
            f"{kn} has shape {tuple(k.shape)} and {vn} {tuple(v.shape)}; accepted: the same "
            "batch, seqlen and heads"
        )
    if k.shape[0] != q.shape[0]:
        raise ValueError(
            f"{kn} has batch {k.shape[0]}, {qn} {q.shape[0]}; accepted: the same batch"
        )
    if k.shape[3] != q.shape[3]:
        raise ValueError(
            f"{kn} has head dim {k.shape[3]}, {qn} {q.shape[3]}; accepted: the same head dim"
        )
    head_axis = 2 if layout == "bshd" else 1
    hq, hk = q.shape[head_axis], k.shape[head_axis]
    if hk == 0 or hq % hk != 0:
        raise ValueError(
            f"{qn} has {hq} heads and {kn} {hk}; accepted: query heads a multiple of key heads "
            "(GQA / MQA)"
        )


_checked_calls = set()


def _check_call(q, k, v, layout: str, mask: str) -> None:
    """_check_tensors and _check_config, remembered per call signature (types, shapes, dtypes,
    devices and mask), so that a repeated signature costs one set lookup."""
    if torch.compiler.is_compiling():
        _check_tensors(q, k, v, layout)
        return
    try:
        key = (layout, mask, type(q), type(k), type(v), q.shape, k.shape, v.shape, q.dtype,
               k.dtype, v.dtype, q.device, k.device, v.device)
    except AttributeError:  # not tensors: _check_tensors says which
        key = None
    if key is not None and key in _checked_calls:
        return
    _check_tensors(q, k, v, layout)
    _check_config(q, q.shape[3], v.shape[3], mask)
    if len(_checked_calls) >= 4096:
        _checked_calls.clear()
    _checked_calls.add(key)


def _check_scale(name: str, scale) -> Optional[float]:
    if scale is None:
        return None
    if type(scale) is float and 0.0 < scale < math.inf:
        return scale
    if isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise TypeError(f"{name} must be a float or None, got {type(scale).__name__}")
    if not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"{name} is {scale}; accepted: a finite positive float, or None")
    return float(scale)


def flash_attn_func(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    softmax_scale: Optional[float] = None,
    causal: bool = False,
    window_size: Tuple[int, int] = (-1, -1),
    deterministic: bool = False,
    return_lse: bool = False,
    *,
    out: Optional[Tensor] = None,
):
    """Attention of q (batch, seqlen_q, heads_q, d), k (batch, seqlen_k, heads_k, d) and
    v (batch, seqlen_k, heads_k, d_v), as FlashAttention's flash_attn_func.

    softmax_scale: default 1 / sqrt(d). causal: query i sees keys j <= i + seqlen_k - seqlen_q
    (bottom-right). window_size (left, right): query i sees keys in
    [i + seqlen_k - seqlen_q - left, i + seqlen_k - seqlen_q + right], -1 unbounded; with causal,
    right is 0. deterministic: the backward's gradients are bit-identical run to run.
    Returns out (batch, seqlen_q, heads_q, d_v), and with return_lse also the log-sum-exp
    (batch, heads_q, seqlen_q) in fp32 (natural log of the scaled scores; -inf for a query that
    sees no key; it carries no gradient). out: a tensor of the output's shape and dtype on q's
    device (head dim contiguous, 16-byte aligned rows) that receives the output, for calls that
    need no gradient: no allocation, as with the C++ API.
    """
    scale = _check_scale("softmax_scale", softmax_scale)
    if window_size != (-1, -1) and (
        not isinstance(window_size, (tuple, list))
        or len(window_size) != 2
        or not all(isinstance(w, int) and not isinstance(w, bool) for w in window_size)
        or min(window_size) < -1
    ):
        raise ValueError(
            f"window_size is {window_size!r}; accepted: (left, right), each -1 (unbounded) or "
            "an int >= 0"
        )
    left, right = window_size[0], window_size[1]
    if causal:
        right = 0
    if left < 0 and right < 0:
        mask, left, right = "none", -1, -1
    elif left < 0 and right == 0:
        mask, left, right = "causal_bottom_right", -1, -1
    else:
        mask = "sliding_window"
    result, lse = ops.attention(q, k, v, "bshd", mask, left, right, scale, bool(deterministic),
                                bool(return_lse), out, _check_call)
    return (result, lse) if return_lse else result


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Optional[Tensor] = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: Optional[float] = None,
    enable_gqa: bool = False,
) -> Tensor:
    """torch.nn.functional.scaled_dot_product_attention for query (batch, heads_q, L, d),
    key (batch, heads_k, S, d) and value (batch, heads_k, S, d_v): returns (batch, heads_q, L,
    d_v). is_causal masks top-left (query i sees keys j <= i), as torch does. heads_q may be a
    multiple of heads_k only with enable_gqa=True, as in torch. attn_mask and dropout_p are
    accepted in their positions for drop-in use, but only None and 0.0. Under
    torch.use_deterministic_algorithms(True) the backward is the deterministic one."""
    if attn_mask is not None:
        raise ValueError(
            "attn_mask is a tensor; accepted: None (fmha_jit supports is_causal, not arbitrary "
            "masks)"
        )
    if dropout_p != 0.0:
        raise ValueError(f"dropout_p is {dropout_p}; accepted: 0.0 (no dropout)")
    mask = "causal_top_left" if is_causal else "none"
    if (
        not enable_gqa
        and isinstance(query, Tensor)
        and isinstance(key, Tensor)
        and query.dim() == 4 == key.dim()
        and query.size(1) != key.size(1)
    ):
        raise ValueError(
            f"query has {query.size(1)} heads and key {key.size(1)}; accepted: equal heads, or "
            "enable_gqa=True for a multiple"
        )
    s = _check_scale("scale", scale)
    deterministic = torch.are_deterministic_algorithms_enabled()
    out, _ = ops.attention(query, key, value, "bhsd", mask, -1, -1, s, deterministic, False, None,
                           _check_call)
    return out
