#!/usr/bin/env python3
"""Packed batches, sinks and softcap for BENCHMARKS.md, ours and torch's in one process tree:

1. Packed against dense: 16 sequences of one length L (1k to 8k) as a packed batch and as a
   dense batch of 16, forward and backward, causal and not (bf16, hdim 128, 16 heads). `auto`
   picks per config, so both rows of the backward are also run on mma_sm80 (the family that
   serves packed backwards today), which isolates what packing costs from which family runs.
2. A realistic mix: lengths drawn uniformly from 128 to 8192 (seeded) up to 64k tokens, causal,
   ours (`fmha-jit bench --seqlens-q ...`) against torch's best packed-sequence path on the GPU:
   FlexAttention with a document mask (compiled), and torch's varlen attention where the torch
   build has one. TFLOP/s count each sequence's own work, the same count for every row.
3. What the modifiers cost: a dense causal batch (4 x 4096, 16 heads, hdim 128) plain, with sinks,
   with softcap 30 and with both, forward and backward.

Ours are `fmha-jit bench --json` rows (the median of its launches, CUDA events, inputs rotated
past L2); torch's rows are timed the same way here: CUDA events around each of `--repeat` calls
after `--warmup` untimed ones, the median.

    python3 tools/scripts/varlen_bench.py --fmha-jit .carry/bin/fmha-jit --out BENCHMARKS.md
    python3 tools/scripts/varlen_bench.py --self-check   # renders made-up rows, no GPU
"""

import argparse
import datetime
import inspect
import json
import random
import statistics
import subprocess
from pathlib import Path

TITLE = "## Packed batches, sinks and softcap"
HEADS, HDIM = 16, 128


def mix_lengths(seed=0, tokens=65536, lo=128, hi=8192):
    """Lengths drawn from [lo, hi] until `tokens`; the last one trimmed to land on it exactly."""
    rng = random.Random(seed)
    out = []
    while sum(out) < tokens:
        out.append(rng.randint(lo, hi))
    out[-1] -= sum(out) - tokens
    if out[-1] < lo:  # fold a short remainder into the previous sequence
        out[-2] += out.pop()
    return out


class Ours:
    def __init__(self, cli, warmup, repeat):
        self.cli, self.warmup, self.repeat = cli, warmup, repeat

    def row(self, family, *flags):
        cmd = [self.cli, "bench", "--family", family, "--dtype", "bf16", "--hdim-q", str(HDIM),
               "--nhead-q", str(HEADS), "--layout", "bshd", "--warmup", str(self.warmup),
               "--repeat", str(self.repeat), "--json", *flags]
        out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
        return json.loads(out)[0]


def packed_flags(lengths):
    return ["--seqlens-q", ",".join(map(str, lengths))]


def packed_vs_dense(ours):
    rows = []
    for mask in ("none", "causal-br"):
        for length in (1024, 2048, 4096, 8192):
            for family in ("fwd", "bwd"):
                impls = ["auto"] if family == "fwd" else ["auto", "mma_sm80"]
                for impl in impls:
                    common = ["--mask", mask, "--impl", impl]
                    dense = ours.row(family, "--batch", "16", "--seqlen-q", str(length), *common)
                    packed = ours.row(family, *packed_flags([length] * 16), *common)
                    rows.append(dict(mask=mask, length=length, family=family, impl=impl,
                                     dense_ms=dense["ms"], packed_ms=packed["ms"],
                                     dense_impl=dense["impl"], packed_impl=packed["impl"]))
    return rows


