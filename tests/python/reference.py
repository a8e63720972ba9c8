"""Attention written out in plain torch for the GPU tests: the fp32 reference and, run in the
inputs' dtype, the low-precision baseline of FlashAttention's accuracy rule. It shares no code
with the kernels (masks by explicit index comparison, GQA by repeating key heads, sinks as an
extra score column, packed batches one sequence at a time)."""

import torch


def visible(mask, sq, sk, window_left, window_right, device):
    i = torch.arange(sq, device=device)[:, None]
    j = torch.arange(sk, device=device)[None, :]
    diagonal = i + sk - sq  # the bottom-right diagonal
    if mask == "none":
        return torch.ones(sq, sk, dtype=torch.bool, device=device)
    if mask == "causal_top_left":
        return j <= i
    if mask == "causal_bottom_right":
        return j <= diagonal
    assert mask == "sliding_window"
    seen = torch.ones(sq, sk, dtype=torch.bool, device=device)
    if window_left >= 0:
        seen &= j >= diagonal - window_left
    if window_right >= 0:
        seen &= j <= diagonal + window_right
    return seen


def attention(q, k, v, layout, mask, window_left=-1, window_right=-1, scale=None, dtype=None,
              sinks=None, softcap=0.0):
    """(out, lse) in `layout` ("bshd" or "bhsd"), computed in `dtype` (default fp32); a query that
    sees no key gets out 0 and lse -inf, or with sinks the sink. softcap > 0 maps each scaled score
    s to softcap * tanh(s / softcap) before the mask; sinks (heads_q,) joins each row's softmax
    denominator as one more score with no value row."""
    dtype = dtype or torch.float32
    if layout == "bshd":
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    scale = scale if scale is not None else q.shape[-1] ** -0.5
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale
    if softcap > 0:
        scores = softcap * torch.tanh(scores / softcap)
    seen = visible(mask, q.shape[2], k.shape[2], window_left, window_right, q.device)
    scores = scores.masked_fill(~seen, float("-inf"))
    if sinks is not None:
        b, h, sq, _ = scores.shape
        column = sinks.to(dtype).view(1, h, 1, 1).expand(b, h, sq, 1)
        scores = torch.cat((scores, column), dim=-1)
        lse = torch.logsumexp(scores.float(), dim=-1)
        probs = torch.softmax(scores, dim=-1)[..., :-1]
    else:
        lse = torch.logsumexp(scores.float(), dim=-1)
        probs = torch.softmax(scores, dim=-1)
        probs = torch.where(seen.any(dim=-1, keepdim=True), probs, torch.zeros_like(probs))
    out = torch.matmul(probs, v)
    if layout == "bshd":
        out = out.transpose(1, 2)
    return out, lse


def varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k, mask, window_left=-1, window_right=-1,
                     scale=None, dtype=None, sinks=None, softcap=0.0):
    """attention() of a packed batch, one sequence at a time: q (total_q, heads_q, d), k and v
    (total_k, heads_k, d), cu_seqlens as lists of ints. Returns out (total_q, heads_q, d_v) and
    lse (heads_q, total_q); masks align to each sequence's own lengths."""
    outs, lses = [], []
    for b in range(len(cu_seqlens_q) - 1):
        q0, q1 = cu_seqlens_q[b], cu_seqlens_q[b + 1]
        k0, k1 = cu_seqlens_k[b], cu_seqlens_k[b + 1]
        out, lse = attention(q[None, q0:q1], k[None, k0:k1], v[None, k0:k1], "bshd", mask,
                             window_left, window_right, scale, dtype, sinks, softcap)
        outs.append(out[0])
        lses.append(lse[0])
    return torch.cat(outs), torch.cat(lses, dim=-1)


def max_error(a, b):
    return (a.float() - b.float()).abs().max().item()
