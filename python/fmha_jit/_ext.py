"""The implementations of calls with a packed batch (cu_seqlens), sinks or softcap: their own
memoised plans and launch arguments, so that the dense path (ops.py) keeps its own unchanged.

A packed batch's tensors are (total, heads, dim) in layout "bshd" and its LSE (heads, total_q); a
batch without query or key tokens launches nothing (torch gives its empty tensors no address) and
gets its results from torch: O = 0, the LSE the sink or -inf, gradients 0.
"""

from __future__ import annotations

import atexit
from typing import Optional, Tuple

import torch
from torch import Tensor

from fmha_jit import _launch, kernels


class _ExtPlan:
    """_FwdPlan of a call with cu_seqlens, sinks or softcap. `empty` marks a packed batch without
    query or key tokens: torch gives its empty tensors no address, so it launches nothing."""

    __slots__ = ("launch", "shape", "need", "out_shape", "out_stride", "lse_shape", "index",
                 "empty")


_ext_plans = {}
atexit.register(_ext_plans.clear)


def _ext_dims(q, k, v, layout, cu_seqlens_q, max_seqlen_q, max_seqlen_k, softcap, window_left,
              window_right, softmax_scale):
    """The Shape dims (kernels.KernelEntry.shape) of a call: a packed batch's q, k, v are
    (total, heads, dim), its batch the number of sequences and its lengths the longest ones."""
    bshd = layout == "bshd"
    if cu_seqlens_q is None:
        b, hq, hk, sq, sk, dq, dv = _launch._dims(q, k, v, bshd)
        return (bshd, b, hq, hk, sq, sk, dq, dv, softmax_scale, window_left, window_right, False,
                0, 0, float(softcap))
    if not bshd:
        raise ValueError(
            f"layout is {layout!r} with cu_seqlens; accepted: 'bshd' (a packed batch's tensors "
            "are (total, heads, dim))"
        )
    total_q, hq, dq = q.shape
    total_k, hk = k.shape[0], k.shape[1]
    return (bshd, cu_seqlens_q.shape[0] - 1, hq, hk, max_seqlen_q, max_seqlen_k, dq, v.shape[2],
            softmax_scale, window_left, window_right, True, total_q, total_k, float(softcap))


def _new_ext_plan(q, k, v, layout, mask, window_left, window_right, softmax_scale, with_lse,
                  cu_seqlens_q, max_seqlen_q, max_seqlen_k, sinks, softcap):
    dims = _ext_dims(q, k, v, layout, cu_seqlens_q, max_seqlen_q, max_seqlen_k, softcap,
                     window_left, window_right, softmax_scale)
    varlen = dims[11]
    index = q.device.index
    plan = _ExtPlan()
    if varlen:
        total_q, hq, dv = dims[12], dims[2], dims[7]
        plan.out_shape = (total_q, hq, dv)
        plan.out_stride = (hq * dv, dv, 1)
        plan.lse_shape = (hq, total_q) if with_lse else None
        plan.empty = total_q == 0 or dims[13] == 0
    else:
        d0, d1, d2, _ = q.shape
        dv = dims[7]
        swap = q.stride(1) < q.stride(2)
        plan.out_shape = (d0, d1, d2, dv)
        plan.out_stride = (d1 * d2 * dv, dv, d1 * dv, 1) if swap else (d1 * d2 * dv, d2 * dv, dv, 1)
        plan.lse_shape = (dims[1], dims[2], dims[4]) if with_lse else None
        plan.empty = False
    plan.index = index
    if plan.empty:
        plan.launch, plan.shape, plan.need = None, None, 0
        return plan
    entry = kernels.kernel_for(index, "fwd", q.dtype, dims[6], dv, mask, lse=with_lse,
                               varlen=varlen, sinks=sinks is not None, softcap=softcap > 0)
    plan.launch = entry.kernel.fwd
    plan.shape, plan.need = entry.shape(dims)
    return plan