def torch_mix(lengths, warmup, repeat):
    """FlexAttention with a causal document mask, and torch's varlen attention if present, on the
    mix; each as (name, fwd ms, bwd ms)."""
    import torch
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    total = sum(lengths)
    doc = torch.repeat_interleave(torch.arange(len(lengths), device="cuda"),
                                  torch.tensor(lengths, device="cuda"))

    def document_causal(b, h, q, kv):
        return (doc[q] == doc[kv]) & (q >= kv)

    block_mask = create_block_mask(document_causal, None, None, total, total, device="cuda")
    flex = torch.compile(flex_attention)

    def tensors(shape):
        return [torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                for _ in range(3)]

    def timed(fwd):
        fwd_ms, bwd_ms = [], []
        for i in range(warmup + repeat):
            a, b, c, d = (torch.cuda.Event(enable_timing=True) for _ in range(4))
            a.record()
            out = fwd()
            b.record()
            c.record()
            out.backward(torch.ones_like(out))
            d.record()
            if i >= warmup:
                fwd_ms.append((a, b))
                bwd_ms.append((c, d))
        torch.cuda.synchronize()
        return (statistics.median(x.elapsed_time(y) for x, y in fwd_ms),
                statistics.median(x.elapsed_time(y) for x, y in bwd_ms))

    q, k, v = tensors((1, HEADS, total, HDIM))
    rows = [("FlexAttention, document mask", *timed(lambda: flex(q, k, v, block_mask=block_mask)))]
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError:
        varlen_attn = None
    if varlen_attn is not None:
        cu = torch.zeros(len(lengths) + 1, dtype=torch.int32, device="cuda")
        cu[1:] = torch.cumsum(torch.tensor(lengths, device="cuda"), 0)
        pq, pk, pv = tensors((total, HEADS, HDIM))
        longest = max(lengths)
        # Causal is is_causal=True in some torch builds, a (-1, 0) window in others.
        params = inspect.signature(varlen_attn).parameters
        causal = dict(is_causal=True) if "is_causal" in params else dict(window_size=(-1, 0))
        rows.append(("torch varlen_attn", *timed(
            lambda: varlen_attn(pq, pk, pv, cu, cu, longest, longest, **causal))))
    return rows, torch.__version__, torch.cuda.get_device_name()


def realistic_mix(ours, warmup, repeat):
    lengths = mix_lengths()
    fwd = ours.row("fwd", *packed_flags(lengths), "--mask", "causal-br")
    bwd = ours.row("bwd", *packed_flags(lengths), "--mask", "causal-br")
    torch_rows, version, gpu = torch_mix(lengths, warmup, repeat)
    rows = [dict(name="fmha-jit (packed)", fwd_ms=fwd["ms"], bwd_ms=bwd["ms"],
                 impl=f"{fwd['impl']} / {bwd['impl']}")]
    rows += [dict(name=name, fwd_ms=f, bwd_ms=b, impl="") for name, f, b in torch_rows]
    return dict(lengths=lengths, fwd_flops=fwd["flops"], bwd_flops=bwd["flops"], rows=rows,
                torch=version, gpu=gpu)


def modifier_cost(ours):
    rows = []
    variants = (("plain", []), ("sinks", ["--sinks"]), ("softcap 30", ["--softcap", "30"]),
                ("sinks + softcap 30", ["--sinks", "--softcap", "30"]))
    for family in ("fwd", "bwd"):
        for name, flags in variants:
            r = ours.row(family, "--batch", "4", "--seqlen-q", "4096", "--mask", "causal-br",
                         *flags)
            rows.append(dict(family=family, variant=name, ms=r["ms"], impl=r["impl"]))
        if family == "bwd":  # plain on the family the modified backward runs on
            r = ours.row(family, "--batch", "4", "--seqlen-q", "4096", "--mask", "causal-br",
                         "--impl", "mma_sm80")
            rows.append(dict(family=family, variant="plain", ms=r["ms"], impl=r["impl"]))
    return rows


