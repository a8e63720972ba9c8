"""The ops inside PyTorch on the GPU: opcheck, a fullgraph torch.compile of a transformer block
(forward and backward, no graph break), CUDA graph capture and replay, the current stream, and
strided inputs read in place."""

import warnings

import pytest
import torch
import torch.nn.functional as F

import fmha_jit
from fmha_jit import kernels
from gpu_setup import warm_cache
from llama_block import LlamaBlock

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module", autouse=True)
def kernels_built():
    warm_cache()


def randn(*shape, dtype=torch.bfloat16, grad=False):
    return torch.randn(*shape, device="cuda", dtype=dtype, requires_grad=grad)


@pytest.mark.parametrize("layout, mask", [("bshd", "causal_bottom_right"), ("bhsd", "none"),
                                          ("bshd", "sliding_window")])
def test_opcheck(layout, mask):
    shape_q = (2, 77, 4, 64) if layout == "bshd" else (2, 4, 77, 64)
    shape_k = (2, 90, 2, 64) if layout == "bshd" else (2, 2, 90, 64)
    q, k, v = randn(*shape_q, grad=True), randn(*shape_k, grad=True), randn(*shape_k, grad=True)
    window = (16, 3) if mask == "sliding_window" else (-1, -1)
    torch.library.opcheck(torch.ops.fmha_jit.fwd.default,
                          (q, k, v, layout, mask, *window, None, False))
    out, lse = torch.ops.fmha_jit.fwd(q, k, v, layout, mask, *window, None, False)
    dout = torch.randn_like(out)
    # The backward has no derivative of its own (no double backward): its inputs need no grad.
    torch.library.opcheck(torch.ops.fmha_jit.bwd.default,
                          (dout, q.detach(), k.detach(), v.detach(), out.detach(), lse, layout,
                           mask, *window, None, True))


def test_compile_fullgraph_block():
    torch.manual_seed(0)
    model = LlamaBlock(fmha_jit.scaled_dot_product_attention).cuda().to(torch.bfloat16)
    reference = LlamaBlock(F.scaled_dot_product_attention).cuda().to(torch.bfloat16)
    reference.load_state_dict(model.state_dict())
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    compiled = torch.compile(model, fullgraph=True)
    x = randn(2, 256, 512, grad=True)
    x_ref = x.detach().clone().requires_grad_()
    for _ in range(2):  # the second step runs the compiled graphs as they are
        out = compiled(x)
        out.float().square().mean().backward()
    assert dict(torch._dynamo.utils.counters["graph_break"]) == {}
    out_ref = reference(x_ref)
    out_ref.float().square().mean().backward()
    assert (out.float() - out_ref.float()).abs().max().item() < 5e-2
    grad_scale = x_ref.grad.float().abs().max().item()
    # Two steps accumulated into x.grad against one into x_ref.grad.
    assert (x.grad.float() / 2 - x_ref.grad.float()).abs().max().item() < 5e-2 * grad_scale + 1e-3
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name


def eager_step(q, k, v, dout, causal):
    out = fmha_jit.flash_attn_func(q, k, v, causal=causal, deterministic=True)
    return (out, *torch.autograd.grad(out, (q, k, v), dout))


@pytest.mark.parametrize("causal, shape", [(False, (4, 1024, 16, 128)), (True, (2, 700, 8, 64))])
def test_cuda_graph_capture_and_replay(causal, shape):
    b, s, h, d = shape
    q, k, v = randn(b, s, h, d, grad=True), randn(b, s, 4, d, grad=True), randn(b, s, 4, d, grad=True)
    dout = randn(b, s, h, d)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            eager_step(q, k, v, dout, causal)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = eager_step(q, k, v, dout, causal)
    for seed in range(3):
        torch.manual_seed(seed)
        with torch.no_grad():
            for t in (q, k, v, dout):
                t.copy_(torch.randn_like(t))
        graph.replay()
        expected = eager_step(q, k, v, dout, causal)
        for got, want in zip(captured, expected):
            assert torch.equal(got, want)


