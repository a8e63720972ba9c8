"""Packed batches, sinks and softcap on the GPU, by FlashAttention's accuracy rule (as
test_gpu_attention.py applies it): the error of out / dq / dk / dv / d_sinks against the fp32
reference is at most twice that of the same attention computed by plain torch in the inputs'
dtype, plus 1e-5. flash_attn_varlen_func is checked one sequence at a time against the reference
(reference.varlen_attention), with sequences of length 0, 1, 17 and 1000 and unequal query and
key lengths; flash_attn_func and scaled_dot_product_attention with sinks and softcap against the
dense reference. Also: the deterministic backward bit-identical over 10 runs, check_seqlens, bad
cu_seqlens left unchecked, opcheck and a fullgraph torch.compile."""

import pytest
import torch

import fmha_jit
from gpu_setup import warm_cache
from reference import attention, max_error, varlen_attention

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module", autouse=True)
def kernels_built():
    warm_cache()


# (query length, key length) per sequence: empty sequences on either side, one token, odd and
# long lengths, more queries than keys (causal rows that see no key) and the reverse.
LENGTHS = [(17, 33), (0, 5), (1, 1), (1000, 700), (64, 0), (3, 200), (129, 129), (0, 0), (250, 17)]


def cumulative(lengths):
    out = [0]
    for n in lengths:
        out.append(out[-1] + n)
    return out


def packed_inputs(dtype, hdim, lengths, hq, hk, with_sinks=False, seed=0):
    torch.manual_seed(seed)
    cu_q = cumulative([a for a, _ in lengths])
    cu_k = cumulative([b for _, b in lengths])

    def make(total, heads):
        return torch.randn(total, heads, hdim, device="cuda", dtype=dtype, requires_grad=True)

    q, k, v = make(cu_q[-1], hq), make(cu_k[-1], hk), make(cu_k[-1], hk)
    sinks = None
    if with_sinks:
        # Logits around the scores' own range, so that the sink takes a real share of each row.
        sinks = (torch.randn(hq, device="cuda") * 2).requires_grad_()
    return q, k, v, cu_q, cu_k, sinks


def window_mask(causal, window):
    left, right = window
    if causal:
        right = 0
    if left < 0 and right < 0:
        return "none", -1, -1
    if left < 0 and right == 0:
        return "causal_bottom_right", -1, -1
    return "sliding_window", left, right


def assert_close(name, got, ref, low):
    """FlashAttention's rule: |got - ref| <= 2 |low - ref| + 1e-5, `low` the inputs' dtype."""
    assert got.shape == ref.shape, name
    assert max_error(got, ref) <= 2 * max_error(low, ref) + 1e-5, name


def check_lse(lse, ref_lse):
    seen = torch.isfinite(ref_lse)
    assert torch.equal(torch.isfinite(lse), seen)  # -inf exactly where a row sees no key
    assert max_error(lse[seen], ref_lse[seen]) <= 1e-3


def check_varlen(dtype, hdim, lengths, hq, hk, causal=False, window=(-1, -1), softcap=0.0,
                 with_sinks=False, deterministic=False, scale=None):
    q, k, v, cu_q, cu_k, sinks = packed_inputs(dtype, hdim, lengths, hq, hk, with_sinks)
    cu_q_dev = torch.tensor(cu_q, dtype=torch.int32, device="cuda")
    cu_k_dev = torch.tensor(cu_k, dtype=torch.int32, device="cuda")
    max_q = max(max(a for a, _ in lengths), 1)
    max_k = max(max(b for _, b in lengths), 1)
    out, lse, probs = fmha_jit.flash_attn_varlen_func(
        q, k, v, cu_q_dev, cu_k_dev, max_q, max_k, softmax_scale=scale, causal=causal,
        window_size=window, softcap=softcap, deterministic=deterministic, return_attn_probs=True,
        sinks=sinks, check_seqlens=True)
    assert probs is None
    assert out.shape == (cu_q[-1], hq, v.shape[-1]) and out.dtype == dtype
    assert lse.shape == (hq, cu_q[-1]) and lse.dtype == torch.float32
    inputs = (q, k, v) + ((sinks,) if sinks is not None else ())
    dout = torch.randn_like(out)
    grads = torch.autograd.grad(out, inputs, dout)
    mask, left, right = window_mask(causal, window)
    ref_out, ref_lse = varlen_attention(q, k, v, cu_q, cu_k, mask, left, right, scale,
                                        sinks=sinks, softcap=softcap)
    ref_grads = torch.autograd.grad(ref_out, inputs, dout.float())
    low_out, _ = varlen_attention(q, k, v, cu_q, cu_k, mask, left, right, scale, dtype=dtype,
                                  sinks=sinks, softcap=softcap)
    low_grads = torch.autograd.grad(low_out, inputs, dout)
    assert_close("out", out, ref_out, low_out)
    for name, g, r, p in zip(("dq", "dk", "dv", "d_sinks"), grads, ref_grads, low_grads):
        assert g.dtype == (torch.float32 if name == "d_sinks" else dtype), name
        assert_close(name, g, r, p)
    check_lse(lse, ref_lse)
    return out, grads


