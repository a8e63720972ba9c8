"""What the eager path hands the binding, without a GPU: CPU tensors stand in for CUDA ones and a
recording kernel for fmha_jit._C.Kernel (it writes the gradients through the pointers it gets, as
the kernels would). Checks the configs asked for, the Shape dims, every pointer and stride of
packed, sinks and softcap calls, that the sinks' gradient reaches autograd, that batches without
tokens launch nothing, and that a dense call's launch is the one it was before these features."""

import ctypes

import pytest
import torch

from fmha_jit import _ext, _launch, kernels, ops


class RecordingKernel:
    def __init__(self, family):
        self.family = family
        self.launches = []

    def fwd_workspace_bytes(self, shape):
        return 0

    def bwd_workspace_bytes(self, shape):
        return 256

    def fwd(self, *args):
        self.launches.append(args)

    def bwd(self, *args):
        self.launches.append(args)
        # (stream, shape, q, q_stride, k, k_stride, v, v_stride, out, out_stride, lse, dout,
        # dout_stride, dq, dq_stride, dk, dk_stride, dv, dv_stride, workspace, workspace_bytes,
        # cu_seqlens_q, cu_seqlens_k, sinks, d_sinks)
        for ptr, shape_of in ((args[13], "dq"), (args[15], "dk"), (args[17], "dv")):
            ctypes.memset(ptr, 0, self.sizes[shape_of])
        if len(args) > 24 and args[24]:
            values = self.d_sinks
            (ctypes.c_float * len(values)).from_address(args[24])[:] = values


class RecordingEntry(kernels.KernelEntry):
    """A KernelEntry of a RecordingKernel that remembers the Shape dims it was asked for."""

    def __init__(self, kernel, family):
        super().__init__(kernel, family)
        self.dims = []

    def shape(self, dims):
        self.dims.append(dims)
        return super().shape(dims)


@pytest.fixture
def recorder(monkeypatch):
    entries = {}
    configs = []

    def kernel_for(index, family, dtype, hdim_q, hdim_v, mask, deterministic=False, lse=True,
                   varlen=False, sinks=False, softcap=False):
        configs.append(dict(family=family, dtype=dtype, hdim_q=hdim_q, hdim_v=hdim_v, mask=mask,
                            deterministic=deterministic, lse=lse, varlen=varlen, sinks=sinks,
                            softcap=softcap))
        if family not in entries:
            entries[family] = RecordingEntry(RecordingKernel(family), family)
        return entries[family]

    monkeypatch.setattr(kernels, "kernel_for", kernel_for)
    monkeypatch.setattr(_launch, "_current_device", lambda: None)  # CPU tensors: device index None
    monkeypatch.setattr(_launch, "_stream", lambda index: 0)
    ops._fwd_plans.clear()
    _ext._ext_plans.clear()
    yield entries, configs
    ops._fwd_plans.clear()
    _ext._ext_plans.clear()


def packed(total, heads, dim, grad=False):
    return torch.randn(total, heads, dim, dtype=torch.bfloat16, requires_grad=grad)


def call(q, k, v, cu_q, cu_k, max_q, max_k, sinks=None, softcap=0.0, want_lse=True, mask="none",
         deterministic=False):
    return ops.attention_ext(q, k, v, "bshd", mask, -1, -1, None, deterministic, want_lse, None,
                             cu_q, cu_k, max_q, max_k, sinks, softcap)


