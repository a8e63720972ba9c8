#!/usr/bin/env python3
"""The full benchmark grid of the performance issue, ours against PyTorch, in ONE device call.

Runs, one after the other on the same machine state:
  1. `fmha-jit bench --sweep` over the grid: forward, backward, deterministic backward;
  2. anchor_sdpa.py (../shared/tools): torch flash (FA2) and cuDNN, forward and backward;
  3. anchor_sdpa.py --deterministic --backend flash: torch flash's deterministic backward;
  4. anchor_gqa.py: torch on the GQA rows (32 query heads on 8 kv heads, hdim 128);
  5. with --pair-below R: interleave_vs_cudnn.py on the rows under R x cuDNN, ours and cuDNN
     alternating, in a table of their own;
then writes <out>.md (the BENCHMARKS.md tables) and <out>.json (every row). With --from-json
<out>.json it only renders <out>.md again (a device call may bring back too few files).

Grid (FlashAttention's convention): dtype bf16, fp16; hdim 64, 128, 256; seqlen 512, 2048, 8192,
16384; causal and not; batch = tokens / seqlen, heads = model_dim / hdim; plus GQA 32:8 at
hdim 128 with batch = tokens / seqlen.

  python3 tools/bench/grid_vs_torch.py --fmha-jit .carry/bin/fmha-jit \\
      --anchor .carry/anchor_sdpa.py --out $OUT/grid
"""
import argparse, datetime, json, os, subprocess, sys


def run(cmd):
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout


def fmt(x, spec=".1f"):
    return format(x, spec) if isinstance(x, (int, float)) else "n/a"


def ratio(a, b):
    return f"{a / b:.2f}" if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else "n/a"


def measure(a, sweep, hq, hk):
    """Runs fmha-jit's sweep and torch's anchors; returns (ours, torch, torch_det, torch_gqa)."""
    sweep_file = a.out + "_sweep.json"
    with open(sweep_file, "w") as f:
        json.dump(sweep, f)
    common = ["--reps", str(a.repeat), "--warmup", str(a.warmup)]
    shape = ["--dtype", *a.dtype, "--hdim", *map(str, a.hdim), "--seqlen", *map(str, a.seqlen),
             "--causal", "both", "--tokens", str(a.tokens), "--model-dim", str(a.model_dim)]

    ours = json.loads(run([a.fmha_jit, "bench", "--sweep", sweep_file, "--json", "--repeat",
                           str(a.repeat), "--warmup", str(a.warmup)]))
    with open(a.out + "_ours.json", "w") as f:  # kept even if a later step fails
        json.dump(ours, f)
    run([sys.executable, a.anchor, *shape, *common, "--backend", *a.torch_backends,
         "--json", a.out + "_torch.json"])
    torch_rows = json.load(open(a.out + "_torch.json"))
    det_rows = []
    if "flash" in a.torch_backends and "bwd" in a.families:
        run([sys.executable, a.anchor, *shape, *common, "--backend", "flash", "--deterministic",
             "--json", a.out + "_torch_det.json"])
        det_rows = json.load(open(a.out + "_torch_det.json"))
    gqa_rows = []
    if a.gqa:
        run([sys.executable, a.gqa_anchor, "--dtype", *a.dtype, "--hdim", "128", "--nhead-q", str(hq),
             "--nhead-k", str(hk), "--seqlen", *map(str, a.seqlen), "--tokens", str(a.tokens),
             *common, "--json", a.out + "_torch_gqa.json"])
        gqa_rows = json.load(open(a.out + "_torch_gqa.json"))
    return ours, torch_rows, det_rows, gqa_rows


