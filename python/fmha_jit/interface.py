"""The calls attention users already know, with their layouts and semantics:

* flash_attn_func: FlashAttention's (batch, seqlen, heads, dim), causal aligned bottom-right when
  the lengths differ (FlashAttention >= 2.1), sliding windows by window_size;
* flash_attn_varlen_func: FlashAttention's packed batches, (total, heads, dim) with cumulative
  sequence lengths, each sequence its own attention problem;
* scaled_dot_product_attention: torch's (batch, heads, seqlen, dim), causal aligned top-left.

All take fp16 / bf16 CUDA tensors, GQA / MQA (query heads a multiple of key heads), every head
dim the C++ API takes, and any strides with the head dim contiguous; and the keywords sinks
(per-head logits in the softmax denominator) and softcap (tanh capping of the scores). Bad input
raises before any kernel runs: TypeError for a wrong type, ValueError (fmha_jit.InvalidInputError
from the library) naming the argument, its value and what is accepted.
"""

from __future__ import annotations

import json
import math
from typing import Optional, Tuple

import torch
from torch import Tensor
from torch.utils._python_dispatch import _get_current_dispatch_mode as _current_dispatch_mode

from fmha_jit import _C, kernels, ops

_ACCEPTED_DTYPES = (torch.float16, torch.bfloat16)
_checked_configs = set()


def _check_config(q: Tensor, hdim_q: int, hdim_v: int, mask: str, varlen: bool = False,
                  sinks: bool = False, softcap: bool = False) -> None:
    """The library's verdict on the call's config (head dims, mask, the varlen / sinks / softcap
    flags) for q's device, before any op is traced or launched; InvalidInputError names the
    field, its value and what is accepted. Asked once per config, never while torch.compile
    traces (_check_call): a call into the extension cannot be traced, so the library raises the
    same error when the compiled graph first runs."""
    key = (q.device, q.dtype, hdim_q, hdim_v, mask, varlen, sinks, softcap)
    if key in _checked_configs:
        return
    if torch.cuda.is_available() and q.device.index is not None:
        arch = kernels.device_arch(q.device.index)
    else:  # fake CUDA tensors on a machine without a GPU (FMHA_JIT_ARCH, else sm_90)
        arch = _C.detect_gpu_arch()
    config = {"family": "fwd", "dtype": kernels.dtype_name(q.dtype), "hdim_q": hdim_q,
              "hdim_v": hdim_v, "arch": arch, "mask": mask}
    for name, on in (("varlen", varlen), ("sinks", sinks), ("softcap", softcap)):
        if on:
            config[name] = True
    _C.canonical_config(json.dumps(config))
    _checked_configs.add(key)


def _check_tensors(q, k, v, layout: str, packed: bool = False) -> None:
    """q, k, v of a dense call (4 dims in `layout`), or of a packed batch (3 dims)."""
    names = ("q", "k", "v") if layout == "bshd" else ("query", "key", "value")
    if packed:
        dims = ("(total_q, heads, head_dim)", "(total_k, heads, head_dim)",
                "(total_k, heads, head_dim)")
    elif layout == "bshd":
        dims = ("(batch, seqlen, heads, head_dim)",) * 3
    else:
        dims = ("(batch, heads, seqlen, head_dim)",) * 3
    ndim = 3 if packed else 4
    for name, t, expected in zip(names, (q, k, v), dims):
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
        if t.dim() != ndim:
            raise ValueError(
                f"{name} has shape {tuple(t.shape)}; accepted: {ndim} dims {expected}"
            )
    qn, kn, vn = names
    for name, t in ((kn, k), (vn, v)):
        if t.device != q.device:
            raise ValueError(f"{name} is on {t.device}, {qn} on {q.device}; accepted: one device")
        if t.dtype != q.dtype:
            raise ValueError(f"{name} has dtype {t.dtype}, {qn} {q.dtype}; accepted: one dtype")
    if packed:
        if k.shape[:2] != v.shape[:2]:
            raise ValueError(
                f"{kn} has shape {tuple(k.shape)} and {vn} {tuple(v.shape)}; accepted: the same "
                "total_k and heads"
            )
    else:
        if k.shape[:3] != v.shape[:3]:
            raise ValueError(
                f"{kn} has shape {tuple(k.shape)} and {vn} {tuple(v.shape)}; accepted: the same "
                "batch, seqlen and heads"
            )
        if k.shape[0] != q.shape[0]:
            raise ValueError(
                f"{kn} has batch {k.shape[0]}, {qn} {q.shape[0]}; accepted: the same batch"
            )
    if k.shape[-1] != q.shape[-1]:
        raise ValueError(
            f"{kn} has head dim {k.shape[-1]}, {qn} {q.shape[-1]}; accepted: the same head dim"
        )
    head_axis = 1 if packed or layout != "bshd" else 2
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