def test_packed_forward(recorder):
    entries, configs = recorder
    q, k, v = packed(100, 8, 64), packed(150, 2, 64), packed(150, 2, 64)
    cu_q = torch.tensor([0, 10, 60, 100], dtype=torch.int32)
    cu_k = torch.tensor([0, 90, 90, 150], dtype=torch.int32)
    sinks = torch.randn(8)
    with torch.no_grad():
        out, lse = call(q, k, v, cu_q, cu_k, 50, 90, sinks, 5.0, mask="causal_bottom_right")
    assert out.shape == (100, 8, 64) and out.dtype == torch.bfloat16 and out.is_contiguous()
    assert lse.shape == (8, 100) and lse.dtype == torch.float32
    assert configs == [dict(family="fwd", dtype=torch.bfloat16, hdim_q=64, hdim_v=64,
                            mask="causal_bottom_right", deterministic=False, lse=True,
                            varlen=True, sinks=True, softcap=True)]
    fwd = entries["fwd"]
    # bshd, sequences, Hq, Hk, max lengths, head dims, scale, window, varlen, totals, softcap
    assert fwd.dims == [(True, 3, 8, 2, 50, 90, 64, 64, None, -1, -1, True, 100, 150, 5.0)]
    (args,) = fwd.kernel.launches
    assert args[2:11] == (q.data_ptr(), (512, 64, 1), k.data_ptr(), (128, 64, 1), v.data_ptr(),
                          (128, 64, 1), out.data_ptr(), (512, 64, 1), lse.data_ptr())
    assert args[11:] == (0, 0, cu_q.data_ptr(), cu_k.data_ptr(), sinks.data_ptr())
    # The signature's plan is kept: a second call asks for no kernel.
    with torch.no_grad():
        call(q, k, v, cu_q, cu_k, 50, 90, sinks, 5.0, mask="causal_bottom_right")
    assert len(configs) == 1 and len(fwd.kernel.launches) == 2


def test_packed_inference_without_lse_and_strided_inputs(recorder):
    entries, configs = recorder
    qkv = packed(100, 3 * 4, 64)  # one projection, q, k and v as views: read in place
    q, k, v = qkv[:, :4], qkv[:, 4:8], qkv[:, 8:]
    cu = torch.tensor([0, 100], dtype=torch.int32)
    with torch.no_grad():
        out, lse = call(q, k, v, cu, cu, 100, 100, want_lse=False)
    assert lse is None and configs[0]["lse"] is False and configs[0]["sinks"] is False
    (args,) = entries["fwd"].kernel.launches
    assert args[2:8] == (q.data_ptr(), (768, 64, 1), k.data_ptr(), (768, 64, 1), v.data_ptr(),
                         (768, 64, 1))
    assert args[10] == 0 and args[13:] == (cu.data_ptr(), cu.data_ptr(), 0)


def test_dense_call_with_sinks_and_softcap(recorder):
    entries, configs = recorder
    q = torch.randn(2, 8, 37, 64, dtype=torch.float16).transpose(1, 2)  # (2, 37, 8, 64) view
    k = torch.randn(2, 53, 2, 64, dtype=torch.float16)
    sinks = torch.randn(8)
    with torch.no_grad():
        out, lse = ops.attention_ext(q, k, k, "bshd", "none", -1, -1, 0.125, False, True, None,
                                     None, None, 0, 0, sinks, 0.0)
    assert configs[0]["varlen"] is False and configs[0]["sinks"] is True
    assert configs[0]["softcap"] is False
    assert entries["fwd"].dims == [(True, 2, 8, 2, 37, 53, 64, 64, 0.125, -1, -1, False, 0, 0,
                                    0.0)]
    assert out.shape == (2, 37, 8, 64) and out.transpose(1, 2).is_contiguous()  # q's order
    assert lse.shape == (2, 8, 37)
    (args,) = entries["fwd"].kernel.launches
    assert args[3] == q.stride() and args[13:] == (0, 0, sinks.data_ptr())


