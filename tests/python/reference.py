"""Attention written out in plain torch for the GPU tests: the fp32 reference and, run in the
inputs' dtype, the low-precision baseline of FlashAttention's accuracy rule. It shares no code
with the kernels (masks by explicit index comparison, GQA by repeating key heads)."""

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


def attention(q, k, v, layout, mask, window_left=-1, window_right=-1, scale=None, dtype=None):
    """(out, lse) in `layout` ("bshd" or "bhsd"), computed in `dtype` (default fp32); a query that
    sees no key gets out 0 and lse -inf."""
    dtype = dtype or torch.float32
    if layout == "bshd":
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    scale = scale if scale is not None else q.shape[-1] ** -0.5
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale
    seen = visible(mask, q.shape[2], k.shape[2], window_left, window_right, q.device)
    scores = scores.masked_fill(~seen, float("-inf"))
    lse = torch.logsumexp(scores.float(), dim=-1)
    probs = torch.softmax(scores, dim=-1)
    probs = torch.where(seen.any(dim=-1, keepdim=True), probs, torch.zeros_like(probs))
    out = torch.matmul(probs, v)
    if layout == "bshd":
        out = out.transpose(1, 2)
    return out, lse


def max_error(a, b):
    return (a.float() - b.float()).abs().max().item()
