#!/usr/bin/env python3
"""fmha-jit against torch's cuDNN SDPA on a few rows, alternating ours and theirs within one
process, so that a row's ratio is several paired draws instead of the grid's one.

A grid run measures every row of ours, then every row of torch, minutes apart; on the H100,
cuDNN's backward moved 4-8 % between two calls on the same shapes (BENCHMARKS.md, session 30)
while ours moved 1-2 %, so a row within 3 % of 1.0 reads either side of it. Here each round
runs `fmha-jit bench --json` (a subprocess; kernels from the kernel cache) and then cuDNN in this
process, `--rounds` times per row; the table gives each side's median and the ratio of medians.

Rows: family,hdim,seqlen,batch,hq,hk,mask (mask none or causal), e.g.
  python3 tools/bench/interleave_vs_cudnn.py --fmha-jit .carry/bin/fmha-jit \\
      --row bwd,128,2048,8,16,16,none --row bwd,128,16384,1,32,8,causal --rounds 3
TFLOP/s in the FlashAttention convention (as anchor_sdpa.py): fwd = 4 B Hq S^2 D, halved when
causal; bwd = 2.5 x fwd.
"""
import argparse, json, statistics, subprocess, sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from anchor_gqa import median_ms  # CUDA events, median of reps after warmup, as the anchors

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def ours(binary, dtype, fam, d, s, b, hq, hk, mask, reps, warmup):
    cmd = [binary, "bench", "--dtype", dtype, "--family", fam, "--hdim-q", str(d), "--seqlen-q",
           str(s), "--batch", str(b), "--nhead-q", str(hq), "--nhead-k", str(hk), "--mask",
           "causal_top_left" if mask == "causal" else "none", "--repeat", str(reps), "--warmup",
           str(warmup), "--json"]
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out)[0]["tflops"]


def cudnn(dtype, fam, d, s, b, hq, hk, mask, reps, warmup):
    mk = lambda h: torch.randn(b, h, s, d, device="cuda", dtype=DTYPES[dtype])
    q, k, v, do = mk(hq).requires_grad_(), mk(hk).requires_grad_(), mk(hk).requires_grad_(), mk(hq)
    causal = mask == "causal"
    flops = 4 * b * hq * s * s * d / (2 if causal else 1) * (2.5 if fam == "bwd" else 1)
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        fwd = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                     enable_gqa=hq != hk)
        o = fwd()
        fn = fwd if fam == "fwd" else (
            lambda: torch.autograd.grad(o, (q, k, v), do, retain_graph=True))
        return flops / median_ms(fn, reps, warmup) / 1e9


def parse_row(spec):
    """--row family,hdim,seqlen,batch,hq,hk,mask -> (spec, (family, ints..., mask)); argparse
    reports a bad one with the value and what is accepted."""
    parts = spec.split(",")
    ok = (len(parts) == 7 and parts[0] in ("fwd", "bwd") and parts[6] in ("none", "causal")
          and all(x.isdigit() and int(x) > 0 for x in parts[1:6]))
    if not ok:
        raise argparse.ArgumentTypeError(
            f"--row {spec!r}: expected family,hdim,seqlen,batch,hq,hk,mask with family fwd or "
            "bwd, positive integers, mask none or causal (e.g. bwd,128,2048,8,16,16,none)")
    return spec, (parts[0], *map(int, parts[1:6]), parts[6])


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--fmha-jit", required=True)
    p.add_argument("--row", action="append", required=True, type=parse_row,
                   help="family,hdim,seqlen,batch,hq,hk,mask")
    p.add_argument("--dtype", default="bf16", choices=list(DTYPES))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--json", help="also write every draw to this file")
    a = p.parse_args()
    print(f"# torch {torch.__version__}, {torch.cuda.get_device_name()}, "
          f"cuDNN {torch.backends.cudnn.version()}", flush=True)
    print("| row | ours (each round) | cuDNN (each round) | ours / cuDNN (medians) |")
    print("|---|---|---|---|")
    rows = []
    for spec, row in a.row:
        args = (a.dtype, *row)
        mine, theirs = [], []
        try:
            for _ in range(a.rounds):
                mine.append(ours(a.fmha_jit, *args, a.reps, a.warmup))
                theirs.append(cudnn(*args, a.reps, a.warmup))
                torch.cuda.empty_cache()
        except Exception as e:  # one failed row (a shape cuDNN refuses) keeps the others
            print(f"| {spec} | error: {str(e).splitlines()[0][:160]} | | |", flush=True)
            continue
        r = statistics.median(mine) / statistics.median(theirs)
        rows.append(dict(row=spec, dtype=a.dtype, ours=mine, cudnn=theirs, ratio=r))
        print(f"| {spec} | {' / '.join(f'{x:.1f}' for x in mine)} | "
              f"{' / '.join(f'{x:.1f}' for x in theirs)} | {r:.3f} |", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