def _check_softcap(softcap) -> float:
    if isinstance(softcap, bool) or not isinstance(softcap, (int, float)):
        raise TypeError(f"softcap must be a float, got {type(softcap).__name__}")
    if not math.isfinite(softcap) or softcap < 0:
        raise ValueError(
            f"softcap is {softcap}; accepted: a finite float > 0 (the scores' cap), or 0.0 (no "
            "softcap)"
        )
    return float(softcap)


def _check_max_seqlen(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, torch.SymInt)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 1:
        raise ValueError(
            f"{name} is {value}; accepted: an int >= 1 (the longest sequence's length)"
        )
    return value


def _check_sinks(sinks, q: Tensor, heads_q: int, qname: str) -> None:
    if not isinstance(sinks, Tensor):
        raise TypeError(f"sinks must be a torch.Tensor or None, got {type(sinks).__name__}")
    if sinks.dtype != torch.float32:
        raise ValueError(f"sinks has dtype {sinks.dtype}; accepted: torch.float32")
    if sinks.dim() != 1 or sinks.shape[0] != heads_q:
        raise ValueError(
            f"sinks has shape {tuple(sinks.shape)}; accepted: ({heads_q},) (one logit per query "
            "head)"
        )
    if sinks.device != q.device:
        raise ValueError(
            f"sinks is on {sinks.device}, {qname} on {q.device}; accepted: {qname}'s device"
        )


def _check_cu_seqlens(cu_seqlens_q, cu_seqlens_k, q: Tensor) -> None:
    for name, cu in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        if not isinstance(cu, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(cu).__name__}")
        if cu.dtype != torch.int32:
            raise ValueError(f"{name} has dtype {cu.dtype}; accepted: torch.int32")
        if cu.dim() != 1 or cu.shape[0] < 2:
            raise ValueError(
                f"{name} has shape {tuple(cu.shape)}; accepted: 1 dim (batch + 1,), batch >= 1 "
                "(0, then each sequence's end)"
            )
        if cu.device != q.device:
            raise ValueError(f"{name} is on {cu.device}, q on {q.device}; accepted: q's device")
    if cu_seqlens_k.shape[0] != cu_seqlens_q.shape[0]:
        raise ValueError(
            f"cu_seqlens_k has {cu_seqlens_k.shape[0]} entries and cu_seqlens_q "
            f"{cu_seqlens_q.shape[0]}; accepted: the same number (batch + 1 each)"
        )


def _tensor_key(t):
    return None if t is None else (type(t), t.shape, t.dtype, t.device)


_checked_ext_calls = set()


