"""The ops on fake tensors (no GPU needed): shapes, dtypes and strides propagate through
torch.ops.fmha_jit.fwd / bwd and through the public functions, forward and backward, as
torch.compile sees them."""

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import fmha_jit

DTYPES = [torch.float16, torch.bfloat16]


def bshd(b, s, h, d, dtype):
    return torch.empty(b, s, h, d, dtype=dtype, device="cuda")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("heads_k", [8, 2, 1])
def test_flash_attn_func_shapes(dtype, heads_k):
    with FakeTensorMode():
        q = bshd(2, 37, 8, 128, dtype).requires_grad_()
        k = bshd(2, 53, heads_k, 128, dtype).requires_grad_()
        v = bshd(2, 53, heads_k, 128, dtype).requires_grad_()
        out, lse = fmha_jit.flash_attn_func(q, k, v, causal=True, return_lse=True)
        assert out.shape == (2, 37, 8, 128) and out.dtype == dtype and out.is_cuda
        assert out.is_contiguous()
        assert lse.shape == (2, 8, 37) and lse.dtype == torch.float32
        assert not lse.requires_grad and out.requires_grad


@pytest.mark.parametrize("dtype", DTYPES)
def test_sdpa_output_keeps_the_query_memory_order(dtype):
    with FakeTensorMode():
        # The usual model code: (batch, seq, heads, dim) projections transposed to SDPA's layout.
        q = bshd(2, 64, 8, 64, dtype).transpose(1, 2).requires_grad_()
        k = bshd(2, 64, 2, 64, dtype).transpose(1, 2).requires_grad_()
        v = bshd(2, 64, 2, 64, dtype).transpose(1, 2).requires_grad_()
        out = fmha_jit.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        assert out.shape == (2, 8, 64, 64) and out.dtype == dtype
        assert out.transpose(1, 2).is_contiguous()  # the transpose back to (b, s, h, d) is free


def test_ops_directly():
    with FakeTensorMode():
        q = torch.empty(3, 4, 17, 96, dtype=torch.bfloat16, device="cuda")
        k = torch.empty(3, 2, 33, 96, dtype=torch.bfloat16, device="cuda")
        out, lse = torch.ops.fmha_jit.fwd(q, k, k, "bhsd", "none", -1, -1, 0.5, False)
        assert out.shape == (3, 4, 17, 96) and lse.shape == (3, 4, 17)
        dq, dk, dv, d_sinks = torch.ops.fmha_jit.bwd(out, q, k, k, out, lse, "bhsd", "none", -1,
                                                     -1, 0.5, True)
        assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == k.shape
        assert d_sinks.shape == (0,) and d_sinks.dtype == torch.float32  # no sinks


def test_op_schemas():
    fwd = torch.ops.fmha_jit.fwd.default._schema
    bwd = torch.ops.fmha_jit.bwd.default._schema
    assert [a.name for a in fwd.arguments][:3] == ["q", "k", "v"]
    assert len(fwd.returns) == 2 and len(bwd.returns) == 4
    assert not fwd.is_mutable and not bwd.is_mutable


@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
def test_autograd_through_the_ops(layout):
    # Meta tensors: the registered autograd runs the bwd op's fake, with no GPU in the engine.
    def make(heads, seq):
        shape = (2, seq, heads, 64) if layout == "bshd" else (2, heads, seq, 64)
        return torch.empty(shape, dtype=torch.bfloat16, device="meta", requires_grad=True)

    q, k, v = make(8, 31), make(2, 45), make(2, 45)
    out, lse = torch.ops.fmha_jit.fwd(q, k, v, layout, "causal_bottom_right", -1, -1, None, True)
    assert lse.shape == (2, 8, 31) and not lse.requires_grad
    out.sum().backward()
    for t in (q, k, v):
        assert t.grad.shape == t.shape and t.grad.dtype == torch.bfloat16