def _ext_plan(q, k, v, layout, mask, window_left, window_right, softmax_scale, with_lse,
              cu_seqlens_q, max_seqlen_q, max_seqlen_k, sinks, softcap):
    key = (q.shape, k.shape, v.shape, q.stride(), q.dtype, k.dtype, v.dtype, q.get_device(),
           layout, mask, window_left, window_right, softmax_scale, with_lse,
           None if cu_seqlens_q is None else cu_seqlens_q.shape[0], max_seqlen_q, max_seqlen_k,
           sinks is not None, softcap)
    plan = _ext_plans.get(key)
    if plan is None:
        plan = _new_ext_plan(q, k, v, layout, mask, window_left, window_right, softmax_scale,
                             with_lse, cu_seqlens_q, max_seqlen_q, max_seqlen_k, sinks, softcap)
        if len(_ext_plans) >= 4096:
            _ext_plans.clear()
        _ext_plans[key] = plan
    return plan


def _in_place_any(t: Tensor, name: str):
    """_in_place for 3-d (packed) as well as 4-d tensors."""
    stride, ptr = t.stride(), t.data_ptr()
    if _launch._readable(stride, ptr):
        return ptr, stride
    t = _launch._copied(t, name)
    return t.data_ptr(), t.stride()


def _address(t: Optional[Tensor]) -> int:
    return 0 if t is None else t.data_ptr()


def _run_ext_fwd(plan: _ExtPlan, q, k, v, out, cu_seqlens_q, cu_seqlens_k, sinks):
    if out is None:
        out = q.new_empty_strided(plan.out_shape, plan.out_stride)
    else:
        _launch.check_out(out, q, plan.out_shape)
    lse = q.new_empty(plan.lse_shape, dtype=torch.float32) if plan.lse_shape else None
    if plan.empty:
        # No key token: every row sees none (out 0, LSE the sink, else -inf); no query token:
        # nothing to write.
        out.zero_()
        if lse is not None:
            if sinks is not None:
                lse.copy_(sinks[:, None].expand_as(lse))
            else:
                lse.fill_(float("-inf"))
        return out, lse
    q_ptr, q_stride = _in_place_any(q, "q")
    k_ptr, k_stride = _in_place_any(k, "k")
    v_ptr, v_stride = _in_place_any(v, "v")
    need = plan.need
    workspace = q.new_zeros(need, dtype=torch.uint8) if need else None
    if sinks is not None:
        sinks = sinks.contiguous()
    if cu_seqlens_q is not None:
        cu_seqlens_q, cu_seqlens_k = cu_seqlens_q.contiguous(), cu_seqlens_k.contiguous()
    plan.launch(
        _launch._stream(plan.index),
        plan.shape,
        q_ptr,
        q_stride,
        k_ptr,
        k_stride,
        v_ptr,
        v_stride,
        out.data_ptr(),
        out.stride(),
        lse.data_ptr() if lse is not None else 0,
        workspace.data_ptr() if need else 0,
        need,
        _address(cu_seqlens_q),
        _address(cu_seqlens_k),
        _address(sinks),
    )
    return out, lse


def forward_ext(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    layout: str,
    mask: str,
    window_left: int,
    window_right: int,
    softmax_scale: Optional[float],
    with_lse: bool,
    out: Optional[Tensor],
    cu_seqlens_q: Optional[Tensor],
    cu_seqlens_k: Optional[Tensor],
    max_seqlen_q: int,
    max_seqlen_k: int,
    sinks: Optional[Tensor],
    softcap: float,
) -> Tuple[Tensor, Optional[Tensor]]:
    """forward() of a call with cu_seqlens (a packed batch: q, k, v, out (total, heads, dim), LSE
    (heads, total_q)), sinks or softcap (> 0). The arguments are checked by the caller."""
    plan = _ext_plan(q, k, v, layout, mask, window_left, window_right, softmax_scale, with_lse,
                     cu_seqlens_q, max_seqlen_q, max_seqlen_k, sinks, softcap)
    if plan.index != _launch._current_device():
        with torch.cuda.device(plan.index):
            return _run_ext_fwd(plan, q, k, v, out, cu_seqlens_q, cu_seqlens_k, sinks)
    return _run_ext_fwd(plan, q, k, v, out, cu_seqlens_q, cu_seqlens_k, sinks)


