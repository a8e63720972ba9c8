#!/usr/bin/env python3
"""fmha-jit against torch's cuDNN SDPA on a few rows, the two sides alternating, so that a row's
ratio rests on several paired draws instead of one draw of each side minutes apart.

A benchmark table measures all of fmha-jit's rows, then all of torch's; on an H100 cuDNN's
backward has moved 4-8 % between two such runs on the same shapes while ours moved 1-2 %, so a
row within a few percent of 1.0 can read on either side of it. Here each round runs
`fmha-jit bench --json` (a subprocess, kernels from the kernel cache) and then cuDNN in this
process (torch_sdpa.py's timing), --rounds times per row; the table gives each side's draws and
the ratio of their medians.

Rows: family,hdim,seqlen,batch,hq,hk,mask (family fwd or bwd, mask none or causal), e.g.
  python3 tools/scripts/interleave_vs_cudnn.py --fmha-jit .carry/bin/fmha-jit \\
      --row bwd,128,2048,8,16,16,none --row bwd,128,16384,1,32,8,causal --rounds 3
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_sdpa  # noqa: E402  (beside this file, not an installed module)


def ours(binary, dtype, row, reps, warmup):
    fam, hdim, seqlen, batch, hq, hk, mask = row
    cmd = [binary, "bench", "--dtype", dtype, "--family", fam, "--hdim-q", str(hdim),
           "--seqlen-q", str(seqlen), "--batch", str(batch), "--nhead-q", str(hq), "--nhead-k",
           str(hk), "--mask", mask, "--repeat", str(reps), "--warmup", str(warmup), "--json"]
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out)[0]["tflops"]


def cudnn(dtype, row, reps, warmup):
    fam, hdim, seqlen, batch, hq, hk, mask = row
    p = torch_sdpa.problem({"family": fam, "dtype": dtype, "hdim": hdim, "seqlen": seqlen,
                            "batch": batch, "nhead_q": hq, "nhead_k": hk, "mask": mask})
    r = torch_sdpa.measure("cudnn", p, fam, reps, warmup)
    if "error" in r:
        raise RuntimeError(r["error"])
    return r["tflops"]


def parse_row(spec):
    """--row family,hdim,seqlen,batch,hq,hk,mask -> (spec, row); argparse reports a bad one with
    the value and what is accepted."""
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
    p.add_argument("--dtype", default="bf16", choices=list(torch_sdpa.DTYPES))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--json", help="also write every draw to this file")
    a = p.parse_args()
    print("| row | ours (each round) | cuDNN (each round) | ours / cuDNN (medians) |")
    print("|---|---|---|---|")
    rows = []
    for spec, row in a.row:
        mine, theirs = [], []
        try:
            for _ in range(a.rounds):
                mine.append(ours(a.fmha_jit, a.dtype, row, a.reps, a.warmup))
                theirs.append(cudnn(a.dtype, row, a.reps, a.warmup))
                torch.cuda.empty_cache()
        except (RuntimeError, subprocess.CalledProcessError, ValueError, KeyError) as e:
            # One failed row (a shape cuDNN refuses) keeps the others.
            rows.append(dict(row=spec, dtype=a.dtype, error=str(e).splitlines()[0][:200]))
            print(f"| {spec} | error: {rows[-1]['error']} | | |", flush=True)
        else:
            ratio = statistics.median(mine) / statistics.median(theirs)
            rows.append(dict(row=spec, dtype=a.dtype, ours=mine, cudnn=theirs, ratio=ratio))
            print(f"| {spec} | {' / '.join(f'{x:.1f}' for x in mine)} | "
                  f"{' / '.join(f'{x:.1f}' for x in theirs)} | {ratio:.3f} |", flush=True)
        if a.json:  # after every row: a caller that stops this early keeps the rows done
            with open(a.json, "w") as f:
                json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
