#!/usr/bin/env python3
"""PyTorch SDPA timed the way `fmha-jit bench` times fmha-jit's kernels, for side-by-side tables.

Each row runs F.scaled_dot_product_attention with one backend forced through
torch.nn.attention.sdpa_kernel: flash (FlashAttention-2, torch's own build) or cudnn. A row is
timed with CUDA events around each of --reps calls after --warmup untimed ones, all queued before
the first is read; the row reports the median. The forward runs with inputs that require grad
(the training forward, which keeps the log-sum-exp, as fmha-jit's forward does when it writes its
LSE); the backward is one torch.autograd.grad over q, k, v, so it includes every kernel the
backend launches for it. Grouped-query rows (nhead_k < nhead_q) pass enable_gqa=True.

Deterministic rows (sweep key "deterministic": true) time the backward under
torch.use_deterministic_algorithms(True), which makes flash run FlashAttention-2's deterministic
dQ accumulation; they run on flash only, since torch makes no such promise for cuDNN's backward.
Uninitialised-memory filling, which the deterministic setting also turns on, is kept off so that
the timed region holds the attention kernels only. Every backward row also says whether two
backward calls gave bit-identical dQ.

TFLOP/s follow FlashAttention's convention: fwd = 4 * B * Hq * Sq * Sk * D, halved when causal;
bwd = 2.5 x fwd. A backend that refuses a shape gives a row with "error" and no figures.

The problems come from --sweep FILE.json, in the format of `fmha-jit bench --sweep` (an object
or a list of objects whose list values expand to their product; batch = tokens / seqlen,
nhead_q = model_dim / hdim), or from the flags, which make one such object:

  python3 tools/scripts/torch_sdpa.py --hdim 64 128 --seqlen 2048 8192 --family fwdbwd --json t.json
  python3 tools/scripts/torch_sdpa.py --sweep grid.json --json torch.json

With --reps 1 --warmup 1 each kernel runs twice, a target for Nsight Compute (`ncu -k regex:NAME
--launch-skip 1 -c 1 python3 tools/scripts/torch_sdpa.py ...`).
"""
import argparse
import contextlib
import itertools
import json
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

try:
    import torch.utils.deterministic as determinism_settings  # torch >= 2.1
except ImportError:
    determinism_settings = None

DEVICE = "cuda"
BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
FAMILIES = {"fwd": ("fwd",), "bwd": ("bwd",), "fwdbwd": ("fwd", "bwd")}
# Sweep keys that choose among fmha-jit's kernels and have no torch counterpart.
OURS_ONLY_KEYS = {"impl", "arch", "layout", "lse", "scale", "seed", "block_m", "block_n",
                  "num_warps", "num_stages"}
PROBLEM_KEYS = {"family", "dtype", "hdim", "hdim_q", "hdim_v", "seqlen", "seqlen_q", "seqlen_k",
                "causal", "mask", "batch", "tokens", "nhead_q", "nhead_k", "model_dim",
                "deterministic"}


def fwd_flops(batch, nhead_q, seqlen, hdim, causal):
    """FlashAttention's count: two matmuls of 2 * Sq * Sk * D each per head, half under a causal
    mask."""
    return 4 * batch * nhead_q * seqlen * seqlen * hdim / (2 if causal else 1)


