#!/usr/bin/env python3
"""End-to-end check of `fmha-jit run --inputs/--outputs` on the GPU machine: numpy inputs in bshd,
the kernel's o.npy / lse.npy compared with a float64 computation here (inputs rounded to bf16 as
the tool does). Usage: npy_roundtrip.py FMHA_JIT DIR"""
import subprocess, sys
import numpy as np
import torch

fmha, d = sys.argv[1], sys.argv[2]
B, S, H, D = 2, 100, 4, 64
rng = np.random.default_rng(0)
for name in ("q", "k", "v"):
    np.save(f"{d}/{name}.npy", rng.standard_normal((B, S, H, D)).astype(np.float32))
subprocess.run([fmha, "run", "--family", "fwd", "--dtype", "bf16", "--batch", str(B), "--nhead-q", str(H),
                "--seqlen-q", str(S), "--hdim-q", str(D), "--mask", "causal", "--layout", "bshd",
                "--inputs", d, "--outputs", d], check=True)
t = {n: torch.from_numpy(np.load(f"{d}/{n}.npy")).bfloat16().double().transpose(1, 2) for n in ("q", "k", "v")}
s = t["q"] @ t["k"].transpose(-1, -2) / D ** 0.5
s = s.masked_fill(torch.ones(S, S, dtype=torch.bool).triu(1), float("-inf"))
lse = torch.logsumexp(s, -1)
o = (torch.softmax(s, -1) @ t["v"]).transpose(1, 2)
o_err = (torch.from_numpy(np.load(f"{d}/o.npy")).double() - o).abs().max().item()
lse_err = (torch.from_numpy(np.load(f"{d}/lse.npy")).double() - lse).abs().max().item()
ok = o_err < 2e-2 and lse_err < 1e-3
print(f"npy round trip (bshd, causal, bf16): max|dO| {o_err:.3e}, max|dLSE| {lse_err:.3e} -> {'PASS' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
