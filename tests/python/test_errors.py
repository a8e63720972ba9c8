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


# --- flash_attn_varlen_func, sinks and softcap ---------------------------------------------------


def cu(n, dtype=torch.int32, device="cuda"):
    return torch.empty(n, dtype=dtype, device=device)


def varlen(q=None, k=None, v=None, cu_q=None, cu_k=None, max_q=64, max_k=64, **kwargs):
    q = t((100, 8, 64)) if q is None else q
    k = t((120, 2, 64)) if k is None else k
    v = k if v is None else v
    cu_q = cu(4) if cu_q is None else cu_q
    cu_k = cu(4) if cu_k is None else cu_k
    return fmha_jit.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max_q, max_k, **kwargs)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"q": lambda: t((1, 100, 8, 64))}, ValueError,
         r"q has shape \(1, 100, 8, 64\); accepted: 3 dims \(total_q, heads, head_dim\)"),
        ({"k": lambda: t((1, 120, 2, 64))}, ValueError,
         r"k has shape \(1, 120, 2, 64\); accepted: 3 dims \(total_k, heads, head_dim\)"),
        ({"v": lambda: t((121, 2, 64))}, ValueError,
         r"k has shape \(120, 2, 64\) and v \(121, 2, 64\); accepted: the same total_k and heads"),
        ({"k": lambda: t((120, 3, 64))}, ValueError,
         r"q has 8 heads and k 3; accepted: query heads a multiple of key heads"),
        ({"k": lambda: t((120, 2, 128))}, ValueError, r"k has head dim 128, q 64"),
        ({"q": lambda: t((100, 8, 64), torch.float32)}, ValueError, r"q has dtype torch.float32"),
        ({"cu_q": [0, 50, 100]}, TypeError, r"cu_seqlens_q must be a torch.Tensor, got list"),
        ({"cu_q": lambda: cu(4, torch.int64)}, ValueError,
         r"cu_seqlens_q has dtype torch.int64; accepted: torch.int32"),
        ({"cu_k": lambda: cu((2, 2))}, ValueError,
         r"cu_seqlens_k has shape \(2, 2\); accepted: 1 dim \(batch \+ 1,\), batch >= 1"),
        ({"cu_q": lambda: cu(1)}, ValueError, r"cu_seqlens_q has shape \(1,\); accepted: 1 dim"),
        ({"cu_k": lambda: cu(4, device="cpu")}, ValueError,
         r"cu_seqlens_k is on cpu, q on cuda:0; accepted: q's device"),
        ({"cu_k": lambda: cu(5)}, ValueError,
         r"cu_seqlens_k has 5 entries and cu_seqlens_q 4; accepted: the same number"),
        ({"max_q": 0}, ValueError, r"max_seqlen_q is 0; accepted: an int >= 1"),
        ({"max_k": -3}, ValueError, r"max_seqlen_k is -3; accepted: an int >= 1"),
        ({"max_q": 64.0}, TypeError, r"max_seqlen_q must be an int, got float"),
        ({"max_k": True}, TypeError, r"max_seqlen_k must be an int, got bool"),
        ({"dropout_p": 0.1}, ValueError, r"dropout_p is 0.1; accepted: 0.0 \(no dropout\)"),
        ({"alibi_slopes": lambda: t((8,), torch.float32)}, ValueError,
         r"alibi_slopes is a (Fake)?Tensor; accepted: None"),
        ({"softcap": -1.0}, ValueError,
         r"softcap is -1.0; accepted: a finite float > 0 \(the scores' cap\), or 0.0"),
        ({"softcap": float("inf")}, ValueError, r"softcap is inf; accepted"),
        ({"softcap": float("nan")}, ValueError, r"softcap is nan; accepted"),
        ({"softcap": "30"}, TypeError, r"softcap must be a float, got str"),
        ({"softmax_scale": 0.0}, ValueError, r"softmax_scale is 0.0"),
        ({"window_size": (-2, 0)}, ValueError, r"window_size is \(-2, 0\); accepted"),
        ({"sinks": lambda: t((8,))}, ValueError,
         r"sinks has dtype torch.bfloat16; accepted: torch.float32"),
        ({"sinks": lambda: t((2,), torch.float32)}, ValueError,
         r"sinks has shape \(2,\); accepted: \(8,\) \(one logit per query head\)"),
        ({"sinks": lambda: t((8,), torch.float32, "cpu")}, ValueError,
         r"sinks is on cpu, q on cuda:0; accepted: q's device"),
        ({"sinks": [0.0] * 8}, TypeError, r"sinks must be a torch.Tensor or None, got list"),
    ],
)
def test_flash_attn_varlen_func_rejects(kwargs, error, message):
    with FakeTensorMode():
        kwargs = {key: value() if callable(value) else value for key, value in kwargs.items()}
        with pytest.raises(error, match=message):
            varlen(**kwargs)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"softcap": -0.5}, ValueError, r"softcap is -0.5; accepted: a finite float > 0"),
        ({"softcap": None}, TypeError, r"softcap must be a float, got NoneType"),
        ({"sinks": lambda: t((2,), torch.float32)}, ValueError,
         r"sinks has shape \(2,\); accepted: \(4,\)"),
        ({"sinks": lambda: t((4,), torch.float16)}, ValueError, r"sinks has dtype torch.float16"),
    ],
)
def test_dense_calls_reject_sinks_and_softcap(kwargs, error, message):
    with FakeTensorMode():
        kwargs = {key: value() if callable(value) else value for key, value in kwargs.items()}
        q = t((1, 4, 4, 64))  # 4 heads in either layout
        with pytest.raises(error, match=message):
            fmha_jit.flash_attn_func(q, q, q, **kwargs)
        with pytest.raises(error, match=message):
            fmha_jit.scaled_dot_product_attention(q, q, q, **kwargs)


