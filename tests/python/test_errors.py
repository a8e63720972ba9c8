"""Bad input raises before any kernel is set up, naming the argument, its value and what is
accepted. Fake CUDA tensors stand in for the GPU."""

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import fmha_jit


def t(shape, dtype=torch.bfloat16, device="cuda"):
    return torch.empty(*shape, dtype=dtype, device=device)


def test_cpu_tensor():
    q = torch.zeros(1, 8, 2, 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"q is on device 'cpu'; accepted: a CUDA device"):
        fmha_jit.flash_attn_func(q, q, q)
    with pytest.raises(ValueError, match=r"query is on device 'cpu'"):
        fmha_jit.scaled_dot_product_attention(q, q, q)


def test_not_a_tensor():
    with pytest.raises(TypeError, match="k must be a torch.Tensor, got list"):
        with FakeTensorMode():
            fmha_jit.flash_attn_func(t((1, 8, 2, 64)), [1], t((1, 8, 2, 64)))


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: (t((1, 8, 2, 64), torch.float32),) * 3,
         r"q has dtype torch.float32; accepted: torch.float16, torch.bfloat16"),
        (lambda: (t((1, 8, 2, 64)), t((1, 8, 2, 64), torch.float16), t((1, 8, 2, 64))),
         r"k has dtype torch.float16, q torch.bfloat16; accepted: one dtype"),
        (lambda: (t((8, 2, 64)),) * 3, r"q has shape \(8, 2, 64\); accepted: 4 dims"),
        (lambda: (t((1, 8, 3, 64)), t((1, 8, 2, 64)), t((1, 8, 2, 64))),
         r"q has 3 heads and k 2; accepted: query heads a multiple of key heads"),
        (lambda: (t((1, 8, 2, 64)), t((1, 8, 2, 64)), t((1, 9, 2, 64))),
         r"k has shape \(1, 8, 2, 64\) and v \(1, 9, 2, 64\)"),
        (lambda: (t((1, 8, 2, 64)), t((2, 8, 2, 64)), t((2, 8, 2, 64))),
         r"k has batch 2, q 1; accepted: the same batch"),
        (lambda: (t((1, 8, 2, 64)), t((1, 8, 2, 128)), t((1, 8, 2, 64))),
         r"k has head dim 128, q 64"),
        (lambda: (t((1, 8, 2, 100)),) * 3,
         r"hdim_q = 100 is not supported; accepted: 32, 64, 96, 128, 192, 256"),
    ],
)
def test_flash_attn_func_rejects(make, message):
    with FakeTensorMode():
        q, k, v = make()
        with pytest.raises(ValueError, match=message):
            fmha_jit.flash_attn_func(q, k, v)


def test_unsupported_head_dim_is_the_library_error():
    with FakeTensorMode():
        q = t((1, 8, 2, 100))
        with pytest.raises(fmha_jit.InvalidInputError, match="hdim_q"):
            fmha_jit.flash_attn_func(q, q, q)


@pytest.mark.skipif(torch.cuda.is_available() and torch.cuda.device_count() < 2,
                    reason="fake tensors of a second GPU need none, or two")
def test_devices_must_match():
    with FakeTensorMode():
        q = t((1, 8, 2, 64))
        k = t((1, 8, 2, 64), device="cuda:1")
        with pytest.raises(ValueError, match=r"k is on cuda:1, q on cuda:0; accepted: one device"):
            fmha_jit.flash_attn_func(q, k, k)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"softmax_scale": -1.0}, ValueError, r"softmax_scale is -1.0; accepted: a finite positive"),
        ({"softmax_scale": float("nan")}, ValueError, r"softmax_scale is nan"),
        ({"softmax_scale": "0.1"}, TypeError, r"softmax_scale must be a float or None, got str"),
        ({"window_size": (-2, 0)}, ValueError, r"window_size is \(-2, 0\); accepted"),
        ({"window_size": (3,)}, ValueError, r"window_size is \(3,\)"),
        ({"window_size": (1.5, 2)}, ValueError, r"window_size is \(1.5, 2\)"),
    ],
)
def test_flash_attn_func_rejects_options(kwargs, error, message):
    with FakeTensorMode():
        q = t((1, 8, 2, 64))
        with pytest.raises(error, match=message):
            fmha_jit.flash_attn_func(q, q, q, **kwargs)


def test_sdpa_rejects():
    with FakeTensorMode():
        q, k = t((1, 4, 8, 64)), t((1, 2, 8, 64))
        with pytest.raises(ValueError, match=r"query has 4 heads and key 2; .*enable_gqa=True"):
            fmha_jit.scaled_dot_product_attention(q, k, k)
        with pytest.raises(ValueError, match=r"attn_mask is a tensor; accepted: None"):
            fmha_jit.scaled_dot_product_attention(q, q, q, t((8, 8)))
        with pytest.raises(ValueError, match=r"dropout_p is 0.1; accepted: 0.0"):
            fmha_jit.scaled_dot_product_attention(q, q, q, dropout_p=0.1)
        with pytest.raises(ValueError, match=r"scale is 0.0"):
            fmha_jit.scaled_dot_product_attention(q, q, q, scale=0.0)


def test_out_with_autograd_is_refused():
    with FakeTensorMode():
        q = t((1, 8, 2, 64)).requires_grad_()
        with pytest.raises(ValueError, match=r"out is given while q, k or v requires grad"):
            fmha_jit.flash_attn_func(q, q, q, out=t((1, 8, 2, 64)))