def test_dynamo_traces_both_calls_into_the_ops_without_a_graph_break():
    def model(q, k, v):
        a = fmha_jit.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        b = fmha_jit.flash_attn_func(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                     causal=True, window_size=(8, -1))
        return a.sum() + b.sum()

    with FakeTensorMode(allow_non_fake_inputs=True):
        q = torch.empty(2, 8, 64, 64, dtype=torch.bfloat16, device="cuda", requires_grad=True)
        k = torch.empty(2, 2, 64, 64, dtype=torch.bfloat16, device="cuda", requires_grad=True)
    # export traces the whole function as one graph, or raises at the first graph break.
    graph, _ = torch._dynamo.export(model)(q, k, k)
    calls = [n for n in graph.graph.nodes if n.target is torch.ops.fmha_jit.fwd.default
             or n.target is torch.ops.fmha_jit.fwd]
    assert [c.args[3:7] for c in calls] == [("bhsd", "causal_top_left", -1, -1),
                                            ("bshd", "sliding_window", 8, 0)]


def packed(total, heads, dim, dtype=torch.bfloat16, device="cuda", grad=False):
    return torch.empty(total, heads, dim, dtype=dtype, device=device, requires_grad=grad)


def seqlens(n, device="cuda"):
    return torch.empty(n, dtype=torch.int32, device=device)


@pytest.mark.parametrize("heads_k", [8, 2, 1])
@pytest.mark.parametrize("with_sinks", [False, True])
def test_flash_attn_varlen_func_shapes(heads_k, with_sinks):
    with FakeTensorMode():
        q = packed(300, 8, 128, grad=True)
        k, v = packed(450, heads_k, 128, grad=True), packed(450, heads_k, 128, grad=True)
        sinks = torch.zeros(8, device="cuda", requires_grad=True) if with_sinks else None
        out, lse, probs = fmha_jit.flash_attn_varlen_func(
            q, k, v, seqlens(5), seqlens(5), 120, 200, causal=True, softcap=30.0,
            return_attn_probs=True, sinks=sinks)
        assert out.shape == (300, 8, 128) and out.dtype == torch.bfloat16 and out.is_contiguous()
        assert lse.shape == (8, 300) and lse.dtype == torch.float32 and probs is None
        assert out.requires_grad and not lse.requires_grad
        plain = fmha_jit.flash_attn_varlen_func(q, k, v, seqlens(5), seqlens(5), 120, 200)
        assert plain.shape == (300, 8, 128)


def test_sinks_and_softcap_keep_the_dense_shapes():
    with FakeTensorMode():
        q = bshd(2, 37, 8, 128, torch.float16)
        k = bshd(2, 53, 2, 128, torch.float16)
        sinks = torch.zeros(8, device="cuda", requires_grad=True)
        out, lse = fmha_jit.flash_attn_func(q, k, k, causal=True, return_lse=True, sinks=sinks,
                                            softcap=5.0)
        assert out.shape == (2, 37, 8, 128) and lse.shape == (2, 8, 37) and out.requires_grad
        out = fmha_jit.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), k.transpose(1, 2), enable_gqa=True,
            sinks=sinks, softcap=2.0)
        assert out.shape == (2, 8, 37, 128) and out.transpose(1, 2).is_contiguous()


def test_varlen_ops_directly():
    with FakeTensorMode():
        q, k = packed(100, 4, 96), packed(150, 2, 96)
        cu, sinks = seqlens(3), torch.zeros(4, device="cuda")
        out, lse = torch.ops.fmha_jit.fwd(q, k, k, "bshd", "causal_bottom_right", -1, -1, None,
                                          False, cu, cu, 60, 90, sinks, 10.0)
        assert out.shape == (100, 4, 96) and lse.shape == (4, 100)
        dq, dk, dv, d_sinks = torch.ops.fmha_jit.bwd(out, q, k, k, out, lse, "bshd",
                                                     "causal_bottom_right", -1, -1, None, True,
                                                     cu, cu, 60, 90, sinks, 10.0)
        assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == k.shape
        assert d_sinks.shape == (4,) and d_sinks.dtype == torch.float32


