#!/usr/bin/env python3
"""The Python package's figures for BENCHMARKS.md, in one process on one GPU:

1. Host time per call at a small shape (bf16, batch 1, 8 heads, S 128, hdim 64, no mask): the
   C++ API's run_fwd (`fmha-jit bench --json`, host_us: the call's wall time on the host), then
   fmha_jit.flash_attn_func and fmha_jit.scaled_dot_product_attention (inference, and the
   training forward through autograd) and torch's F.scaled_dot_product_attention with its flash
   and cuDNN backends. Each call is timed alone (perf_counter_ns) while the GPU runs behind; the
   queue is drained every 100 calls outside the timed calls; the median of 1000 calls.
2. A training step (forward, loss, backward) of a Llama-style block (examples/python), bf16,
   S 4096, with fmha_jit's SDPA against torch's with the cuDNN and the flash backend forced.
   The three alternate in rounds; CUDA events around each step; the median step.

    python3 tools/scripts/python_bench.py --fmha-jit .carry/bin/fmha-jit --out BENCHMARKS.md
"""

import argparse
import datetime
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "python"))

import fmha_jit  # noqa: E402
from llama_block import LlamaBlock  # noqa: E402

SMALL = dict(batch=1, heads=8, seqlen=128, hdim=64)


def host_us_per_call(fn, calls=1000, warmup=2000):
    # A long warm-up: the first thousands of calls of a process run slower (caches, clocks).
    for i in range(warmup):
        fn()
        if i % 100 == 99:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    samples = []
    for i in range(calls):
        t0 = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - t0) / 1000)
        if i % 100 == 99:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    return statistics.median(samples)


def cpp_host_us(cli, lse):
    s = SMALL
    cmd = [cli, "bench", "--family", "fwd", "--dtype", "bf16", "--batch", str(s["batch"]),
           "--nhead-q", str(s["heads"]), "--seqlen-q", str(s["seqlen"]), "--hdim-q",
           str(s["hdim"]), "--layout", "bshd", "--lse" if lse else "--no-lse", "--warmup", "100",
           "--repeat", "1000", "--json"]
    rows = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    return rows[0]["host_us"]


def overhead_rows(cli):
    s = SMALL
    shape_bshd = (s["batch"], s["seqlen"], s["heads"], s["hdim"])

    def tensors(grad):
        return [torch.randn(shape_bshd, device="cuda", dtype=torch.bfloat16, requires_grad=grad)
                for _ in range(3)]

    q, k, v = tensors(False)
    qg, kg, vg = tensors(True)
    sq, sk, sv = (t.transpose(1, 2) for t in (q, k, v))
    # (call, µs, the C++ row it is compared with): a call that needs no LSE runs the kernel
    # that stores none, as run_fwd with --no-lse does.
    plain, with_lse = cpp_host_us(cli, False), cpp_host_us(cli, True)
    rows = [("C++ API: FmhaRunner::run_fwd, no LSE", plain, plain),
            ("C++ API: FmhaRunner::run_fwd, LSE", with_lse, with_lse)]
    rows.append(("fmha_jit.flash_attn_func",
                 host_us_per_call(lambda: fmha_jit.flash_attn_func(q, k, v)), plain))
    out = torch.empty_like(q)
    rows.append(("fmha_jit.flash_attn_func(out=...), no allocation",
                 host_us_per_call(lambda: fmha_jit.flash_attn_func(q, k, v, out=out)), plain))
    rows.append(("fmha_jit.scaled_dot_product_attention",
                 host_us_per_call(lambda: fmha_jit.scaled_dot_product_attention(sq, sk, sv)),
                 plain))
    rows.append(("fmha_jit.flash_attn_func(return_lse=True)",
                 host_us_per_call(lambda: fmha_jit.flash_attn_func(q, k, v, return_lse=True)),
                 with_lse))
    rows.append(("fmha_jit.flash_attn_func, inputs requiring grad (autograd)",
                 host_us_per_call(lambda: fmha_jit.flash_attn_func(qg, kg, vg)), with_lse))
    for name, backend in (("flash", SDPBackend.FLASH_ATTENTION),
                          ("cuDNN", SDPBackend.CUDNN_ATTENTION)):
        with sdpa_kernel(backend):
            rows.append((f"F.scaled_dot_product_attention ({name})",
                         host_us_per_call(lambda: F.scaled_dot_product_attention(sq, sk, sv)),
                         plain))
    return rows


