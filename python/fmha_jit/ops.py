"""The attention ops: torch.ops.fmha_jit.fwd and torch.ops.fmha_jit.bwd.

Both are torch.library custom ops with fake (meta) implementations and autograd, so torch.compile
traces them without a graph break and torch.library.opcheck holds. Outside torch.compile the
public functions call the same implementations through a torch.autograd.Function, which skips the
dispatcher's round trip into Python (tens of microseconds per call; docs/PYTHON.md).

Tensors are (batch, seqlen, heads, dim) for layout "bshd" and (batch, heads, seqlen, dim) for
"bhsd", any strides with the head dim contiguous. A packed variable-length batch (cu_seqlens_q and
cu_seqlens_k given, layout "bshd") has tensors (total, heads, dim) and an LSE (heads, total_q);
sinks (per query head, fp32) and softcap are optional arguments of both ops. A call that uses none
of them runs the dense path, whose memoised plans and launch arguments are its own; the others
run those of _ext.py. Outputs, LSE and workspaces come from torch's caching allocator and
the kernels run on the current stream: nothing allocates outside torch or synchronises once a
kernel is loaded, so the calls can be captured in a CUDA graph.
"""

from __future__ import annotations

import atexit
from typing import Optional, Tuple

import torch
from torch import Tensor
from torch.utils._python_dispatch import _get_current_dispatch_mode as _current_dispatch_mode

from fmha_jit import _ext, _launch, kernels

# --- implementations (real tensors) -------------------------------------------------------------

class _FwdPlan:
    """What a forward of one call signature launches, worked out on the signature's first call:
    the kernel, its Shape and workspace size, and the output's shape, strides and device."""

    __slots__ = ("launch", "shape", "need", "out_shape", "out_stride", "lse_shape", "index")


_fwd_plans = {}
# Plans hold the extension's objects: released before the interpreter finalises (kernels.py).
atexit.register(_fwd_plans.clear)


def _new_fwd_plan(q, k, v, layout, mask, window_left, window_right, softmax_scale, with_lse):
    bshd = layout == "bshd"
    b, hq, hk, sq, sk, dq, dv = _launch._dims(q, k, v, bshd)
    index = q.device.index
    entry = kernels.kernel_for(index, "fwd", q.dtype, dq, dv, mask, lse=with_lse)
    plan = _FwdPlan()
    plan.launch = entry.kernel.fwd
    plan.shape, plan.need = entry.shape(
        (bshd, b, hq, hk, sq, sk, dq, dv, softmax_scale, window_left, window_right)
    )
    # The output keeps q's memory order of dims 1 and 2 (_launch._empty_like_layout), allocated at
    # once with its strides: a transposed view would cost a second tensor per call.
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
    """(data_ptr, strides) of `t`, or of the copy _launch._aligned makes when the kernels cannot
    read it in place: each is read from torch once per call. (The dense path's own test of the
    strides: _launch._readable takes any rank, at a cost every call would pay.)"""
    stride, ptr = t.stride(), t.data_ptr()
    if stride[3] == 1 and not ((stride[0] | stride[1] | stride[2]) & 7) and not (ptr & 15):
        return ptr, stride
    t = _launch._aligned(t, name)
    return t.data_ptr(), t.stride()