def measure_pairs(a, close):
    """interleave_vs_cudnn.py on the close rows, per dtype; returns its rows (a failed run's
    message in place of its rows, so the grid itself is kept)."""
    pairs = []
    script = os.path.join(os.path.dirname(__file__), "interleave_vs_cudnn.py")
    for dt in sorted({dt for dt, _ in close}):
        out = f"{a.out}_paired_{dt}.json"
        cmd = [sys.executable, script, "--fmha-jit", a.fmha_jit, "--dtype", dt, "--rounds",
               str(a.pair_rounds), "--reps", str(a.repeat), "--warmup", str(a.warmup), "--json", out]
        for d, spec in close:
            if d == dt:
                cmd += ["--row", spec]
        try:
            run(cmd)
            pairs += json.load(open(out))
        except (subprocess.CalledProcessError, OSError, ValueError) as e:
            pairs.append({"dtype": dt, "error": str(e)[:200]})
    return pairs


def render_pairs(a, paired):
    """The close rows' table: each side's draws and the ratio of the medians."""
    if not paired:
        return []
    lines = ["", f"Rows under {a.pair_below} x cuDNN above, measured again with ours and cuDNN "
             f"alternating (tools/bench/interleave_vs_cudnn.py; family,hdim,seqlen,batch,hq,hk,mask):",
             "", "| dtype | row | ours (each round) | cuDNN (each round) | ours / cuDNN (medians) |",
             "|---|---|---|---|---|"]
    for r in paired:
        if "error" in r:
            lines.append(f"| {r['dtype']} | error: {r['error']} | | | |")
            continue
        lines.append(f"| {r['dtype']} | {r['row']} | {' / '.join(fmt(x) for x in r['ours'])} | "
                     f"{' / '.join(fmt(x) for x in r['cudnn'])} | {r['ratio']:.3f} |")
    return lines


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--fmha-jit", required=True)
    p.add_argument("--anchor", required=True, help="anchor_sdpa.py")
    p.add_argument("--gqa-anchor", default=os.path.join(os.path.dirname(__file__), "anchor_gqa.py"))
    p.add_argument("--dtype", nargs="+", default=["bf16", "fp16"])
    p.add_argument("--hdim", nargs="+", type=int, default=[64, 128, 256])
    p.add_argument("--seqlen", nargs="+", type=int, default=[512, 2048, 8192, 16384])
    p.add_argument("--gqa", default="32:8", help="Hq:Hk of the GQA rows at hdim 128 ('' for none)")
    p.add_argument("--tokens", type=int, default=16384)
    p.add_argument("--model-dim", type=int, default=2048)
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--fwd-also", default="",
                   help="a second forward impl measured next to auto's (e.g. mma_sm80 on Hopper, "
                        "where auto picks wgmma_sm90a): its own columns in the table")
    p.add_argument("--fwd-impl", default="auto",
                   help="impl of the main forward rows (auto unless it must be avoided)")
    p.add_argument("--families", nargs="+", default=["fwd", "bwd"], choices=["fwd", "bwd"],
                   help="which of our kernels to measure (bwd: the backward in both dQ modes); "
                        "a device call short of time measures only what changed")
    p.add_argument("--torch-backends", nargs="+", default=["flash", "cudnn"],
                   choices=["flash", "cudnn"], help="torch SDPA backends to measure in the same call")
    p.add_argument("--out", required=True, help="prefix of the files written")
    p.add_argument("--pair-below", type=float, default=0.0,
                   help="rows whose ours / cuDNN (forward or backward) reads under this get measured "
                        "again, ours and cuDNN alternating --pair-rounds times "
                        "(interleave_vs_cudnn.py): one grid row is one draw of each, minutes apart, "
                        "and cuDNN moved 4-8 %% between calls on an H100 (BENCHMARKS.md, session "
                        "30). 0: off")
    p.add_argument("--pair-rounds", type=int, default=3)
    p.add_argument("--from-json", help="render the tables from a grid's .json (this script's "
                   "combined output) instead of measuring; the same grid flags must be given")
    a = p.parse_args()

    grid = {"dtype": a.dtype, "hdim": a.hdim, "seqlen": a.seqlen, "causal": [False, True],
            "tokens": a.tokens, "model_dim": a.model_dim}
    main_fwd = {"family": "fwd"} if a.fwd_impl == "auto" else {"family": "fwd", "impl": a.fwd_impl}

    def our_rows(shape):
        """The sweep entries of one grid shape: the families asked for, and --fwd-also."""
        rows = []
        if "fwd" in a.families:
            rows.append(dict(shape, **main_fwd))
        if "bwd" in a.families:
            rows += [dict(shape, family="bwd"), dict(shape, family="bwd", deterministic=True)]
        if a.fwd_also:
            rows.append(dict(shape, family="fwd", impl=a.fwd_also))
        return rows

    sweep = our_rows(grid)
    hq = hk = None
    if a.gqa:
        hq, hk = map(int, a.gqa.split(":"))
        sweep += our_rows({"dtype": a.dtype, "hdim": 128, "seqlen": a.seqlen, "causal": [False, True],
                           "tokens": a.tokens, "nhead_q": hq, "nhead_k": hk})
    if a.from_json:
        saved = json.load(open(a.from_json))
        ours, torch_rows, det_rows = saved["ours"], saved["torch"], saved["torch_det"]
        gqa_rows, paired = saved["torch_gqa"], saved.get("paired", [])
    else:
        ours, torch_rows, det_rows, gqa_rows = measure(a, sweep, hq, hk)
        paired = []

    tdt = {"bf16": "bfloat16", "fp16": "float16"}

    def torch_value(rows, backend, dtype, hdim, seqlen, causal, fam, gqa=False):
        for r in rows:
            if (r["backend"], r["dtype"], r["hdim"], r["seqlen"], r["causal"]) != (
                    backend, tdt[dtype], hdim, seqlen, causal) or "error" in r:
                continue
            return r.get(fam + "_tflops"), r.get("how", "")
        return None, ""

    def ours_value(family, det, dtype, hdim, seqlen, causal, nhead_k=None, impl="auto"):
        for r in ours:
            if (r.get("family"), bool(r.get("deterministic")), r["dtype"], r["hdim_q"], r["seqlen_q"],
                    r["sweep_point"]["causal"]) != (family, det, dtype, hdim, seqlen, causal):
                continue
            if r["sweep_point"].get("impl", "auto") != impl:
                continue
            if (nhead_k is None) != (r["nhead_k"] == r["nhead_q"]):
                continue
            return r.get("tflops")
        return None

    lines = []
    head = ("| dtype | hdim | seqlen | causal | B x Hq:Hk | fwd ours | flash | cuDNN | /flash | /cuDNN "
            "| bwd ours | flash | cuDNN | /flash | /cuDNN | det ours | flash det | /flash det | det/bwd |")
    if a.fwd_also:
        head += f" fwd {a.fwd_also} | /flash |"

    def also(dt, hd, s, c, f_fl, nhead_k=None):
        if not a.fwd_also:
            return ""
        v = ours_value("fwd", False, dt, hd, s, c, nhead_k, impl=a.fwd_also)
        return f" {fmt(v)} | {ratio(v, f_fl)} |"
    sep = "|" + "---|" * (head.count("|") - 1)
    lines += [head, sep]
    close = []  # interleave_vs_cudnn.py row specs whose ours / cuDNN reads under --pair-below

    def note_close(dt, hd, s, c, b, hq_, hk_, f_o, f_cd, b_o, b_cd):
        for fam, o, t in (("fwd", f_o, f_cd), ("bwd", b_o, b_cd)):
            if isinstance(o, (int, float)) and isinstance(t, (int, float)) and t and o / t < a.pair_below:
                close.append((dt, f"{fam},{hd},{s},{b},{hq_},{hk_},{'causal' if c else 'none'}"))
    for dt in a.dtype:
        for hd in a.hdim:
            for s in a.seqlen:
                for c in (False, True):
                    b, h = max(1, a.tokens // s), max(1, a.model_dim // hd)
                    f_o = ours_value("fwd", False, dt, hd, s, c, impl=a.fwd_impl)
                    b_o = ours_value("bwd", False, dt, hd, s, c)
                    d_o = ours_value("bwd", True, dt, hd, s, c)
                    f_fl, _ = torch_value(torch_rows, "flash", dt, hd, s, c, "fwd")
                    f_cd, _ = torch_value(torch_rows, "cudnn", dt, hd, s, c, "fwd")
                    b_fl, _ = torch_value(torch_rows, "flash", dt, hd, s, c, "bwd")
                    b_cd, _ = torch_value(torch_rows, "cudnn", dt, hd, s, c, "bwd")
                    d_fl, _ = torch_value(det_rows, "flash", dt, hd, s, c, "bwd")
                    note_close(dt, hd, s, c, b, h, h, f_o, f_cd, b_o, b_cd)
                    lines.append(
                        f"| {dt} | {hd} | {s} | {'yes' if c else 'no'} | {b} x {h}:{h} | {fmt(f_o)} | "
                        f"{fmt(f_fl)} | {fmt(f_cd)} | {ratio(f_o, f_fl)} | {ratio(f_o, f_cd)} | {fmt(b_o)} | "
                        f"{fmt(b_fl)} | {fmt(b_cd)} | {ratio(b_o, b_fl)} | {ratio(b_o, b_cd)} | {fmt(d_o)} | "
                        f"{fmt(d_fl)} | {ratio(d_o, d_fl)} | {ratio(d_o, b_o)} |" + also(dt, hd, s, c, f_fl))
    if a.gqa:
        lines += ["", "GQA (torch: `enable_gqa=True`, or K/V expanded where a backend refuses it; "
                  "torch flash det = n/a, anchor_gqa.py has no deterministic mode):", "", head, sep]
        for dt in a.dtype:
            for s in a.seqlen:
                for c in (False, True):
                    b = max(1, a.tokens // s)
                    f_o = ours_value("fwd", False, dt, 128, s, c, hk, impl=a.fwd_impl)
                    b_o = ours_value("bwd", False, dt, 128, s, c, hk)
                    d_o = ours_value("bwd", True, dt, 128, s, c, hk)
                    f_fl, how_f = torch_value(gqa_rows, "flash", dt, 128, s, c, "fwd")
                    f_cd, how_c = torch_value(gqa_rows, "cudnn", dt, 128, s, c, "fwd")
                    b_fl, _ = torch_value(gqa_rows, "flash", dt, 128, s, c, "bwd")
                    b_cd, _ = torch_value(gqa_rows, "cudnn", dt, 128, s, c, "bwd")
                    mark = lambda how: " (expanded)" if how == "expanded" else ""
                    note_close(dt, 128, s, c, b, hq, hk, f_o, f_cd, b_o, b_cd)
                    lines.append(
                        f"| {dt} | 128 | {s} | {'yes' if c else 'no'} | {b} x {hq}:{hk} | {fmt(f_o)} | "
                        f"{fmt(f_fl)}{mark(how_f)} | {fmt(f_cd)}{mark(how_c)} | {ratio(f_o, f_fl)} | "
                        f"{ratio(f_o, f_cd)} | {fmt(b_o)} | {fmt(b_fl)} | {fmt(b_cd)} | {ratio(b_o, b_fl)} | "
                        f"{ratio(b_o, b_cd)} | {fmt(d_o)} | n/a | n/a | {ratio(d_o, b_o)} |"
                        + also(dt, 128, s, c, f_fl, hk))
    when = f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC"
    if a.from_json:
        when = f"rendered {when} from {a.from_json}"
    header = (f"{when}, {ours[0].get('gpu', '?') if ours else '?'}; command: {' '.join(sys.argv)}"
              "\n\n")

    def write(paired):
        text = header + "\n".join(lines + render_pairs(a, paired)) + "\n"
        with open(a.out + ".md", "w") as f:
            f.write(text)
        if not a.from_json:
            with open(a.out + ".json", "w") as f:
                json.dump({"ours": ours, "torch": torch_rows, "torch_det": det_rows,
                           "torch_gqa": gqa_rows, "paired": paired}, f, indent=1)
        return text

    # Written before the pairs run too, so that a call cut short during them keeps the grid.
    text = write(paired)
    if close and not a.from_json:
        text = write(measure_pairs(a, close))
    print(text, end="")


if __name__ == "__main__":
    main()