@pytest.mark.parametrize("causal, window", [(False, (-1, -1)), (True, (-1, -1)), (False, (40, 7))])
@pytest.mark.parametrize("hdim", [64, 128])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_varlen(dtype, hdim, causal, window):
    check_varlen(dtype, hdim, LENGTHS, 6, 2, causal, window)


@pytest.mark.parametrize("hk", [8, 1])
def test_varlen_heads(hk):
    check_varlen(torch.bfloat16, 128, LENGTHS, 8, hk, causal=True)


def test_varlen_softmax_scale_and_one_sequence():
    check_varlen(torch.bfloat16, 128, [(300, 300)], 4, 4, causal=True, scale=0.3)
    check_varlen(torch.float16, 64, [(1, 1)], 2, 1)


@pytest.mark.parametrize("with_sinks, softcap", [(True, 0.0), (False, 5.0), (True, 5.0)])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_varlen_sinks_and_softcap(dtype, with_sinks, softcap):
    check_varlen(dtype, 128, LENGTHS, 6, 2, causal=True, softcap=softcap, with_sinks=with_sinks)


def test_varlen_sinks_and_softcap_in_a_window():
    check_varlen(torch.bfloat16, 64, LENGTHS, 4, 2, window=(40, 7), softcap=2.0, with_sinks=True)


def test_varlen_deterministic_backward_is_bit_identical():
    lengths = [(1000, 1000), (17, 700), (0, 3), (513, 64)]
    first_out, first = check_varlen(torch.bfloat16, 128, lengths, 8, 2, causal=True,
                                    with_sinks=True, deterministic=True)
    for _ in range(9):
        out, grads = check_varlen(torch.bfloat16, 128, lengths, 8, 2, causal=True,
                                  with_sinks=True, deterministic=True)
        assert torch.equal(out, first_out)
        for g, f in zip(grads, first):
            assert torch.equal(g, f)


def test_varlen_inference_runs_the_kernel_without_lse_with_the_same_output():
    q, k, v, cu_q, cu_k, _ = packed_inputs(torch.bfloat16, 128, LENGTHS, 8, 2)
    q, k, v = q.detach(), k.detach(), v.detach()
    cu_q = torch.tensor(cu_q, dtype=torch.int32, device="cuda")
    cu_k = torch.tensor(cu_k, dtype=torch.int32, device="cuda")
    with torch.no_grad():
        plain = fmha_jit.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 1000, 700, causal=True)
    out, lse, _ = fmha_jit.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 1000, 700, causal=True,
                                                  return_attn_probs=True)
    assert lse is not None and torch.equal(plain, out)
    written = torch.full_like(out, float("nan"))
    assert fmha_jit.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 1000, 700, causal=True,
                                           out=written) is written
    assert torch.equal(written, out)


def test_varlen_matches_the_dense_call_per_sequence():
    # One sequence of a packed batch and the same tensors as a dense batch of one: same attention.
    q, k, v, cu_q, cu_k, sinks = packed_inputs(torch.bfloat16, 64, [(77, 150), (200, 90)], 4, 2,
                                               with_sinks=True)
    cu_q_dev = torch.tensor(cu_q, dtype=torch.int32, device="cuda")
    cu_k_dev = torch.tensor(cu_k, dtype=torch.int32, device="cuda")
    with torch.no_grad():
        out = fmha_jit.flash_attn_varlen_func(q, k, v, cu_q_dev, cu_k_dev, 200, 150, causal=True,
                                              softcap=3.0, sinks=sinks)
        for b in range(2):
            qs, ks, vs = (t[None, c[b]:c[b + 1]] for t, c in ((q, cu_q), (k, cu_k), (v, cu_k)))
            dense = fmha_jit.flash_attn_func(qs, ks, vs, causal=True, softcap=3.0, sinks=sinks)
            got = out[cu_q[b]:cu_q[b + 1]]
            ref, _ = attention(qs, ks, vs, "bshd", "causal_bottom_right", sinks=sinks,
                               softcap=3.0)
            low, _ = attention(qs, ks, vs, "bshd", "causal_bottom_right", sinks=sinks,
                               softcap=3.0, dtype=torch.bfloat16)
            assert_close("dense", dense[0], ref[0], low[0])
            assert_close("packed", got, ref[0], low[0])