def _run_fwd(plan: _FwdPlan, q: Tensor, k: Tensor, v: Tensor, out: Optional[Tensor] = None):
    if out is None:
        out = q.new_empty_strided(plan.out_shape, plan.out_stride)
    else:
        _launch.check_out(out, q, plan.out_shape)
    lse = q.new_empty(plan.lse_shape, dtype=torch.float32) if plan.lse_shape else None
    q_ptr, q_stride = _in_place(q, "q")
    k_ptr, k_stride = _in_place(k, "k")
    v_ptr, v_stride = _in_place(v, "v")
    need = plan.need
    workspace = q.new_zeros(need, dtype=torch.uint8) if need else None
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
    if plan.index != _launch._current_device():
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
    b, hq, hk, sq, sk, dq, dv = _launch._dims(q, k, v, bshd)
    index = q.device.index
    if index != _launch._current_device():
        with torch.cuda.device(index):
            return bwd_impl(
                dout, q, k, v, out, lse, layout, mask, window_left, window_right,
                softmax_scale, deterministic,
            )
    grad_q = _launch._empty_like_layout(q, q.shape)
    grad_k = _launch._empty_like_layout(k, k.shape)
    grad_v = _launch._empty_like_layout(v, v.shape)
    q, k, v = _launch._aligned(q, "q"), _launch._aligned(k, "k"), _launch._aligned(v, "v")
    out, dout = _launch._aligned(out, "out"), _launch._aligned(dout, "dout")
    lse = lse.contiguous()
    entry = kernels.kernel_for(index, "bwd", q.dtype, dq, dv, mask, deterministic=deterministic)
    shape, need = entry.shape(
        (bshd, b, hq, hk, sq, sk, dq, dv, softmax_scale, window_left, window_right)
    )
    workspace = torch.empty(need, dtype=torch.uint8, device=q.device)
    _launch.launch_bwd(entry.kernel, index, shape, q, k, v, out, lse, dout, grad_q, grad_k, grad_v,
                       workspace, need)
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
    cu_seqlens_q: Optional[Tensor] = None,
    cu_seqlens_k: Optional[Tensor] = None,
    max_seqlen_q: int = 0,
    max_seqlen_k: int = 0,
    sinks: Optional[Tensor] = None,
    softcap: float = 0.0,
) -> Tuple[Tensor, Tensor]:
    """Attention forward: (out, lse). `deterministic` is carried for the backward. With
    cu_seqlens (int32, batch + 1 each) q, k, v and out are packed (total, heads, dim), layout
    "bshd", max_seqlen the longest lengths, and lse is (heads, total_q). sinks: (Hq,) fp32 logits;
    softcap: > 0 caps the scaled scores, 0 = none."""
    if _ext._uses_ext(cu_seqlens_q, cu_seqlens_k, sinks, softcap):
        return _ext.forward_ext(q, k, v, layout, mask, window_left, window_right, softmax_scale,
                                True, None, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                max_seqlen_k, sinks, softcap)
    return fwd_impl(q, k, v, layout, mask, window_left, window_right, softmax_scale)


@fwd.register_fake
def _fwd_fake(q, k, v, layout, mask, window_left, window_right, softmax_scale, deterministic,
              cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=0, max_seqlen_k=0, sinks=None,
              softcap=0.0):
    if cu_seqlens_q is not None:
        total_q, hq = q.shape[0], q.shape[1]
        out = q.new_empty((total_q, hq, v.shape[2]))
        lse = q.new_empty((hq, total_q), dtype=torch.float32)
        return out, lse
    b, hq, _, sq, _, _, dv = _launch._dims(q, k, v, layout == "bshd")
    out = _launch._empty_like_layout(q, _launch._out_shape(q, dv))
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
    cu_seqlens_q: Optional[Tensor] = None,
    cu_seqlens_k: Optional[Tensor] = None,
    max_seqlen_q: int = 0,
    max_seqlen_k: int = 0,
    sinks: Optional[Tensor] = None,
    softcap: float = 0.0,
) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """Attention backward: (dq, dk, dv, d_sinks). d_sinks is the sinks' gradient (Hq,) fp32, and
    without sinks an empty fp32 tensor (a custom op cannot return None)."""
    if _ext._uses_ext(cu_seqlens_q, cu_seqlens_k, sinks, softcap):
        dq, dk, dv, d_sinks = _ext.backward_ext(
            dout, q, k, v, out, lse, layout, mask, window_left, window_right, softmax_scale,
            deterministic, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, sinks, softcap,
        )
    else:
        dq, dk, dv = bwd_impl(
            dout, q, k, v, out, lse, layout, mask, window_left, window_right, softmax_scale,
            deterministic,
        )
        d_sinks = None
    if d_sinks is None:
        d_sinks = q.new_empty((0,), dtype=torch.float32)
    return dq, dk, dv, d_sinks


@bwd.register_fake
def _bwd_fake(dout, q, k, v, out, lse, layout, mask, window_left, window_right, softmax_scale,
              deterministic, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=0,
              max_seqlen_k=0, sinks=None, softcap=0.0):
    d_sinks = q.new_empty((0,) if sinks is None else sinks.shape, dtype=torch.float32)
    return _ext._grad_buffer(q), _ext._grad_buffer(k), _ext._grad_buffer(v), d_sinks


# No gradient for layout, mask, window_left, window_right, softmax_scale, deterministic, and for
# the custom op's optional arguments (cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
# sinks, softcap) of a call that uses none.
_NO_GRADS = (None,) * 6
_NO_GRADS_OP = (None,) * 12


def _setup_context(ctx, inputs, output):
    q, k, v, layout, mask, window_left, window_right, softmax_scale, deterministic = inputs[:9]
    out, lse = output
    ctx.args = (layout, mask, window_left, window_right, softmax_scale, deterministic)
    ctx.no_grads = _NO_GRADS if len(inputs) == 9 else _NO_GRADS_OP
    # The custom op always passes the optional arguments (their defaults filled in), the eager
    # path of a dense call none.
    if len(inputs) > 9 and _ext._uses_ext(inputs[9], inputs[10], inputs[13], inputs[14]):
        cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, sinks, softcap = inputs[9:]
        ctx.save_for_backward(q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, sinks)
        ctx.ext = (max_seqlen_q, max_seqlen_k, softcap)
    else:
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.ext = None
    ctx.mark_non_differentiable(lse)