def median_ms(fn, reps, warmup):
    """Median milliseconds of `fn` over `reps` calls after `warmup` untimed ones. All calls are
    queued before any event is read, so the GPU does not wait for the host between calls."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(reps)]
    for start, stop in events:
        start.record()
        fn()
        stop.record()
    torch.cuda.synchronize()
    return statistics.median(start.elapsed_time(stop) for start, stop in events)


def expand(document):
    """The points of a sweep document: each object's list values expand to their product, the
    last key varying fastest (as fmha-jit's sweep files)."""
    objects = document if isinstance(document, list) else [document]
    points = []
    for obj in objects:
        if not isinstance(obj, dict):
            raise ValueError(f"sweep entry {obj!r} is not an object")
        keys = list(obj)
        values = [v if isinstance(v, list) else [v] for v in obj.values()]
        points += [dict(zip(keys, combo)) for combo in itertools.product(*values)]
    return points


def problem(point):
    """A sweep point as the problem torch runs: sizes resolved as `fmha-jit bench` resolves
    them. Raises ValueError naming what is not supported."""
    unknown = set(point) - PROBLEM_KEYS - OURS_ONLY_KEYS
    if unknown:
        raise ValueError(f"{point}: unknown keys {sorted(unknown)}; accepted: "
                         f"{sorted(PROBLEM_KEYS | OURS_ONLY_KEYS)}")
    hdim = point.get("hdim", point.get("hdim_q", 128))
    if point.get("hdim_v", hdim) != hdim:
        raise ValueError(f"{point}: hdim_v != hdim_q is not supported here")
    seqlen = point.get("seqlen", point.get("seqlen_q", 1024))
    if point.get("seqlen_k", seqlen) != seqlen:
        raise ValueError(f"{point}: seqlen_k != seqlen_q is not supported here")
    mask = point.get("mask", "causal" if point.get("causal") else "none")
    if mask not in ("none", "causal", "causal_top_left"):
        raise ValueError(f"{point}: mask {mask!r} is not supported here; accepted: none, causal")
    dtype = point.get("dtype", "bf16")
    if dtype not in DTYPES:
        raise ValueError(f"{point}: dtype {dtype!r}; accepted: {', '.join(DTYPES)}")
    family = point.get("family", "fwd")
    if family not in FAMILIES:
        raise ValueError(f"{point}: family {family!r}; accepted: {', '.join(FAMILIES)}")
    batch = point["tokens"] // seqlen if "tokens" in point else point.get("batch", 1)
    nhead_q = point["model_dim"] // hdim if "model_dim" in point else point.get("nhead_q", 1)
    nhead_k = point.get("nhead_k", nhead_q)
    if min(batch, nhead_q, nhead_k) < 1 or nhead_q % nhead_k:
        raise ValueError(f"{point}: batch {batch}, heads {nhead_q}:{nhead_k}: need batch >= 1 "
                         "and nhead_q a multiple of nhead_k")
    return dict(family=family, dtype=dtype, hdim=hdim, seqlen=seqlen, causal=mask != "none",
                batch=batch, nhead_q=nhead_q, nhead_k=nhead_k,
                deterministic=bool(point.get("deterministic", False)))


def inputs(p):
    g = torch.Generator(device=DEVICE).manual_seed(0)

    def tensor(heads, grad):
        t = torch.randn(p["batch"], heads, p["seqlen"], p["hdim"], device=DEVICE,
                        dtype=DTYPES[p["dtype"]], generator=g)
        return t.requires_grad_(grad)
    return (tensor(p["nhead_q"], True), tensor(p["nhead_k"], True), tensor(p["nhead_k"], True),
            tensor(p["nhead_q"], False))


class Deterministic:
    """torch.use_deterministic_algorithms(True) inside the block, without the filling of
    uninitialised memory that comes with it (it would add fill kernels to the timed region)."""

    def __enter__(self):
        torch.use_deterministic_algorithms(True)
        if determinism_settings is not None:
            self.fill = determinism_settings.fill_uninitialized_memory
            determinism_settings.fill_uninitialized_memory = False

    def __exit__(self, *exc):
        torch.use_deterministic_algorithms(False)
        if determinism_settings is not None:
            determinism_settings.fill_uninitialized_memory = self.fill


def measure(backend, p, fam, reps, warmup):
    """One row: `fam` (fwd or bwd) of problem `p` on `backend`."""
    row = dict(p, backend=backend, family=fam)
    row["deterministic"] = p["deterministic"] and fam == "bwd"
    try:
        q, k, v, do = inputs(p)

        def attend():
            return F.scaled_dot_product_attention(q, k, v, is_causal=p["causal"],
                                                  enable_gqa=p["nhead_k"] != p["nhead_q"])
        with sdpa_kernel([BACKENDS[backend]]):
            if fam == "fwd":
                ms = median_ms(attend, reps, warmup)
            else:
                out = attend()

                def grads():
                    return torch.autograd.grad(out, (q, k, v), do, retain_graph=True)
                with Deterministic() if row["deterministic"] else contextlib.nullcontext():
                    ms = median_ms(grads, reps, warmup)
                    row["dq_bitwise_repro"] = bool(torch.equal(grads()[0], grads()[0]))
    except Exception as e:  # noqa: BLE001 - a backend's refusal is a result
        row["error"] = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        return row
    flops = fwd_flops(p["batch"], p["nhead_q"], p["seqlen"], p["hdim"], p["causal"])
    flops *= 2.5 if fam == "bwd" else 1
    row.update(ms=ms, tflops=flops / ms / 1e9)
    return row


def rows_of(points, backends, reps, warmup, log):
    rows = []
    for point in points:
        p = problem(point)
        for fam in FAMILIES[p["family"]]:
            deterministic = p["deterministic"] and fam == "bwd"
            for backend in backends:
                if deterministic and backend != "flash":
                    continue
                row = measure(backend, p, fam, reps, warmup)
                torch.cuda.empty_cache()  # the next shape's tensors need not fit beside these
                rows.append(row)
                figure = row.get("error") or f"{row['tflops']:.1f} TFLOP/s"
                print(f"{backend} {fam}{' det' if deterministic else ''} {p['dtype']} hdim "
                      f"{p['hdim']} S {p['seqlen']} {'causal' if p['causal'] else 'none'} "
                      f"{p['batch']} x {p['nhead_q']}:{p['nhead_k']}: {figure}", file=log,
                      flush=True)
    return rows


def flags_sweep(a):
    """The sweep object the shape flags stand for."""
    sweep = {"family": a.family, "dtype": a.dtype, "hdim": a.hdim, "seqlen": a.seqlen,
             "causal": {"no": [False], "yes": [True], "both": [False, True]}[a.causal],
             "tokens": a.tokens, "deterministic": a.deterministic}
    if a.heads:
        hq, _, hk = a.heads.partition(":")
        sweep.update(nhead_q=int(hq), nhead_k=int(hk or hq))
    else:
        sweep["model_dim"] = a.model_dim
    return sweep


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sweep", help="sweep file (fmha-jit bench's format); the shape flags are "
                   "then not used")
    p.add_argument("--family", default="fwd", choices=list(FAMILIES))
    p.add_argument("--dtype", nargs="+", default=["bf16"], choices=list(DTYPES))
    p.add_argument("--hdim", nargs="+", type=int, default=[128])
    p.add_argument("--seqlen", nargs="+", type=int, default=[8192])
    p.add_argument("--causal", default="both", choices=["no", "yes", "both"])
    p.add_argument("--tokens", type=int, default=16384, help="batch = tokens / seqlen")
    p.add_argument("--model-dim", type=int, default=2048, help="heads = model_dim / hdim")
    p.add_argument("--heads", help="HQ:HK, fixed head counts instead of --model-dim (GQA)")
    p.add_argument("--deterministic", action="store_true", help="the backward deterministic")
    p.add_argument("--backend", nargs="+", default=list(BACKENDS), choices=list(BACKENDS))
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--json", help="write the rows here (default: standard output)")
    a = p.parse_args()
    if a.sweep:
        with open(a.sweep) as f:
            points = expand(json.load(f))
    else:
        points = expand(flags_sweep(a))
    try:
        for point in points:
            problem(point)  # every point checked before the first is measured
    except ValueError as e:
        p.error(str(e))
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    doc = {"torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": cudnn,
           "gpu": torch.cuda.get_device_name(), "reps": a.reps, "warmup": a.warmup,
           "rows": rows_of(points, a.backend, a.reps, a.warmup, sys.stderr)}
    text = json.dumps(doc, indent=1)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main()
