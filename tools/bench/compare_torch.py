#!/usr/bin/env python3
"""Side-by-side benchmark: fmha-jit against PyTorch SDPA (flash = FA2, cuDNN) in ONE process tree,
so that both run on the same machine state. Runs `fmha-jit bench --sweep` and the anchor script
(anchor_sdpa.py) on the same grid and prints a markdown table with the ratios.

  python3 tools/bench/compare_torch.py --fmha-jit .carry/bin/fmha-jit --anchor .carry/anchor_sdpa.py \
      --dtype bf16 --hdim 64 128 256 --seqlen 2048 8192 --family fwd --out $OUT/bench_fwd

Grid convention (FlashAttention's benchmark): batch = tokens / seqlen, heads = model_dim / hdim.
"""
import argparse, datetime, json, subprocess, sys


def run(cmd):
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--fmha-jit", required=True)
    p.add_argument("--anchor", required=True)
    p.add_argument("--dtype", nargs="+", default=["bf16"])
    p.add_argument("--hdim", nargs="+", type=int, default=[64, 128, 256])
    p.add_argument("--seqlen", nargs="+", type=int, default=[2048, 8192])
    p.add_argument("--causal", default="both", choices=["no", "yes", "both"])
    p.add_argument("--family", default="fwd", choices=["fwd", "bwd", "fwdbwd"])
    p.add_argument("--deterministic", action="store_true")
    p.add_argument("--tokens", type=int, default=16384)
    p.add_argument("--model-dim", type=int, default=2048)
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--out", required=True, help="prefix of the .json and .md files written")
    a = p.parse_args()

    causal = {"no": [False], "yes": [True], "both": [False, True]}[a.causal]
    sweep = {"dtype": a.dtype, "hdim": a.hdim, "seqlen": a.seqlen, "causal": causal,
             "tokens": a.tokens, "model_dim": a.model_dim}
    if a.deterministic:
        sweep["deterministic"] = True
    sweep_file = a.out + "_sweep.json"
    with open(sweep_file, "w") as f:
        json.dump(sweep, f)
    ours = json.loads(run([a.fmha_jit, "bench", "--sweep", sweep_file, "--family", a.family, "--json",
                           "--repeat", str(a.repeat), "--warmup", str(a.warmup)]))
    anchor_json = a.out + "_torch.json"
    anchor_cmd = [sys.executable, a.anchor, "--dtype", *a.dtype, "--hdim", *map(str, a.hdim),
                  "--seqlen", *map(str, a.seqlen), "--causal", a.causal, "--tokens", str(a.tokens),
                  "--model-dim", str(a.model_dim), "--reps", str(a.repeat), "--warmup", str(a.warmup),
                  "--json", anchor_json]
    if a.deterministic:
        anchor_cmd.append("--deterministic")
    run(anchor_cmd)
    with open(anchor_json) as f:
        torch_rows = json.load(f)

    torch_dtype = {"bf16": "bfloat16", "fp16": "float16"}

    def torch_value(backend, dtype, hdim, seqlen, causal, fam):
        dtype = torch_dtype.get(dtype, dtype)
        for r in torch_rows:
            if (r["backend"], r["dtype"], r["hdim"], r["seqlen"], r["causal"]) == (backend, dtype, hdim, seqlen, causal):
                return r.get(fam + "_tflops")
        return None

    fams = ["fwd", "bwd"] if a.family == "fwdbwd" else [a.family]

    def stages(r):  # the backward's split per kernel stage, from fmha-jit bench
        st = r.get("stage_ms", [])
        return " + ".join(f"{x['stage']} {x['ms']:.3f}" for x in st) if len(st) > 1 else ""
    lines = [f"| dtype | hdim | seqlen | causal | B x H | family | ours ms | ours TFLOP/s | torch flash | cuDNN | ours / flash | ours / cuDNN | stages (ms) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in ours:
        if r.get("family") not in fams or "tflops" not in r:
            continue
        causal_row = r["sweep_point"]["causal"]
        fl = torch_value("flash", r["dtype"], r["hdim_q"], r["seqlen_q"], causal_row, r["family"])
        cd = torch_value("cudnn", r["dtype"], r["hdim_q"], r["seqlen_q"], causal_row, r["family"])
        ratio = lambda t: f"{r['tflops'] / t:.2f}" if t else "n/a"
        lines.append(f"| {r['dtype']} | {r['hdim_q']} | {r['seqlen_q']} | {'yes' if causal_row else 'no'} | "
                     f"{r['batch']} x {r['nhead_q']} | {r['family']}{' det' if r['deterministic'] else ''} | "
                     f"{r['ms']:.3f} | {r['tflops']:.1f} | {fl if fl else 'n/a'} | {cd if cd else 'n/a'} | "
                     f"{ratio(fl)} | {ratio(cd)} | {stages(r)} |")
    table = "\n".join(lines)
    header = (f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
              f"{ours[0].get('gpu', '?') if ours else '?'}; command: {' '.join(sys.argv)}\n\n")
    with open(a.out + ".md", "w") as f:
        f.write(header + table + "\n")
    with open(a.out + "_ours.json", "w") as f:
        json.dump(ours, f, indent=1)
    print(header + table)


if __name__ == "__main__":
    main()