def test_forward_workspace_comes_from_torch_in_a_graph():
    # A shape whose Hopper forward splits its last wave uses a zero-filled workspace: inside a
    # graph it must come from torch's allocator (the runner's own would be allocated mid-capture).
    # 64 query tiles x 32 heads: 2048 tiles, 15 whole rounds on 132 SMs and a split one.
    dims = (True, 1, 32, 32, 8192, 8192, 128, 128, None, -1, -1)
    entry = kernels.kernel_for(torch.cuda.current_device(), "fwd", torch.bfloat16, 128, 128,
                               "none", False)
    if entry.shape(dims)[1] == 0:
        pytest.skip("this GPU runs the shape without a split tail")
    q, k, v = randn(1, 8192, 32, 128), randn(1, 8192, 32, 128), randn(1, 8192, 32, 128)
    fmha_jit.flash_attn_func(q, k, v)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fmha_jit.flash_attn_func(q, k, v)
    for _ in range(3):
        graph.replay()
        assert torch.equal(out, fmha_jit.flash_attn_func(q, k, v))


def test_causal_shape_first_seen_inside_a_capture():
    # The Hopper causal forward's tile plan is uploaded on a shape's first eager call; a shape
    # first seen inside a capture runs the static order instead, with the same results.
    q, k, v = randn(3, 333, 8, 128), randn(3, 333, 8, 128), randn(3, 333, 8, 128)
    graph = torch.cuda.CUDAGraph()
    fmha_jit.flash_attn_func(q[:, :100], k[:, :100], v[:, :100], causal=True)  # module loaded
    with torch.cuda.graph(graph):
        out = fmha_jit.flash_attn_func(q, k, v, causal=True)
    graph.replay()
    assert torch.equal(out, fmha_jit.flash_attn_func(q, k, v, causal=True))


def test_runs_on_the_current_stream():
    q, k, v = randn(2, 2048, 16, 128), randn(2, 2048, 16, 128), randn(2, 2048, 16, 128)
    expected = fmha_jit.flash_attn_func(q, k, v, causal=True)
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)  # the kernel must queue behind this, on `side`
        out = fmha_jit.flash_attn_func(q, k, v, causal=True)
        done = torch.cuda.Event()
        done.record(side)
    assert not done.query()  # still queued behind the sleep: it went to `side`
    side.synchronize()
    assert torch.equal(out, expected)


def test_strided_inputs_are_read_in_place():
    qkv = randn(2, 300, 3, 8, 64)  # one projection, split as (q, k, v) views
    q, k, v = qkv.unbind(2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no copy, so no warning
        out = fmha_jit.flash_attn_func(q, k, v, causal=True)
    assert torch.equal(out, fmha_jit.flash_attn_func(q.contiguous(), k.contiguous(),
                                                     v.contiguous(), causal=True))


def test_misaligned_input_is_copied_with_a_warning():
    flat = randn(2 * 300 * 8 * 64 + 1)
    q = flat[1:].view(2, 300, 8, 64)  # base 2 bytes past an aligned address
    with pytest.warns(UserWarning, match="q .* is copied to a contiguous tensor"):
        out = fmha_jit.flash_attn_func(q, q, q)
    assert torch.equal(out, fmha_jit.flash_attn_func(q.clone(), q.clone(), q.clone()))


def test_out_is_written_in_place():
    q, k, v = randn(2, 300, 8, 64), randn(2, 300, 2, 64), randn(2, 300, 2, 64)
    expected = fmha_jit.flash_attn_func(q, k, v, causal=True)
    out = torch.full_like(q, float("nan"))
    assert fmha_jit.flash_attn_func(q, k, v, causal=True, out=out) is out
    assert torch.equal(out, expected)
    wide = torch.zeros(2, 300, 8, 72, device="cuda", dtype=torch.bfloat16)
    view = wide[..., :64]  # rows of 144 bytes: 16-byte aligned, read in place
    fmha_jit.flash_attn_func(q, k, v, causal=True, out=view)
    assert torch.equal(view, expected) and not wide[..., 64:].any()
    with pytest.raises(ValueError, match=r"out is \(2, 300, 8, 64\) torch.float16"):
        fmha_jit.flash_attn_func(q, k, v, out=torch.empty_like(q, dtype=torch.float16))
    with pytest.raises(ValueError, match=r"out has strides"):
        fmha_jit.flash_attn_func(q, k, v, out=torch.empty(2, 300, 8, 128, device="cuda",
                                                         dtype=torch.bfloat16)[..., ::2])