def test_op_schemas_take_the_packed_batch_sinks_and_softcap():
    for op in (torch.ops.fmha_jit.fwd.default, torch.ops.fmha_jit.bwd.default):
        args = {a.name: a for a in op._schema.arguments}
        for name in ("cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k", "sinks",
                     "softcap"):
            assert args[name].has_default_value(), name  # the dense calls' arguments unchanged


@pytest.mark.parametrize("with_sinks", [False, True])
def test_varlen_autograd_through_the_ops(with_sinks):
    # Meta tensors, as test_autograd_through_the_ops: the bwd op's fake runs in the engine.
    q = torch.empty(77, 8, 64, dtype=torch.float16, device="meta", requires_grad=True)
    k = torch.empty(90, 2, 64, dtype=torch.float16, device="meta", requires_grad=True)
    v = torch.empty(90, 2, 32, dtype=torch.float16, device="meta", requires_grad=True)
    cu = torch.empty(4, dtype=torch.int32, device="meta")
    sinks = torch.empty(8, device="meta", requires_grad=True) if with_sinks else None
    out, lse = torch.ops.fmha_jit.fwd(q, k, v, "bshd", "sliding_window", 16, 0, None, False, cu,
                                      cu, 40, 50, sinks, 0.0)
    assert out.shape == (77, 8, 32) and lse.shape == (8, 77) and not lse.requires_grad
    out.sum().backward()
    for t in (q, k, v):
        assert t.grad.shape == t.shape and t.grad.dtype == torch.float16
    if with_sinks:
        assert sinks.grad.shape == (8,) and sinks.grad.dtype == torch.float32


def test_dense_sinks_autograd_through_the_ops():
    q = torch.empty(2, 8, 31, 64, dtype=torch.bfloat16, device="meta", requires_grad=True)
    k = torch.empty(2, 2, 45, 64, dtype=torch.bfloat16, device="meta", requires_grad=True)
    sinks = torch.empty(8, device="meta", requires_grad=True)
    out, _ = torch.ops.fmha_jit.fwd(q, k, k, "bhsd", "none", -1, -1, None, False, sinks=sinks,
                                    softcap=3.0)
    out.sum().backward()
    assert q.grad.shape == q.shape and k.grad.shape == k.shape and sinks.grad.shape == (8,)


def test_dynamo_traces_varlen_sinks_and_softcap_into_the_ops_without_a_graph_break():
    def model(q, k, v, cu_q, cu_k, sinks):
        a = fmha_jit.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 64, 80, causal=True,
                                            softcap=20.0, sinks=sinks)
        b = fmha_jit.flash_attn_func(q[None], k[None], v[None], sinks=sinks)
        return a.sum() + b.sum()

    with FakeTensorMode(allow_non_fake_inputs=True):
        q = packed(100, 8, 64, grad=True)
        k = packed(150, 2, 64, grad=True)
        cu_q, cu_k = seqlens(4), seqlens(4)
        sinks = torch.zeros(8, device="cuda", requires_grad=True)
    graph, _ = torch._dynamo.export(model)(q, k, k, cu_q, cu_k, sinks)
    calls = [n for n in graph.graph.nodes if n.target is torch.ops.fmha_jit.fwd.default
             or n.target is torch.ops.fmha_jit.fwd]
    assert len(calls) == 2
    assert calls[0].args[3:5] == ("bshd", "causal_bottom_right")
    assert calls[0].args[11:13] == (64, 80) and calls[0].args[14] == 20.0
    assert calls[1].args[9:11] == (None, None) and calls[1].args[14] == 0.0
    assert calls[0].args[13] is calls[1].args[13]  # both take the sinks