def _check_ext_call(q, k, v, layout: str, mask: str, cu_seqlens_q, cu_seqlens_k, sinks,
                    softcap: bool) -> None:
    """_check_call of a call with cu_seqlens (a packed batch: q, k, v 3-d), sinks or softcap,
    remembered per signature likewise."""
    packed = cu_seqlens_q is not None
    compiling = torch.compiler.is_compiling()
    key = None
    if not compiling:
        try:
            key = (layout, mask, softcap, _tensor_key(q), _tensor_key(k), _tensor_key(v),
                   _tensor_key(cu_seqlens_q), _tensor_key(cu_seqlens_k), _tensor_key(sinks))
        except AttributeError:  # not tensors: the checks say which
            key = None
        if key is not None and key in _checked_ext_calls:
            return
    _check_tensors(q, k, v, layout, packed)
    if packed:
        _check_cu_seqlens(cu_seqlens_q, cu_seqlens_k, q)
    head_axis = 2 if layout == "bshd" and not packed else 1
    if sinks is not None:
        _check_sinks(sinks, q, q.shape[head_axis], "q" if layout == "bshd" else "query")
    if compiling:
        return
    _check_config(q, q.shape[-1], v.shape[-1], mask, packed, sinks is not None, softcap)
    if key is not None:
        if len(_checked_ext_calls) >= 4096:
            _checked_ext_calls.clear()
        _checked_ext_calls.add(key)


@torch.compiler.disable
def _check_seqlen_values(cu_seqlens_q: Tensor, cu_seqlens_k: Tensor, total_q: int, total_k: int,
                         max_seqlen_q: int, max_seqlen_k: int) -> None:
    """check_seqlens=True: the entries of both arrays, copied to the host (one copy, which waits
    for the GPU), checked by the library (FmhaProblem's check_seqlens). Under torch.compile the
    check runs outside the graph (a graph break), on the real tensors; fake tensors, which hold
    no values, are not checked."""
    if (type(cu_seqlens_q) is not Tensor or type(cu_seqlens_k) is not Tensor
            or _current_dispatch_mode() is not None):
        return
    n = cu_seqlens_q.shape[0]
    host = torch.cat((cu_seqlens_q, cu_seqlens_k)).cpu()
    base = host.data_ptr()
    _C.check_seqlens("cu_seqlens_q", base, n - 1, total_q, max_seqlen_q)
    _C.check_seqlens("cu_seqlens_k", base + 4 * n, n - 1, total_k, max_seqlen_k)


