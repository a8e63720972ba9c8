"""A Llama-style transformer block whose attention is a drop-in of
torch.nn.functional.scaled_dot_product_attention: pass fmha_jit.scaled_dot_product_attention to
train with fmha-jit's kernels. Used by the package's tests (torch.compile, fullgraph) and by
tools/scripts/python_bench.py (a training step against SDPA's backends).

    import fmha_jit, torch
    block = LlamaBlock(fmha_jit.scaled_dot_product_attention).cuda().bfloat16()
    x = torch.randn(2, 4096, 2048, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    block(x).float().square().mean().backward()
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


def rotary(x: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding of x (batch, seqlen, heads, head_dim)."""
    s, d = x.shape[1], x.shape[-1]
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2, device=x.device).float() / d))
    angles = torch.outer(torch.arange(s, device=x.device).float(), inv)
    cos, sin = angles.cos()[None, :, None, :], angles.sin()[None, :, None, :]
    x1, x2 = x.float().chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).type_as(x)


class LlamaBlock(nn.Module):
    """RMSNorm, causal attention with rotary embeddings and grouped key/value heads, SwiGLU."""

    def __init__(self, attention=F.scaled_dot_product_attention, dim=512, heads=8, kv_heads=2,
                 hidden=None):
        super().__init__()
        self.attention, self.heads, self.kv_heads = attention, heads, kv_heads
        self.head_dim = dim // heads
        hidden = hidden or 256 * ((8 * dim // 3 + 255) // 256)
        self.norm1, self.norm2 = nn.RMSNorm(dim), nn.RMSNorm(dim)
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wkv = nn.Linear(dim, 2 * kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        self.w13 = nn.Linear(dim, 2 * hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        h = self.norm1(x)
        q = rotary(self.wq(h).view(b, s, self.heads, self.head_dim))
        k, v = self.wkv(h).view(b, s, 2, self.kv_heads, self.head_dim).unbind(2)
        k = rotary(k)
        # SDPA's layout: (batch, heads, seqlen, head_dim) views of (batch, seqlen, heads, dim).
        o = self.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                           is_causal=True, enable_gqa=self.kv_heads != self.heads)
        x = x + self.wo(o.transpose(1, 2).reshape(b, s, -1))
        gate, up = self.w13(self.norm2(x)).chunk(2, dim=-1)
        return x + self.w2(F.silu(gate) * up)