def test_unsupported_head_dim_of_a_packed_batch_is_the_library_error():
    with FakeTensorMode():
        q = t((100, 8, 100))
        with pytest.raises(fmha_jit.InvalidInputError, match="hdim_q = 100 is not supported"):
            varlen(q=q, k=q)


def test_out_with_autograd_of_the_sinks_is_refused():
    with FakeTensorMode():
        sinks = t((8,), torch.float32).requires_grad_()
        with pytest.raises(ValueError, match=r"out is given while q, k, v or sinks requires grad"):
            varlen(sinks=sinks, out=t((100, 8, 64)))


def test_out_of_a_packed_batch_is_checked():
    with FakeTensorMode():
        with pytest.raises(ValueError, match=r"out is \(100, 8, 32\) torch.bfloat16 on cuda:0; "
                                             r"accepted: \(100, 8, 64\)"):
            varlen(out=t((100, 8, 32)))


def host_seqlens(values):
    return torch.tensor(values, dtype=torch.int32)


@pytest.mark.parametrize(
    "cu_q, cu_k, max_q, max_k, message",
    [
        ([1, 10, 20], [0, 15, 30], 20, 30, r"cu_seqlens_q\[0\] = 1 .*accepted: 0"),
        ([0, 10, 5], [0, 15, 30], 20, 30,
         r"cu_seqlens_q\[2\] = 5 .*accepted: 10 \.\. 30 \(entries never decrease"),
        ([0, 10, 20], [0, 15, 29], 20, 30,
         r"cu_seqlens_k\[2\] = 29 .*accepted: 30 \(the last entry is the token count\)"),
        ([0, 10, 20], [0, 25, 30], 20, 16, r"cu_seqlens_k\[1\] = 25 .*max seqlen 16\)"),
        ([0, 10, 20], [-4, 15, 30], 20, 30, r"cu_seqlens_k\[0\] = -4"),
    ],
)
def test_check_seqlens_names_the_bad_entry(cu_q, cu_k, max_q, max_k, message):
    # check_seqlens=True copies the arrays to the host and has the library check them; here the
    # arrays are host tensors already (the copy to the host is then a no-op).
    from fmha_jit import interface

    interface._check_seqlen_values(host_seqlens([0, 10, 20]), host_seqlens([0, 15, 30]), 20, 30,
                                   20, 30)
    with pytest.raises(fmha_jit.InvalidInputError, match=message):
        interface._check_seqlen_values(host_seqlens(cu_q), host_seqlens(cu_k), 20, 30, max_q,
                                       max_k)


def test_check_seqlens_skips_fake_tensors():
    # Fake tensors hold no values: nothing to read, no error (the shapes are checked as always).
    with FakeTensorMode():
        out = varlen(check_seqlens=True)
        assert out.shape == (100, 8, 64)