def _window_mask(causal, window_size) -> Tuple[str, int, int]:
    """(mask, left, right) of FlashAttention's causal and window_size."""
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
        return "none", -1, -1
    if left < 0 and right == 0:
        return "causal_bottom_right", -1, -1
    return "sliding_window", left, right


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
    sinks: Optional[Tensor] = None,
    softcap: float = 0.0,
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
    sinks: a float32 tensor (heads_q,) on q's device, one logit per query head that joins each
    row's softmax denominator with no value row (a row that sees no key gets out 0 and LSE the
    sink); it may require grad. softcap: > 0 replaces each scaled score s by
    softcap * tanh(s / softcap) before the mask and the softmax; 0.0 = none.
    """
    scale = _check_scale("softmax_scale", softmax_scale)
    mask, left, right = _window_mask(causal, window_size)
    if sinks is None and softcap == 0.0:
        result, lse = ops.attention(q, k, v, "bshd", mask, left, right, scale,
                                    bool(deterministic), bool(return_lse), out, _check_call)
    else:
        cap = _check_softcap(softcap)
        _check_ext_call(q, k, v, "bshd", mask, None, None, sinks, cap > 0)
        result, lse = ops.attention_ext(q, k, v, "bshd", mask, left, right, scale,
                                        bool(deterministic), bool(return_lse), out, None, None,
                                        0, 0, sinks, cap)
    return (result, lse) if return_lse else result


def flash_attn_varlen_func(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    cu_seqlens_q: Tensor,
    cu_seqlens_k: Tensor,
    max_seqlen_q: int,
    max_seqlen_k: int,
    dropout_p: float = 0.0,
    softmax_scale: Optional[float] = None,
    causal: bool = False,
    window_size: Tuple[int, int] = (-1, -1),
    softcap: float = 0.0,
    alibi_slopes: Optional[Tensor] = None,
    deterministic: bool = False,
    return_attn_probs: bool = False,
    *,
    sinks: Optional[Tensor] = None,
    out: Optional[Tensor] = None,
    check_seqlens: bool = False,
):
    """Attention of a packed batch, as FlashAttention 2's flash_attn_varlen_func: q (total_q,
    heads_q, d), k (total_k, heads_k, d) and v (total_k, heads_k, d_v) hold the batch's sequences
    end to end, sequence b's queries being rows cu_seqlens_q[b] .. cu_seqlens_q[b + 1] of q and
    its keys rows cu_seqlens_k[b] .. cu_seqlens_k[b + 1] of k and v (cu_seqlens: int32 on q's
    device, batch + 1 entries each, the first 0 and the last the token count; a sequence may be
    empty). Each sequence is its own attention problem: causal and window_size align to its own
    lengths (bottom-right, as flash_attn_func). max_seqlen_q / max_seqlen_k: the longest lengths.

    softmax_scale, causal, window_size, deterministic, out, sinks: as flash_attn_func;
    softcap: > 0 caps the scaled scores (softcap * tanh(s / softcap)), 0.0 = none. dropout_p
    must be 0.0 and alibi_slopes None (kept in their positions for drop-in use). Returns out
    (total_q, heads_q, d_v), and with return_attn_probs (out, softmax_lse, None) as FlashAttention
    does without dropout: softmax_lse (heads_q, total_q) fp32, carrying no gradient.

    The entries of cu_seqlens live on the GPU and are not read by default: a sequence whose
    entries are out of order, past the tensors or longer than max_seqlen is left unwritten, and
    nothing is read or written outside the tensors. check_seqlens=True copies them to the host
    first (which waits for the GPU) and raises ValueError naming the first bad entry.
    """
    if dropout_p != 0.0:
        raise ValueError(f"dropout_p is {dropout_p}; accepted: 0.0 (no dropout)")
    if alibi_slopes is not None:
        raise ValueError(
            f"alibi_slopes is a {type(alibi_slopes).__name__}; accepted: None (fmha_jit has no "
            "ALiBi)"
        )
    scale = _check_scale("softmax_scale", softmax_scale)
    mask, left, right = _window_mask(causal, window_size)
    cap = _check_softcap(softcap)
    max_q = _check_max_seqlen("max_seqlen_q", max_seqlen_q)
    max_k = _check_max_seqlen("max_seqlen_k", max_seqlen_k)
    _check_ext_call(q, k, v, "bshd", mask, cu_seqlens_q, cu_seqlens_k, sinks, cap > 0)
    if check_seqlens:
        _check_seqlen_values(cu_seqlens_q, cu_seqlens_k, q.shape[0], k.shape[0], max_q, max_k)
    result, lse = ops.attention_ext(q, k, v, "bshd", mask, left, right, scale,
                                    bool(deterministic), bool(return_attn_probs), out,
                                    cu_seqlens_q, cu_seqlens_k, max_q, max_k, sinks, cap)
    return (result, lse, None) if return_attn_probs else result


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Optional[Tensor] = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: Optional[float] = None,
    enable_gqa: bool = False,
    *,
    sinks: Optional[Tensor] = None,
    softcap: float = 0.0,
) -> Tensor:
    """torch.nn.functional.scaled_dot_product_attention for query (batch, heads_q, L, d),
    key (batch, heads_k, S, d) and value (batch, heads_k, S, d_v): returns (batch, heads_q, L,
    d_v). is_causal masks top-left (query i sees keys j <= i), as torch does. heads_q may be a
    multiple of heads_k only with enable_gqa=True, as in torch. attn_mask and dropout_p are
    accepted in their positions for drop-in use, but only None and 0.0. Under
    torch.use_deterministic_algorithms(True) the backward is the deterministic one. sinks
    (heads_q,) fp32 and softcap: as flash_attn_func."""
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
    if sinks is None and softcap == 0.0:
        out, _ = ops.attention(query, key, value, "bhsd", mask, -1, -1, s, deterministic, False,
                               None, _check_call)
        return out
    cap = _check_softcap(softcap)
    _check_ext_call(query, key, value, "bhsd", mask, None, None, sinks, cap > 0)
    out, _ = ops.attention_ext(query, key, value, "bhsd", mask, -1, -1, s, deterministic, False,
                               None, None, None, 0, 0, sinks, cap)
    return out