def model_rows(rounds=6, steps=5, warmup=3):
    torch.manual_seed(0)
    dims = dict(dim=2048, heads=16, kv_heads=16)
    ours = LlamaBlock(fmha_jit.scaled_dot_product_attention, **dims).cuda().bfloat16()
    torch_block = LlamaBlock(F.scaled_dot_product_attention, **dims).cuda().bfloat16()
    torch_block.load_state_dict(ours.state_dict())
    x = torch.randn(2, 4096, dims["dim"], device="cuda", dtype=torch.bfloat16, requires_grad=True)
    variants = {
        "fmha_jit.scaled_dot_product_attention": (ours, None),
        "F.scaled_dot_product_attention (cuDNN)": (torch_block, SDPBackend.CUDNN_ATTENTION),
        "F.scaled_dot_product_attention (flash)": (torch_block, SDPBackend.FLASH_ATTENTION),
    }

    def step(model):
        model(x).float().square().mean().backward()

    def timed(model, backend, n):
        ctx = sdpa_kernel(backend) if backend is not None else torch.enable_grad()
        out = []
        with ctx:
            for _ in range(n):
                start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(
                    enable_timing=True)
                start.record()
                step(model)
                stop.record()
                out.append((start, stop))
        torch.cuda.synchronize()
        return [a.elapsed_time(b) for a, b in out]

    for model, backend in variants.values():
        timed(model, backend, warmup)
    samples = {name: [] for name in variants}
    for _ in range(rounds):
        for name, (model, backend) in variants.items():
            samples[name] += timed(model, backend, steps)
    return [(name, statistics.median(ms)) for name, ms in samples.items()]


def markdown(overhead, model, command):
    gpu = torch.cuda.get_device_name()
    date = datetime.date.today().isoformat()
    s = SMALL
    lines = [
        "## Python package",
        "",
        f"{gpu}, torch {torch.__version__}, {date}. Regenerate on a GPU machine with:",
        "",
        "```sh",
        command,
        "```",
        "",
        f"Host time per call, bf16, batch {s['batch']}, {s['heads']} heads, S {s['seqlen']}, "
        f"hdim {s['hdim']}, no mask (median of 1000 calls, each timed alone; the C++ row is "
        "`fmha-jit bench`'s host_us):",
        "",
        "| call | µs per call | above the C++ API (the matching row) |",
        "|---|---:|---:|",
    ]
    for name, us, cpp in overhead:
        lines.append(f"| {name} | {us:.1f} | {us - cpp:+.1f} |")
    best = min(ms for name, ms in model if name.startswith("F."))
    lines += [
        "",
        "Training step (forward, loss, backward) of examples/python/llama_block.py: dim 2048, "
        "16 heads of 128, batch 2, S 4096, causal, bf16, eager; the median of 30 steps, the "
        "three alternating in rounds:",
        "",
        "| attention | ms per step | vs SDPA's fastest |",
        "|---|---:|---:|",
    ]
    for name, ms in model:
        lines.append(f"| {name} | {ms:.2f} | {best / ms:.3f} × |")
    return "\n".join(lines) + "\n"


def put_section(page: Path, section: str) -> None:
    """Replaces the page's "## Python package" section (up to the next "## " heading; bench_page.py
    keeps it when it rewrites the page), or appends it."""
    text = page.read_text() if page.exists() else ""
    start = text.find("\n## Python package\n")
    if start < 0:
        page.write_text((text.rstrip("\n") + "\n\n" if text else "") + section)
        return
    end = text.find("\n## ", start + 1)
    tail = text[end + 1:] if end >= 0 else ""
    page.write_text(text[:start + 1] + section + ("\n" + tail if tail else ""))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fmha-jit", required=True, help="the fmha-jit CLI (the C++ row)")
    parser.add_argument("--out", required=True,
                        help="the page whose '## Python package' section to write (BENCHMARKS.md)")
    parser.add_argument("--json", help="also write the figures as JSON")
    args = parser.parse_args()
    overhead = overhead_rows(args.fmha_jit)
    model = model_rows()
    command = f"python3 tools/scripts/python_bench.py --fmha-jit {args.fmha_jit} --out {args.out}"
    text = markdown(overhead, model, command)
    put_section(Path(args.out), text)
    if args.json:
        Path(args.json).write_text(json.dumps({"gpu": torch.cuda.get_device_name(),
                                               "torch": torch.__version__,
                                               "overhead_us": {n: us for n, us, _ in overhead},
                                               "model_step_ms": dict(model)}, indent=2))
    print(text)


if __name__ == "__main__":
    main()
