#!/usr/bin/env python3
"""PyTorch SDPA on grouped-query attention shapes (Hq query heads sharing Hk key/value heads).

../shared/tools/anchor_sdpa.py times equal head counts only; this measures the GQA rows of the
benchmark grid the same way (CUDA events, median of --reps after --warmup, FlashAttention FLOP
convention: fwd = 4*B*Hq*Sq*Sk*D, halved when causal; bwd = 2.5 x fwd), for each backend:
  native    F.scaled_dot_product_attention(..., enable_gqa=True), K/V of Hk heads;
  expanded  only where native is refused: K/V repeated to Hq heads first (what a caller does);
            the repeat is outside the timed region, its backward reduction inside.
A backend that refuses a shape says so in its row ("error"). Run it in the same device call as
`fmha-jit bench` so both share one machine state.

  python3 anchor_gqa.py --hdim 128 --nhead-q 32 --nhead-k 8 --seqlen 2048 8192 --json gqa.json
"""
import argparse, json, statistics, sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}


def median_ms(fn, reps, warmup):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def measure(backend, how, dtype, hdim, hq, hk, seqlen, causal, tokens, reps, warmup):
    batch = max(1, tokens // seqlen)
    g = torch.Generator(device="cuda").manual_seed(0)
    mk = lambda h: torch.randn(batch, h, seqlen, hdim, device="cuda", dtype=dtype, generator=g)
    q, k, v, do = mk(hq).requires_grad_(), mk(hk).requires_grad_(), mk(hk).requires_grad_(), mk(hq)
    fwd_flops = 4 * batch * hq * seqlen * seqlen * hdim / (2 if causal else 1)
    row = dict(backend=backend, how=how, dtype=str(dtype).split(".")[-1], batch=batch, nhead_q=hq,
               nhead_k=hk, hdim=hdim, seqlen=seqlen, causal=causal)
    try:
        with sdpa_kernel([BACKENDS[backend]]):
            if how == "native":
                fwd = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
                inputs = (q, k, v)
            else:
                ke = k.detach().repeat_interleave(hq // hk, dim=1).requires_grad_()
                ve = v.detach().repeat_interleave(hq // hk, dim=1).requires_grad_()
                fwd = lambda: F.scaled_dot_product_attention(q, ke, ve, is_causal=causal)
                inputs = (q, ke, ve)
            t_fwd = median_ms(fwd, reps, warmup)
            o = fwd()

            def bwd():
                dq, dk, dv = torch.autograd.grad(o, inputs, do, retain_graph=True)
                if how == "expanded":  # the head-group reduction a GQA caller must add
                    dk = dk.view(batch, hk, hq // hk, seqlen, hdim).sum(2)
                    dv = dv.view(batch, hk, hq // hk, seqlen, hdim).sum(2)
                return dq, dk, dv

            t_bwd = median_ms(bwd, reps, warmup)
    except Exception as e:  # noqa: BLE001 - a refusal is a result
        row["error"] = str(e).splitlines()[0][:160]
        return row
    row.update(fwd_ms=round(t_fwd, 4), bwd_ms=round(t_bwd, 4),
               fwd_tflops=round(fwd_flops / t_fwd / 1e9, 1),
               bwd_tflops=round(2.5 * fwd_flops / t_bwd / 1e9, 1))
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dtype", nargs="+", default=["bf16"], choices=["bf16", "fp16"])
    p.add_argument("--hdim", type=int, default=128)
    p.add_argument("--nhead-q", type=int, default=32)
    p.add_argument("--nhead-k", type=int, default=8)
    p.add_argument("--seqlen", nargs="+", type=int, default=[512, 2048, 8192, 16384])
    p.add_argument("--causal", default="both", choices=["no", "yes", "both"])
    p.add_argument("--tokens", type=int, default=16384, help="batch * seqlen")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--json", help="also write all rows to this file")
    a = p.parse_args()
    print(f"# torch {torch.__version__}, {torch.cuda.get_device_name()}", flush=True)
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16}
    causals = {"no": [False], "yes": [True], "both": [False, True]}[a.causal]
    rows = []
    for backend in BACKENDS:
        for dt in a.dtype:
            for seqlen in a.seqlen:
                for causal in causals:
                    args = (dtypes[dt], a.hdim, a.nhead_q, a.nhead_k, seqlen, causal, a.tokens, a.reps, a.warmup)
                    r = measure(backend, "native", *args)
                    if "error" in r:  # refused natively: what a caller would run instead
                        rows.append(r)
                        print(json.dumps(r), flush=True)
                        r = measure(backend, "expanded", *args)
                    rows.append(r)
                    print(json.dumps(r), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
