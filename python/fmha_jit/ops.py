"""The attention ops: torch.ops.fmha_jit.fwd and torch.ops.fmha_jit.bwd.

Both are torch.library custom ops with fake (meta) implementations and autograd, so torch.compile
traces them without a graph break and torch.library.opcheck holds. Outside torch.compile the
public functions call the same implementations through a torch.autograd.Function, which skips the
dispatcher's round trip into Python (tens of microseconds per call; docs/PYTHON.md).

Tensors are (batch, seqlen, heads, dim) for layout "bshd" and (batch, heads, seqlen, dim) for
"bhsd", any strides with the head dim contiguous. Outputs, LSE and workspaces come from torch's
caching allocator and the kernels run on the current stream: nothing allocates outside torch or
synchronises once a kernel is loaded, so the calls can be captured in a CUDA graph.
"""

from __future__ import annotations

import atexit
import warnings
from typing import Optional, Tuple

import torch
from torch import Tensor
from torch.utils._python_dispatch import _get_current_dispatch_mode as _current_dispatch_mode

from fmha_jit import kernels

_get_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _stream(index: int) -> int:
    if _get_raw_stream is not None:
        return _get_raw_stream(index)
    return torch.cuda.current_stream(index).cuda_stream


def _empty_like_layout(ref: Tensor, shape, dtype=None) -> Tensor:
    """A new tensor of `shape` whose memory order of dims 1 and 2 follows `ref`'s: an SDPA-layout
    view of (batch, seqlen, heads, dim) memory gets an output of the same memory order, so the
    model's transpose back is free, as with torch's own SDPA kernels."""
    dtype = dtype or ref.dtype
    if ref.stride(1) < ref.stride(2):
        b, d1, d2, d3 = shape
        return torch.empty((b, d2, d1, d3), dtype=dtype, device=ref.device).transpose(1, 2)
    return torch.empty(shape, dtype=dtype, device=ref.device)


def _aligned(t: Tensor, name: str) -> Tensor:
    """`t`, or a copy when the kernels cannot read it in place (head dim not contiguous, base or
    row strides not 16-byte aligned). A copy costs a pass over the tensor, so it is announced."""
    s0, s1, s2, s3 = t.stride()
    if s3 == 1 and not ((s0 | s1 | s2) & 7) and not (t.data_ptr() & 15):
        return t
    warnings.warn(
        f"fmha_jit: {name} (strides {tuple(t.stride())}, storage offset {t.storage_offset()}) "
        "is copied to a contiguous tensor: the kernels need the head dim contiguous and 16-byte "
        "aligned rows",
        stacklevel=4,
    )
    return t.contiguous() if not t.is_contiguous() else t.clone()


def _dims(q: Tensor, k: Tensor, v: Tensor, bshd: bool):
    if bshd:
        b, sq, hq, dq = q.shape
        sk, hk = k.shape[1], k.shape[2]
    else:
        b, hq, sq, dq = q.shape
        hk, sk = k.shape[1], k.shape[2]
    return b, hq, hk, sq, sk, dq, v.shape[3]


def _out_shape(q: Tensor, dv: int):
    return (q.shape[0], q.shape[1], q.shape[2], dv)


# --- implementations (real tensors) -------------------------------------------------------------

_current_device = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device


class _FwdPlan:
    """What a forward of one call signature launches, worked out on the signature's first call:
    the kernel, its Shape and workspace size, and the output's shape, strides and device."""

    __slots__ = ("launch", "shape", "need", "out_shape", "out_stride", "lse_shape", "index")


_fwd_plans = {}
# Plans hold the extension's objects: released before the interpreter finalises (kernels.py).
atexit.register(_fwd_plans.clear)