def markdown(doc, command):
    mix = doc["mix"]
    lines = [TITLE, "", f"{mix['gpu']}, torch {mix['torch']}, {doc['date']}. Regenerate on a GPU "
             "machine with:", "", "```sh", command, "```", "",
             f"Packed against dense, 16 sequences of L, bf16, hdim {HDIM}, {HEADS} heads (ms; "
             "packed / dense, where 1.00 is no cost):", "",
             "| mask | L | pass | impl (dense / packed) | dense ms | packed ms | packed / dense |",
             "|---|---:|---|---|---:|---:|---:|"]
    for r in doc["packed_vs_dense"]:
        lines.append(f"| {r['mask']} | {r['length']} | {r['family']} | {r['dense_impl']} / "
                     f"{r['packed_impl']} | {r['dense_ms']:.3f} | {r['packed_ms']:.3f} | "
                     f"{r['packed_ms'] / r['dense_ms']:.2f} |")
    lengths = mix["lengths"]
    lines += ["", f"A realistic mix, causal: {len(lengths)} sequences of 128 to 8192 tokens "
              f"(seeded; {sum(lengths)} in all), bf16, hdim {HDIM}, {HEADS} heads; TFLOP/s count "
              "each sequence's own work:", "",
              "| implementation | fwd ms | fwd TFLOP/s | bwd ms | bwd TFLOP/s "
              "| ours vs it (fwd / bwd) |",
              "|---|---:|---:|---:|---:|---:|"]
    ours = mix["rows"][0]
    for r in mix["rows"]:
        name = r["name"] + (f" ({r['impl']})" if r["impl"] else "")
        fwd_tflops = mix["fwd_flops"] / r["fwd_ms"] / 1e9
        bwd_tflops = mix["bwd_flops"] / r["bwd_ms"] / 1e9
        lines.append(f"| {name} | {r['fwd_ms']:.3f} | {fwd_tflops:.0f} | {r['bwd_ms']:.3f} | "
                     f"{bwd_tflops:.0f} | {r['fwd_ms'] / ours['fwd_ms']:.2f} / "
                     f"{r['bwd_ms'] / ours['bwd_ms']:.2f} × |")
    lines += ["", f"What the modifiers cost: dense, causal, batch 4 × 4096, bf16, hdim {HDIM}, "
              f"{HEADS} heads (ms; against plain on the same family):", "",
              "| pass | variant | impl | ms | vs plain |", "|---|---|---|---:|---:|"]
    for r in doc["modifiers"]:
        plain = next(p["ms"] for p in doc["modifiers"] if p["family"] == r["family"] and
                     p["variant"] == "plain" and p["impl"] == r["impl"])
        lines.append(f"| {r['family']} | {r['variant']} | {r['impl']} | {r['ms']:.3f} | "
                     f"{r['ms'] / plain:.3f} |")
    return "\n".join(lines) + "\n"


def put_section(page: Path, section: str) -> None:
    """Replaces the page's TITLE section (up to the next "## " heading), or appends it."""
    text = page.read_text() if page.exists() else ""
    start = text.find("\n" + TITLE + "\n")
    if start < 0:
        page.write_text((text.rstrip("\n") + "\n\n" if text else "") + section)
        return
    end = text.find("\n## ", start + 1)
    tail = text[end + 1:] if end >= 0 else ""
    page.write_text(text[:start + 1] + section + ("\n" + tail if tail else ""))


def self_check():
    lengths = mix_lengths()
    assert sum(lengths) == 65536 and all(128 <= x <= 8192 + 128 for x in lengths), lengths
    doc = dict(date="2026-01-01", packed_vs_dense=[
        dict(mask="none", length=1024, family="fwd", impl="auto", dense_ms=1.0, packed_ms=1.02,
             dense_impl="wgmma_sm90a", packed_impl="wgmma_sm90a")],
        mix=dict(lengths=lengths, fwd_flops=1e12, bwd_flops=2.5e12, torch="x", gpu="GPU",
                 rows=[dict(name="fmha-jit (packed)", fwd_ms=2.0, bwd_ms=5.0, impl="a / b"),
                       dict(name="FlexAttention, document mask", fwd_ms=3.0, bwd_ms=8.0,
                            impl="")]),
        modifiers=[dict(family="fwd", variant="plain", ms=1.0, impl="wgmma_sm90a"),
                   dict(family="fwd", variant="sinks", ms=1.01, impl="wgmma_sm90a")])
    text = markdown(doc, "cmd")
    assert text.startswith(TITLE) and "1.02" in text and "1.50 / 1.60" in text, text
    print(text)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fmha-jit", help="the fmha-jit CLI")
    parser.add_argument("--out", help="the page whose section to write (BENCHMARKS.md)")
    parser.add_argument("--json", help="also write the figures as JSON")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--self-check", action="store_true", help="render made-up rows; no GPU")
    args = parser.parse_args()
    if args.self_check:
        self_check()
        return
    if not args.fmha_jit or not args.out:
        parser.error("--fmha-jit and --out are required (or --self-check)")
    ours = Ours(args.fmha_jit, args.warmup, args.repeat)
    doc = dict(date=datetime.date.today().isoformat(), packed_vs_dense=packed_vs_dense(ours),
               mix=realistic_mix(ours, args.warmup, args.repeat), modifiers=modifier_cost(ours))
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1))
    command = f"python3 tools/scripts/varlen_bench.py --fmha-jit {args.fmha_jit} --out {args.out}"
    put_section(Path(args.out), markdown(doc, command))


if __name__ == "__main__":
    main()