def test_batches_without_tokens():
    # No key token: every row sees none (out 0, LSE the sink); no query token: empty outputs.
    # torch gives empty tensors no address, so nothing is launched; the gradients are 0.
    q, k, v, cu_q, cu_k, sinks = packed_inputs(torch.bfloat16, 64, [(5, 0), (3, 0)], 4, 2,
                                               with_sinks=True)
    cu_q = torch.tensor(cu_q, dtype=torch.int32, device="cuda")
    cu_k = torch.tensor(cu_k, dtype=torch.int32, device="cuda")
    out, lse, _ = fmha_jit.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 5, 1, sinks=sinks,
                                                  return_attn_probs=True)
    assert out.shape == (8, 4, 64) and not out.any()
    assert torch.equal(lse, sinks.detach()[:, None].expand(4, 8))
    dq, d_sinks = torch.autograd.grad(out, (q, sinks), torch.randn_like(out))
    assert not dq.any() and not d_sinks.any()
    q, k, v, cu_q, cu_k, _ = packed_inputs(torch.bfloat16, 64, [(0, 4)], 4, 2)
    cu_q = torch.tensor(cu_q, dtype=torch.int32, device="cuda")
    cu_k = torch.tensor(cu_k, dtype=torch.int32, device="cuda")
    out = fmha_jit.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 1, 4)
    assert out.shape == (0, 4, 64)


@pytest.mark.parametrize("api", ["flash", "sdpa"])
@pytest.mark.parametrize("with_sinks, softcap", [(True, 0.0), (False, 5.0), (True, 5.0)])
def test_dense_sinks_and_softcap(api, with_sinks, softcap):
    torch.manual_seed(0)
    hq, hk = 6, 2
    layout = "bshd" if api == "flash" else "bhsd"

    def make(s, h):
        shape = (2, s, h, 128) if layout == "bshd" else (2, h, s, 128)
        return torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True)

    q, k, v = make(203, hq), make(113, hk), make(113, hk)
    sinks = (torch.randn(hq, device="cuda") * 2).requires_grad_() if with_sinks else None
    if api == "flash":
        out = fmha_jit.flash_attn_func(q, k, v, causal=True, sinks=sinks, softcap=softcap)
        mask = "causal_bottom_right"
    else:
        out = fmha_jit.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True,
                                                    sinks=sinks, softcap=softcap)
        mask = "causal_top_left"
    inputs = (q, k, v) + ((sinks,) if sinks is not None else ())
    dout = torch.randn_like(out)
    grads = torch.autograd.grad(out, inputs, dout)
    ref, _ = attention(q, k, v, layout, mask, sinks=sinks, softcap=softcap)
    ref_grads = torch.autograd.grad(ref, inputs, dout.float())
    low, _ = attention(q, k, v, layout, mask, sinks=sinks, softcap=softcap, dtype=torch.bfloat16)
    low_grads = torch.autograd.grad(low, inputs, dout)
    assert_close("out", out, ref, low)
    for name, g, r, p in zip(("dq", "dk", "dv", "d_sinks"), grads, ref_grads, low_grads):
        assert_close(name, g, r, p)