def _new_fwd_plan(q, k, v, layout, mask, window_left, window_right, softmax_scale, with_lse):
    bshd = layout == "bshd"
    b, hq, hk, sq, sk, dq, dv = _dims(q, k, v, bshd)
    index = q.device.index
    entry = kernels.kernel_for(index, "fwd", q.dtype, dq, dv, mask, lse=with_lse)
    plan = _FwdPlan()
    plan.launch = entry.kernel.fwd
    plan.shape, plan.need = entry.shape(
        (bshd, b, hq, hk, sq, sk, dq, dv, softmax_scale, window_left, window_right)
    )
    # The output keeps q's memory order of dims 1 and 2 (_empty_like_layout), allocated at once
    # with its strides: a transposed view would cost a second tensor per call.
    d0, d1, d2, _ = q.shape
    swap = q.stride(1) < q.stride(2)
    plan.out_shape = (d0, d1, d2, dv)
    plan.out_stride = (d1 * d2 * dv, dv, d1 * dv, 1) if swap else (d1 * d2 * dv, d2 * dv, dv, 1)
    plan.lse_shape = (b, hq, sq) if with_lse else None
    plan.index = index
    return plan


def _fwd_plan(q, k, v, layout, mask, window_left, window_right, softmax_scale, with_lse,
              check=None):
    """The memoised plan of the call's signature. A new signature is first passed to `check`
    (the public call's validation, which names a bad argument), so a signature that has a plan
    has been checked and a repeated call costs one key and one lookup."""
    # q's strides stand for its memory order, which the output follows; the key is read without
    # assuming four dims, which `check` verifies.
    key = (q.shape, k.shape, v.shape, q.stride(), q.dtype, k.dtype, v.dtype, q.get_device(),
           k.get_device(), v.get_device(), layout, mask, window_left, window_right, softmax_scale,
           with_lse)
    plan = _fwd_plans.get(key)
    if plan is None:
        if check is not None:
            check(q, k, v, layout, mask)
        plan = _new_fwd_plan(q, k, v, layout, mask, window_left, window_right, softmax_scale,
                             with_lse)
        if len(_fwd_plans) >= 4096:  # a server that sees every length: bound the memo
            _fwd_plans.clear()
        _fwd_plans[key] = plan
    return plan


def _in_place(t: Tensor, name: str):
    """(data_ptr, strides) of `t`, or of the copy _aligned makes when the kernels cannot read it
    in place: each is read from torch once per call."""
    stride, ptr = t.stride(), t.data_ptr()
    if stride[3] == 1 and not ((stride[0] | stride[1] | stride[2]) & 7) and not (ptr & 15):
        return ptr, stride
    t = _aligned(t, name)
    return t.data_ptr(), t.stride()


def _check_out(out: Tensor, q: Tensor, plan: _FwdPlan) -> None:
    """A caller's output tensor, which the kernel writes in place: no copy is made for it."""
    shape = plan.out_shape
    if type(out) is not Tensor:
        raise TypeError(f"out must be a torch.Tensor or None, got {type(out).__name__}")
    if out.shape != shape or out.dtype != q.dtype or out.device != q.device:
        raise ValueError(
            f"out is {tuple(out.shape)} {out.dtype} on {out.device}; accepted: {shape} "
            f"{q.dtype} on {q.device}"
        )
    s0, s1, s2, s3 = out.stride()
    if s3 != 1 or (s0 | s1 | s2) & 7 or out.data_ptr() & 15 or 0 in (s0, s1, s2):
        raise ValueError(
            f"out has strides {tuple(out.stride())} at offset {out.storage_offset()}; accepted: "
            "the head dim contiguous, 16-byte aligned rows, no broadcast dims"
        )


def _run_fwd(plan: _FwdPlan, q: Tensor, k: Tensor, v: Tensor, out: Optional[Tensor] = None):
    if out is None:
        out = q.new_empty_strided(plan.out_shape, plan.out_stride)
    else:
        _check_out(out, q, plan)
    lse = q.new_empty(plan.lse_shape, dtype=torch.float32) if plan.lse_shape else None
    q_ptr, q_stride = _in_place(q, "q")
    k_ptr, k_stride = _in_place(k, "k")
    v_ptr, v_stride = _in_place(v, "v")
    need = plan.need
    workspace = q.new_zeros(need, dtype=torch.uint8) if need else None
    plan.launch(
        _stream(plan.index),
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
    )
    return out, lse