def _gradients(ctx, dout, backward, backward_ext):
    """The gradients of the inputs: dq, dk, dv (and the sinks' d_sinks) by `backward` or
    `backward_ext` (the op, or the implementations), none for the rest."""
    if ctx.ext is None:
        q, k, v, out, lse = ctx.saved_tensors
        grads = backward(dout, q, k, v, out, lse, *ctx.args)
        return (grads[0], grads[1], grads[2]) + ctx.no_grads
    q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, sinks = ctx.saved_tensors
    max_seqlen_q, max_seqlen_k, softcap = ctx.ext
    dq, dk, dv, d_sinks = backward_ext(dout, q, k, v, out, lse, *ctx.args, cu_seqlens_q,
                                       cu_seqlens_k, max_seqlen_q, max_seqlen_k, sinks, softcap)
    if sinks is None:
        d_sinks = None
    return (dq, dk, dv) + _NO_GRADS + (None, None, None, None, d_sinks, None)


def _backward(ctx, dout, _dlse):
    op = torch.ops.fmha_jit.bwd
    return _gradients(ctx, dout, op, op)


fwd.register_autograd(_backward, setup_context=_setup_context)


class _Attention(torch.autograd.Function):
    """The eager path: the ops' implementations without the dispatcher's round trip. A dense
    call passes the ops' first 9 arguments; a call with cu_seqlens, sinks or softcap all 15."""

    @staticmethod
    def forward(ctx, *inputs):
        if len(inputs) > 9:
            output = _ext.forward_ext(*inputs[:8], True, None, *inputs[9:])
        else:
            output = fwd_impl(*inputs[:8])
        _setup_context(ctx, inputs, output)
        return output

    @staticmethod
    def backward(ctx, dout, _dlse):
        return _gradients(ctx, dout, bwd_impl, _ext.backward_ext)


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
        _check_out_like(out, result)
        out.copy_(result)
        result = out
    return result, lse


def _check_out_like(out, result: Tensor) -> None:
    """A caller's output tensor while torch traces: the op's output is copied into it, so its
    strides are free, its shape, dtype and device not."""
    if not isinstance(out, Tensor):
        raise TypeError(f"out must be a torch.Tensor or None, got {type(out).__name__}")
    if out.shape != result.shape or out.dtype != result.dtype or out.device != result.device:
        raise ValueError(
            f"out is {tuple(out.shape)} {out.dtype} on {out.device}; accepted: "
            f"{tuple(result.shape)} {result.dtype} on {result.device}"
        )


def attention_ext(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    layout: str,
    mask: str,
    window_left: int,
    window_right: int,
    softmax_scale: Optional[float],
    deterministic: bool,
    want_lse: bool,
    out: Optional[Tensor],
    cu_seqlens_q: Optional[Tensor],
    cu_seqlens_k: Optional[Tensor],
    max_seqlen_q: int,
    max_seqlen_k: int,
    sinks: Optional[Tensor],
    softcap: float,
) -> Tuple[Tensor, Optional[Tensor]]:
    """attention() of a call with cu_seqlens (a packed batch), sinks or softcap, its arguments
    checked by the caller. sinks that require grad get their gradient from the backward."""
    grad = torch.is_grad_enabled() and (
        q.requires_grad
        or k.requires_grad
        or v.requires_grad
        or (sinks is not None and sinks.requires_grad)
    )
    eager = (
        type(q) is Tensor
        and type(k) is Tensor
        and type(v) is Tensor
        and (sinks is None or type(sinks) is Tensor)
        and (cu_seqlens_q is None or type(cu_seqlens_q) is Tensor)
        and (cu_seqlens_k is None or type(cu_seqlens_k) is Tensor)
        and not torch.compiler.is_compiling()
        and _current_dispatch_mode() is None
    )
    if eager and not grad:
        return _ext.forward_ext(q, k, v, layout, mask, window_left, window_right, softmax_scale,
                                want_lse, out, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                max_seqlen_k, sinks, softcap)
    if out is not None and grad:
        raise ValueError(
            "out is given while q, k, v or sinks requires grad; accepted: out=None for a call "
            "autograd records (an output written in place cannot be differentiated)"
        )
    args = (q, k, v, layout, mask, window_left, window_right, softmax_scale, deterministic,
            cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, sinks, softcap)
    if eager:  # with grad
        return _Attention.apply(*args)
    result, lse = torch.ops.fmha_jit.fwd(*args)
    if out is not None:
        _check_out_like(out, result)
        out.copy_(result)
        result = out
    return result, lse
