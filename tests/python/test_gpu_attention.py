"""Accuracy on the GPU, FlashAttention's rule: the error of out / dq / dk / dv against an fp32
reference is at most twice that of the same attention computed by plain torch in the inputs'
dtype (reference.py), plus 1e-5. Both layouts (flash_attn_func, scaled_dot_product_attention),
both dtypes, every mask, odd and unequal lengths, GQA and MQA; the deterministic backward is
bit-identical over five runs."""

import pytest
import torch

import fmha_jit
from gpu_setup import warm_cache
from reference import attention, max_error

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module", autouse=True)
def kernels_built():
    warm_cache()


def inputs(layout, dtype, hdim, sq, sk, hq, hk, seed=0):
    torch.manual_seed(seed)

    def make(s, h):
        shape = (2, s, h, hdim) if layout == "bshd" else (2, h, s, hdim)
        return torch.randn(shape, device="cuda", dtype=dtype, requires_grad=True)

    return make(sq, hq), make(sk, hk), make(sk, hk)


def call(api, q, k, v, causal, window, scale, deterministic):
    if api == "flash":
        return fmha_jit.flash_attn_func(q, k, v, softmax_scale=scale, causal=causal,
                                        window_size=window, deterministic=deterministic,
                                        return_lse=True)
    out = fmha_jit.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale,
                                                enable_gqa=q.shape[1] != k.shape[1])
    return out, None


def reference_mask(api, causal, window):
    if api == "sdpa":
        return ("causal_top_left" if causal else "none"), -1, -1
    left, right = window
    if causal:
        right = 0
    if left < 0 and right < 0:
        return "none", -1, -1
    if left < 0 and right == 0:
        return "causal_bottom_right", -1, -1
    return "sliding_window", left, right


def check(api, dtype, hdim, sq, sk, hq, hk, causal=False, window=(-1, -1), scale=None,
          deterministic=False):
    layout = "bshd" if api == "flash" else "bhsd"
    q, k, v = inputs(layout, dtype, hdim, sq, sk, hq, hk)
    out, lse = call(api, q, k, v, causal, window, scale, deterministic)
    dout = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), dout)
    mask, left, right = reference_mask(api, causal, window)
    ref_out, ref_lse = attention(q, k, v, layout, mask, left, right, scale)
    ref_grads = torch.autograd.grad(ref_out, (q, k, v), dout.float())
    pt_out, _ = attention(q, k, v, layout, mask, left, right, scale, dtype=dtype)
    pt_grads = torch.autograd.grad(pt_out, (q, k, v), dout)
    assert out.shape == ref_out.shape and out.dtype == dtype
    assert max_error(out, ref_out) <= 2 * max_error(pt_out, ref_out) + 1e-5
    for name, g, r, p in zip(("dq", "dk", "dv"), grads, ref_grads, pt_grads):
        assert g.shape == r.shape, name
        assert max_error(g, r) <= 2 * max_error(p, r) + 1e-5, name
    if lse is not None:
        seen = torch.isfinite(ref_lse)
        assert torch.equal(torch.isfinite(lse), seen)  # -inf exactly where a row sees no key
        assert max_error(lse[seen], ref_lse[seen]) <= 1e-3
    return out, grads


LENGTHS = [(113, 203), (203, 113), (256, 256)]


@pytest.mark.parametrize("sq, sk", LENGTHS)
@pytest.mark.parametrize("causal, window", [(False, (-1, -1)), (True, (-1, -1)), (False, (40, 7))])
@pytest.mark.parametrize("hdim", [64, 128])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_flash_attn_func(dtype, hdim, causal, window, sq, sk):
    check("flash", dtype, hdim, sq, sk, 6, 2, causal, window)


@pytest.mark.parametrize("sq, sk", LENGTHS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("hdim", [64, 128])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_scaled_dot_product_attention(dtype, hdim, causal, sq, sk):
    check("sdpa", dtype, hdim, sq, sk, 6, 2, causal)


@pytest.mark.parametrize("hdim", [32, 96, 192, 256])
def test_every_head_dim(hdim):
    check("flash", torch.bfloat16, hdim, 77, 150, 4, 1, causal=True)


@pytest.mark.parametrize("window, causal", [((17, 5), False), ((0, 0), False), ((32, -1), False),
                                            ((-1, 9), False), ((24, 99), True)])
def test_windows(window, causal):
    check("flash", torch.bfloat16, 64, 150, 150, 4, 4, causal, window)


@pytest.mark.parametrize("api", ["flash", "sdpa"])
def test_softmax_scale_and_heads(api):
    check(api, torch.bfloat16, 128, 65, 65, 4, 4, causal=True, scale=0.3)
    check(api, torch.float16, 64, 1, 1, 8, 1)  # MQA, one query and one key


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("hdim", [64, 128])
def test_deterministic_backward_is_bit_identical(hdim, causal):
    first_out, first = check("flash", torch.bfloat16, hdim, 1000, 1000, 8, 2, causal,
                             deterministic=True)
    for _ in range(4):
        out, grads = check("flash", torch.bfloat16, hdim, 1000, 1000, 8, 2, causal,
                           deterministic=True)
        assert torch.equal(out, first_out)
        for g, f in zip(grads, first):
            assert torch.equal(g, f)


def test_sdpa_follows_torch_deterministic_algorithms():
    torch.use_deterministic_algorithms(True)
    try:
        runs = [check("sdpa", torch.bfloat16, 128, 700, 700, 8, 2, causal=True)[1]
                for _ in range(3)]
    finally:
        torch.use_deterministic_algorithms(False)
    for grads in runs[1:]:
        for g, f in zip(grads, runs[0]):
            assert torch.equal(g, f)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_inference_runs_the_kernel_without_lse_with_the_same_output(dtype, causal):
    # Without grad and without return_lse the kernel that stores no LSE runs: same output bits.
    q, k, v = (t.detach() for t in inputs("bshd", dtype, 128, 300, 300, 8, 2))
    with torch.no_grad():
        plain = fmha_jit.flash_attn_func(q, k, v, causal=causal)
        sdpa = fmha_jit.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal,
            enable_gqa=True)
    out, lse = fmha_jit.flash_attn_func(q, k, v, causal=causal, return_lse=True)
    assert lse is not None and torch.equal(plain, out)
    # With equal lengths top-left (SDPA) and bottom-right (FlashAttention) causal agree.
    assert torch.equal(sdpa.transpose(1, 2), out)