def _grad_buffer(t: Tensor) -> Tensor:
    """The gradient of an input: a 4-d one keeps its memory order (_launch._empty_like_layout), a
    packed one is contiguous."""
    return _launch._empty_like_layout(t, t.shape) if t.dim() == 4 else torch.empty(
        t.shape, dtype=t.dtype, device=t.device)


def backward_ext(
    dout: Tensor,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    out: Tensor,
    lse: Tensor,
    layout: str,
    mask: str,
    window_left: int,
    window_right: int,
    softmax_scale: Optional[float],
    deterministic: bool,
    cu_seqlens_q: Optional[Tensor],
    cu_seqlens_k: Optional[Tensor],
    max_seqlen_q: int,
    max_seqlen_k: int,
    sinks: Optional[Tensor],
    softcap: float,
) -> Tuple[Tensor, Tensor, Tensor, Optional[Tensor]]:
    """bwd_impl of a call with cu_seqlens, sinks or softcap: (dq, dk, dv, d_sinks), d_sinks the
    sinks' gradient (Hq,) fp32, or None without sinks."""
    index = q.device.index
    if index != _launch._current_device():
        with torch.cuda.device(index):
            return backward_ext(
                dout, q, k, v, out, lse, layout, mask, window_left, window_right, softmax_scale,
                deterministic, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, sinks,
                softcap,
            )
    dims = _ext_dims(q, k, v, layout, cu_seqlens_q, max_seqlen_q, max_seqlen_k, softcap,
                     window_left, window_right, softmax_scale)
    varlen = dims[11]
    grad_q, grad_k, grad_v = _grad_buffer(q), _grad_buffer(k), _grad_buffer(v)
    d_sinks = None
    if sinks is not None:
        d_sinks = torch.empty(sinks.shape, dtype=torch.float32, device=q.device)
    if varlen and (dims[12] == 0 or dims[13] == 0):
        # No query or no key token (the forward launched nothing): out is 0 and D = rowsum(dO O)
        # is 0, so every gradient is 0, the sinks' -sum(P_sink D) included.
        for g in (grad_q, grad_k, grad_v, d_sinks):
            if g is not None:
                g.zero_()
        return grad_q, grad_k, grad_v, d_sinks
    q, k, v = (_launch._aligned_any(t, name) for t, name in ((q, "q"), (k, "k"), (v, "v")))
    out, dout = _launch._aligned_any(out, "out"), _launch._aligned_any(dout, "dout")
    lse = lse.contiguous()
    if sinks is not None:
        sinks = sinks.contiguous()
    if varlen:
        cu_seqlens_q, cu_seqlens_k = cu_seqlens_q.contiguous(), cu_seqlens_k.contiguous()
    entry = kernels.kernel_for(index, "bwd", q.dtype, dims[6], dims[7], mask,
                               deterministic=deterministic, varlen=varlen,
                               sinks=sinks is not None, softcap=softcap > 0)
    shape, need = entry.shape(dims)
    workspace = torch.empty(need, dtype=torch.uint8, device=q.device)
    _launch.launch_bwd(entry.kernel, index, shape, q, k, v, out, lse, dout, grad_q, grad_k, grad_v,
                       workspace, need, _address(cu_seqlens_q), _address(cu_seqlens_k),
                       _address(sinks), _address(d_sinks))
    return grad_q, grad_k, grad_v, d_sinks


def _uses_ext(cu_seqlens_q, cu_seqlens_k, sinks, softcap) -> bool:
    return cu_seqlens_q is not None or cu_seqlens_k is not None or sinks is not None or softcap != 0