def test_check_seqlens_names_the_bad_entry():
    q = torch.randn(20, 4, 64, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(30, 2, 64, device="cuda", dtype=torch.bfloat16)

    def call(cu_q, cu_k, max_q=20, max_k=30):
        cu_q = torch.tensor(cu_q, dtype=torch.int32, device="cuda")
        cu_k = torch.tensor(cu_k, dtype=torch.int32, device="cuda")
        return fmha_jit.flash_attn_varlen_func(q, k, k, cu_q, cu_k, max_q, max_k,
                                               check_seqlens=True)

    call([0, 10, 20], [0, 0, 30])
    with pytest.raises(ValueError, match=r"cu_seqlens_q\[0\] = 1"):
        call([1, 10, 20], [0, 15, 30])
    with pytest.raises(ValueError, match=r"cu_seqlens_q\[2\] = 5"):
        call([0, 10, 5], [0, 15, 30])
    with pytest.raises(ValueError, match=r"cu_seqlens_k\[2\] = 29 .*30"):
        call([0, 10, 20], [0, 15, 29])
    with pytest.raises(ValueError, match=r"cu_seqlens_k\[1\] = 25 .*max seqlen 16"):
        call([0, 10, 20], [0, 25, 30], max_k=16)


def test_unchecked_bad_seqlens_write_nothing_outside_the_tensors():
    # Without check_seqlens the entries are not read on the host. A sequence whose entries run
    # past the tensors, decrease or exceed max_seqlen is left unwritten; the others are right,
    # and nothing past the output is touched.
    q, k, v, cu_q, cu_k, _ = packed_inputs(torch.bfloat16, 64, [(40, 50), (30, 20), (25, 25)], 4,
                                           2)
    q, k, v = q.detach(), k.detach(), v.detach()
    good_q = torch.tensor(cu_q, dtype=torch.int32, device="cuda")
    good_k = torch.tensor(cu_k, dtype=torch.int32, device="cuda")
    expected = fmha_jit.flash_attn_varlen_func(q, k, v, good_q, good_k, 40, 50)
    total = cu_q[-1]  # 95: sequences at rows 0..40, 40..70, 70..95
    # (cu_seqlens_q, max_seqlen_q, rows of the well-formed sequences, rows left unwritten)
    cases = [([0, 40, 70, 500], 40, slice(0, 70), slice(70, 95)),   # past the tensors
             ([0, 40, 30, 95], 40, slice(0, 40), slice(40, 95)),    # decreasing, then too long
             (cu_q, 35, slice(40, 95), slice(0, 40))]               # longer than max_seqlen_q
    for bad_q, max_q, good, unwritten in cases:
        buffer = torch.full((total + 64, 4, 64), 7.0, device="cuda", dtype=torch.bfloat16)
        out = buffer[:total]
        fmha_jit.flash_attn_varlen_func(
            q, k, v, torch.tensor(bad_q, dtype=torch.int32, device="cuda"), good_k, max_q, 50,
            out=out)
        torch.cuda.synchronize()
        assert (buffer[total:] == 7.0).all(), bad_q
        assert (out[unwritten] == 7.0).all(), bad_q
        assert torch.equal(out[good], expected[good]), bad_q


def test_opcheck():
    q, k, v, cu_q, cu_k, sinks = packed_inputs(torch.bfloat16, 64, [(17, 33), (0, 5), (90, 90)],
                                               4, 2, with_sinks=True)
    cu_q = torch.tensor(cu_q, dtype=torch.int32, device="cuda")
    cu_k = torch.tensor(cu_k, dtype=torch.int32, device="cuda")
    args = (q, k, v, "bshd", "causal_bottom_right", -1, -1, None, False, cu_q, cu_k, 90, 90,
            sinks, 4.0)
    torch.library.opcheck(torch.ops.fmha_jit.fwd.default, args)
    out, lse = torch.ops.fmha_jit.fwd(*args)
    dout = torch.randn_like(out)
    torch.library.opcheck(torch.ops.fmha_jit.bwd.default,
                          (dout, q.detach(), k.detach(), v.detach(), out.detach(), lse, "bshd",
                           "causal_bottom_right", -1, -1, None, True, cu_q, cu_k, 90, 90,
                           sinks.detach(), 4.0))


def test_compile_fullgraph_varlen_with_sinks():
    q, k, v, cu_q, cu_k, sinks = packed_inputs(torch.bfloat16, 128, LENGTHS, 8, 2,
                                               with_sinks=True)
    cu_q = torch.tensor(cu_q, dtype=torch.int32, device="cuda")
    cu_k = torch.tensor(cu_k, dtype=torch.int32, device="cuda")

    def step(q, k, v, sinks):
        out = fmha_jit.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 1000, 700, causal=True,
                                              softcap=5.0, sinks=sinks, deterministic=True)
        return out.float().square().sum()

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    compiled = torch.compile(step, fullgraph=True)
    loss = compiled(q, k, v, sinks)
    grads = torch.autograd.grad(loss, (q, k, v, sinks))
    assert dict(torch._dynamo.utils.counters["graph_break"]) == {}
    eager_loss = step(q, k, v, sinks)
    eager = torch.autograd.grad(eager_loss, (q, k, v, sinks))
    # The same kernels; the compiled graph's own reductions (the loss) may round differently.
    torch.testing.assert_close(loss, eager_loss, rtol=1e-4, atol=1e-4)
    for g, e in zip(grads, eager):
        torch.testing.assert_close(g, e, rtol=1e-2, atol=1e-2)