def forward(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    layout: str,
    mask: str,
    window_left: int,
    window_right: int,
    softmax_scale: Optional[float],
    with_lse: bool = True,
    out: Optional[Tensor] = None,
    check=None,
) -> Tuple[Tensor, Optional[Tensor]]:
    """(out, lse); without `with_lse` the kernel that stores no LSE runs and lse is None. A given
    `out` is written in place (checked: its shape, dtype, device and strides). `check` validates
    a signature not seen before (_fwd_plan)."""
    plan = _fwd_plan(q, k, v, layout, mask, window_left, window_right, softmax_scale, with_lse,
                     check)
    if plan.index != _current_device():
        with torch.cuda.device(plan.index):
            return _run_fwd(plan, q, k, v, out)
    return _run_fwd(plan, q, k, v, out)


def fwd_impl(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    layout: str,
    mask: str,
    window_left: int,
    window_right: int,
    softmax_scale: Optional[float],
) -> Tuple[Tensor, Tensor]:
    return forward(q, k, v, layout, mask, window_left, window_right, softmax_scale)


def bwd_impl(
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
) -> Tuple[Tensor, Tensor, Tensor]:
    bshd = layout == "bshd"
    b, hq, hk, sq, sk, dq, dv = _dims(q, k, v, bshd)
    index = q.device.index
    if index != _current_device():
        with torch.cuda.device(index):
            return bwd_impl(
                dout, q, k, v, out, lse, layout, mask, window_left, window_right,
                softmax_scale, deterministic,
            )
    grad_q = _empty_like_layout(q, q.shape)
    grad_k = _empty_like_layout(k, k.shape)
    grad_v = _empty_like_layout(v, v.shape)
    q, k, v = _aligned(q, "q"), _aligned(k, "k"), _aligned(v, "v")
    out, dout = _aligned(out, "out"), _aligned(dout, "dout")
    lse = lse.contiguous()
    entry = kernels.kernel_for(index, "bwd", q.dtype, dq, dv, mask, deterministic=deterministic)
    shape, need = entry.shape(
        (bshd, b, hq, hk, sq, sk, dq, dv, softmax_scale, window_left, window_right)
    )
    workspace = torch.empty(need, dtype=torch.uint8, device=q.device)
    entry.kernel.bwd(
        _stream(index),
        shape,
        q.data_ptr(),
        q.stride(),
        k.data_ptr(),
        k.stride(),
        v.data_ptr(),
        v.stride(),
        out.data_ptr(),
        out.stride(),
        lse.data_ptr(),
        dout.data_ptr(),
        dout.stride(),
        grad_q.data_ptr(),
        grad_q.stride(),
        grad_k.data_ptr(),
        grad_k.stride(),
        grad_v.data_ptr(),
        grad_v.stride(),
        workspace.data_ptr(),
        need,
    )
    return grad_q, grad_k, grad_v


# --- custom ops ---------------------------------------------------------------------------------


@torch.library.custom_op("fmha_jit::fwd", mutates_args=(), device_types="cuda")
def fwd(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    layout: str,
    mask: str,
    window_left: int,
    window_right: int,
    softmax_scale: Optional[float],
    deterministic: bool,
) -> Tuple[Tensor, Tensor]:
    """Attention forward: (out, lse). `deterministic` is carried for the backward."""
    return fwd_impl(q, k, v, layout, mask, window_left, window_right, softmax_scale)


