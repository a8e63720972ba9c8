"""What every launch reads from torch: the current stream and device, and its tensors in place
or, where the kernels cannot read them so (head dim not contiguous, rows or base not 16-byte
aligned), as announced copies."""

from __future__ import annotations

import warnings

import torch
from torch import Tensor

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
    return _copied(t, name)


def _copied(t: Tensor, name: str) -> Tensor:
    warnings.warn(
        f"fmha_jit: {name} (strides {tuple(t.stride())}, storage offset {t.storage_offset()}) "
        "is copied to a contiguous tensor: the kernels need the head dim contiguous and 16-byte "
        "aligned rows",
        stacklevel=5,
    )
    return t.contiguous() if not t.is_contiguous() else t.clone()


def _readable(stride, ptr: int) -> bool:
    """Whether the kernels read a tensor of any number of dims in place: the head dim contiguous,
    the other strides and the base 16-byte aligned (for 2-byte elements)."""
    return stride[-1] == 1 and not any(s & 7 for s in stride[:-1]) and not ptr & 15


def check_out(out: Tensor, q: Tensor, shape) -> None:
    """A caller's output tensor of `shape` (4-d, or 3-d packed), which the kernel writes in place:
    no copy is made for it."""
    if type(out) is not Tensor:
        raise TypeError(f"out must be a torch.Tensor or None, got {type(out).__name__}")
    if out.shape != shape or out.dtype != q.dtype or out.device != q.device:
        raise ValueError(
            f"out is {tuple(out.shape)} {out.dtype} on {out.device}; accepted: {shape} "
            f"{q.dtype} on {q.device}"
        )
    stride = out.stride()
    if not _readable(stride, out.data_ptr()) or 0 in stride[:-1]:
        raise ValueError(
            f"out has strides {tuple(stride)} at offset {out.storage_offset()}; accepted: "
            "the head dim contiguous, 16-byte aligned rows, no broadcast dims"
        )


def _aligned_any(t: Tensor, name: str) -> Tensor:
    """_aligned for 3-d (packed) as well as 4-d tensors."""
    return t if _readable(t.stride(), t.data_ptr()) else _copied(t, name)


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


_current_device = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device


def launch_bwd(kernel, index, shape, q, k, v, out, lse, dout, grad_q, grad_k, grad_v, workspace,
               need, *pointers):
    """One backward launch on device `index`'s current stream: every tensor's address and strides
    (the inputs already readable in place), then `pointers`, the packed batch's and the sinks'
    addresses of a call that has them."""
    kernel.bwd(
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
        *pointers,
    )
