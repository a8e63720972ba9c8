#!/usr/bin/env python3
"""One forward and one backward of PyTorch SDPA on one backend: a target for `ncu` (the kernels
run once after one warm-up, so a profiler filter on the kernel name picks a steady-state launch).

  ncu -k regex:flash_fwd --launch-skip 1 -c 1 python3 torch_sdpa_once.py --hdim 256 --seqlen 8192
"""
import argparse
import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend

ap = argparse.ArgumentParser()
ap.add_argument("--backend", default="flash", choices=["flash", "cudnn"])
ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"])
ap.add_argument("--hdim", type=int, default=128)
ap.add_argument("--seqlen", type=int, default=8192)
ap.add_argument("--causal", action="store_true")
ap.add_argument("--tokens", type=int, default=16384)
ap.add_argument("--model-dim", type=int, default=2048)
a = ap.parse_args()
B, H = max(1, a.tokens // a.seqlen), max(1, a.model_dim // a.hdim)
dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float16
mk = lambda: torch.randn(B, H, a.seqlen, a.hdim, device="cuda", dtype=dtype)
q, k, v, do = mk().requires_grad_(), mk().requires_grad_(), mk().requires_grad_(), mk()
backend = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}[a.backend]
with sdpa_kernel([backend]):
    for _ in range(2):  # warm-up, then the launch a profiler keeps
        o = F.scaled_dot_product_attention(q, k, v, is_causal=a.causal)
        torch.autograd.grad(o, (q, k, v), do)
torch.cuda.synchronize()