def test_backward_returns_the_sinks_gradient(recorder):
    entries, configs = recorder
    q, k, v = packed(100, 8, 64, grad=True), packed(150, 2, 64, grad=True), packed(150, 2, 64,
                                                                                    grad=True)
    cu_q = torch.tensor([0, 10, 60, 100], dtype=torch.int32)
    cu_k = torch.tensor([0, 90, 90, 150], dtype=torch.int32)
    sinks = torch.randn(8, requires_grad=True)
    out, lse = call(q, k, v, cu_q, cu_k, 50, 90, sinks, 2.5, mask="sliding_window",
                    deterministic=True)
    assert out.requires_grad and not lse.requires_grad
    (fwd_args,) = entries["fwd"].kernel.launches
    # The bwd kernel the backward sets up: what it writes through dq, dk, dv and d_sinks.
    bwd = entries["bwd"] = RecordingEntry(RecordingKernel("bwd"), "bwd")
    bwd.kernel.sizes = {"dq": q.numel() * 2, "dk": k.numel() * 2, "dv": v.numel() * 2}
    bwd.kernel.d_sinks = [float(i) for i in range(8)]
    dout = torch.randn_like(out)
    dq, dk, dv, d_sinks = torch.autograd.grad(out, (q, k, v, sinks), dout)
    assert configs[-1] == dict(family="bwd", dtype=torch.bfloat16, hdim_q=64, hdim_v=64,
                               mask="sliding_window", deterministic=True, lse=True, varlen=True,
                               sinks=True, softcap=True)
    assert bwd.dims == [(True, 3, 8, 2, 50, 90, 64, 64, None, -1, -1, True, 100, 150, 2.5)]
    (args,) = bwd.kernel.launches
    assert args[2] == q.data_ptr() and args[8] == fwd_args[8] and args[10] == fwd_args[10]
    assert args[11] == dout.data_ptr() and args[12] == (512, 64, 1)
    assert args[13:19] == (dq.data_ptr(), (512, 64, 1), dk.data_ptr(), (128, 64, 1),
                           dv.data_ptr(), (128, 64, 1))
    assert args[20] == 256 and args[21:24] == (cu_q.data_ptr(), cu_k.data_ptr(),
                                               sinks.data_ptr())
    assert args[24] == d_sinks.data_ptr()
    assert d_sinks.dtype == torch.float32 and d_sinks.tolist() == [float(i) for i in range(8)]
    assert not dq.any() and not dk.any() and not dv.any()


def test_batches_without_tokens_launch_nothing(recorder):
    entries, configs = recorder
    q, k, v = packed(8, 4, 64, grad=True), packed(0, 2, 64, grad=True), packed(0, 2, 64, grad=True)
    cu_q = torch.tensor([0, 5, 8], dtype=torch.int32)
    cu_k = torch.tensor([0, 0, 0], dtype=torch.int32)
    sinks = torch.randn(4, requires_grad=True)
    out, lse = call(q, k, v, cu_q, cu_k, 5, 1, sinks)
    assert not out.any() and torch.equal(lse, sinks.detach()[:, None].expand(4, 8))
    dq, dk, dv, d_sinks = torch.autograd.grad(out, (q, k, v, sinks), torch.randn_like(out))
    assert not dq.any() and dk.shape == (0, 2, 64) and not d_sinks.any()
    with torch.no_grad():
        out, lse = call(q, k, v, cu_q, cu_k, 5, 1)
    assert not out.any() and torch.isneginf(lse).all()
    with torch.no_grad():
        out, lse = call(packed(0, 4, 64), packed(6, 2, 64), packed(6, 2, 64), cu_k,
                        torch.tensor([0, 6, 6], dtype=torch.int32), 1, 6)
    assert out.shape == (0, 4, 64) and lse.shape == (4, 0)
    assert configs == [] and entries == {}


def test_a_dense_call_launches_as_before(recorder):
    # The calls that use no new feature keep their path: the binding gets the 13 arguments it
    # always got, and the config asks for no feature.
    entries, configs = recorder
    q = torch.randn(2, 37, 8, 64, dtype=torch.bfloat16)
    k = torch.randn(2, 53, 2, 64, dtype=torch.bfloat16)
    with torch.no_grad():
        out, lse = ops.attention(q, k, k, "bshd", "none", -1, -1, None, False, False)
    assert lse is None and out.shape == (2, 37, 8, 64)
    assert not any(configs[0][f] for f in ("varlen", "sinks", "softcap"))
    assert entries["fwd"].dims == [(True, 2, 8, 2, 37, 53, 64, 64, None, -1, -1)]
    (args,) = entries["fwd"].kernel.launches
    assert len(args) == 13