@fwd.register_fake
def _fwd_fake(q, k, v, layout, mask, window_left, window_right, softmax_scale, deterministic):
    b, hq, _, sq, _, _, dv = _dims(q, k, v, layout == "bshd")
    out = _empty_like_layout(q, _out_shape(q, dv))
    lse = torch.empty((b, hq, sq), dtype=torch.float32, device=q.device)
    return out, lse


@torch.library.custom_op("fmha_jit::bwd", mutates_args=(), device_types="cuda")
def bwd(
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
) -> Tuple[Tensor, Tensor, Tensor]:
    """Attention backward: (dq, dk, dv)."""
    return bwd_impl(
        dout, q, k, v, out, lse, layout, mask, window_left, window_right, softmax_scale,
        deterministic,
    )


@bwd.register_fake
def _bwd_fake(dout, q, k, v, out, lse, layout, mask, window_left, window_right, softmax_scale,
              deterministic):
    return (
        _empty_like_layout(q, q.shape),
        _empty_like_layout(k, k.shape),
        _empty_like_layout(v, v.shape),
    )


def _setup_context(ctx, inputs, output):
    q, k, v, layout, mask, window_left, window_right, softmax_scale, deterministic = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse)
    ctx.args = (layout, mask, window_left, window_right, softmax_scale, deterministic)
    ctx.mark_non_differentiable(lse)


def _gradients(ctx, dout, backward):
    """dq, dk, dv by `backward` (the op or its implementation), and no gradient for the rest."""
    q, k, v, out, lse = ctx.saved_tensors
    dq, dk, dv = backward(dout, q, k, v, out, lse, *ctx.args)
    return dq, dk, dv, None, None, None, None, None, None


def _backward(ctx, dout, _dlse):
    return _gradients(ctx, dout, torch.ops.fmha_jit.bwd)


fwd.register_autograd(_backward, setup_context=_setup_context)


class _Attention(torch.autograd.Function):
    """The eager path: the ops' implementations without the dispatcher's round trip."""

    @staticmethod
    def forward(ctx, *inputs):
        output = fwd_impl(*inputs[:8])
        _setup_context(ctx, inputs, output)
        return output

    @staticmethod
    def backward(ctx, dout, _dlse):
        return _gradients(ctx, dout, bwd_impl)


def attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    layout: str,
    mask: str,
    window_left: int,
    window_right: int,
    softmax_scale: Optional[float],
    deterministic: bool,
    want_lse: bool = True,
    out: Optional[Tensor] = None,
    check=None,
) -> Tuple[Tensor, Optional[Tensor]]:
    """(out, lse) of the public call's arguments; `check(q, k, v, layout, mask)` validates them
    (the public call's own checks, memoised by it), and runs before anything reads the tensors.
    The custom op runs while torch traces (torch.compile, fake or functional tensors, a dispatch
    mode such as make_fx's), else the eager path. An eager call that needs no gradient and no LSE
    runs the kernel that stores none (lse is None); its repeated signatures skip `check`, whose
    verdict their memoised plan holds. `out`, for calls that need no gradient, receives the
    output."""
    eager = (
        type(q) is Tensor
        and type(k) is Tensor
        and type(v) is Tensor
        and not torch.compiler.is_compiling()
        and _current_dispatch_mode() is None
    )
    if eager and not (
        torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)
    ):
        return forward(q, k, v, layout, mask, window_left, window_right, softmax_scale, want_lse,
                       out, check)
    if check is not None:
        check(q, k, v, layout, mask)
    grad = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)
    if out is not None and grad:
        raise ValueError(
            "out is given while q, k or v requires grad; accepted: out=None for a call autograd "
            "records (an output written in place cannot be differentiated)"
        )
    if eager:  # with grad
        return _Attention.apply(
            q, k, v, layout, mask, window_left, window_right, softmax_scale, deterministic
        )
    result, lse = torch.ops.fmha_jit.fwd(
        q, k, v, layout, mask, window_left, window_right, softmax_scale, deterministic
    )
    if out is not None:
        out.copy_(result)
        result = out
    return result, lse
