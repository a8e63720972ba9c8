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
        dq, dk, dv = torch.ops.fmha_jit.bwd(out, q, k, k, out, lse, "bhsd", "none", -1, -1, 0.5,
                                            True)
        assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == k.shape


def test_op_schemas():
    fwd = torch.ops.fmha_jit.fwd.default._schema
    bwd = torch.ops.fmha_jit.bwd.default._schema
    assert [a.name for a in fwd.arguments][:3] == ["q", "k", "v"]
    assert len(fwd.returns) == 2 and len(bwd.returns) == 3
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
