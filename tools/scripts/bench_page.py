#!/usr/bin/env python3
"""Measures fmha-jit next to PyTorch's SDPA on one GPU and writes BENCHMARKS.md from the figures.

On a GPU machine, in one process tree:
  1. `fmha-jit prebuild` of the grid's kernels on every core, so that no timing waits on a compile;
  2. `fmha-jit bench --sweep` over the grid: forward, backward, deterministic backward;
  3. torch_sdpa.py over the same sweep file: torch's flash (FlashAttention-2) and cuDNN backends,
     forward and backward, and flash's deterministic backward;
  4. `fmha-jit bench-jit` over the grid's kernels: cold compile, disk hit, in-process hit;
  5. interleave_vs_cudnn.py on the rows whose ours / cuDNN reads under --pair-below, while time is
     left under --time-limit;
then writes the page (--out) and every figure (--json, by default next to the page). The JSON is
written after each step, so a run cut short keeps what it measured. --from-json FILE renders a
saved JSON again (no GPU, no torch); --self-check renders a synthetic one and checks the tables.

  python3 tools/scripts/bench_page.py --fmha-jit .carry/bin/fmha-jit --out $OUT/BENCHMARKS.md
  python3 tools/scripts/bench_page.py --from-json $OUT/BENCHMARKS.json --out BENCHMARKS.md

The default grid (bf16; hdim 64 / 128 / 256; S 512 to 16384; causal and not; GQA 32:8 at hdim 128)
takes about five minutes on an H100.
"""
import argparse
import datetime
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULTS = {"dtype": ["bf16"], "hdim": [64, 128, 256], "seqlen": [512, 2048, 8192, 16384],
            "gqa": "32:8", "gqa_hdim": 128, "tokens": 16384, "model_dim": 2048, "repeat": 10,
            "warmup": 3}


# ------------------------------------------------------------------------------------------------
# The grid


def shapes(grid):
    """Every problem of the page, in table order: per dtype, the equal-head rows (heads =
    model_dim / hdim), then the GQA rows; batch = tokens / seqlen."""
    out = []
    for dtype in grid["dtype"]:
        heads = [(hd, grid["model_dim"] // hd, grid["model_dim"] // hd) for hd in grid["hdim"]]
        if grid["gqa"]:
            hq, hk = map(int, grid["gqa"].split(":"))
            heads.append((grid["gqa_hdim"], hq, hk))
        for hdim, hq, hk in heads:
            for seqlen in grid["seqlen"]:
                for causal in (False, True):
                    out.append(dict(dtype=dtype, hdim=hdim, seqlen=seqlen, causal=causal,
                                    batch=max(1, grid["tokens"] // seqlen), nhead_q=hq,
                                    nhead_k=hk))
    return out


def sweep_document(grid):
    """The sweep file both `fmha-jit bench` and torch_sdpa.py read: per shape group, the forward,
    then the backward in both dQ modes."""
    groups = [{"hdim": grid["hdim"], "model_dim": grid["model_dim"]}]
    if grid["gqa"]:
        hq, hk = map(int, grid["gqa"].split(":"))
        groups.append({"hdim": grid["gqa_hdim"], "nhead_q": hq, "nhead_k": hk})
    doc = []
    for group in groups:
        common = dict(dtype=grid["dtype"], seqlen=grid["seqlen"], causal=[False, True],
                      tokens=grid["tokens"], **group)
        doc += [dict(common, family="fwd"), dict(common, family="bwd", deterministic=[False, True])]
    return doc


def kernel_configs(grid):
    """The grid's kernels as a prebuild / bench-jit config file (the GPU's arch)."""
    hdims = sorted(set(grid["hdim"]) | ({grid["gqa_hdim"]} if grid["gqa"] else set()))
    return [{"family": ["fwd", "bwd"], "dtype": grid["dtype"], "hdim_q": hd, "hdim_v": hd,
             "mask": ["none", "causal_top_left"], "deterministic": [False, True]} for hd in hdims]


def regenerate_command(grid, fmha_jit):
    """The command line that measures this grid again and rewrites BENCHMARKS.md."""
    cmd = ["python3", "tools/scripts/bench_page.py", "--fmha-jit", fmha_jit, "--out", "BENCHMARKS.md"]
    for key, default in DEFAULTS.items():
        value = grid[key]
        if value != default:
            flag = "--" + key.replace("_", "-")
            cmd += [flag, *map(str, value)] if isinstance(value, list) else [flag, str(value)]
    return shlex.join(cmd)


# ------------------------------------------------------------------------------------------------
# Measuring (GPU machine)


class Runner:
    """Runs the steps' commands with the carried libraries on the path, times each step and
    keeps the document on disk after every step."""

    def __init__(self, a, doc):
        self.a, self.doc, self.start = a, doc, time.monotonic()
        self.env = dict(os.environ, PYTHONUNBUFFERED="1")
        # A staged build (.carry/bin) keeps the libraries an image may lack in .carry/lib.
        libs = os.path.join(os.path.dirname(os.path.abspath(a.fmha_jit)), "..", "lib")
        if os.path.isdir(libs):
            self.env["LD_LIBRARY_PATH"] = os.pathsep.join(
                p for p in (os.path.abspath(libs), self.env.get("LD_LIBRARY_PATH")) if p)

    def elapsed(self):
        return time.monotonic() - self.start

    def run(self, cmd):
        """cmd's standard output; it is killed when the run reaches --time-limit."""
        left = self.a.time_limit - self.elapsed()
        if left <= 0:
            raise subprocess.TimeoutExpired(cmd, 0)
        print(f"[{self.elapsed():4.0f} s] + {shlex.join(cmd)}", file=sys.stderr, flush=True)
        return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True, env=self.env,
                              timeout=left).stdout

    def fail(self, name, why):
        self.doc.setdefault("failed", {})[name] = why
        print(f"{name} failed: {why}", file=sys.stderr, flush=True)

    def step(self, name, fn):
        """fn() into doc[name]; a failed step is recorded and the later ones still run."""
        begin = self.elapsed()
        try:
            self.doc[name] = fn()
        except subprocess.CalledProcessError as e:  # its own messages went to standard error
            self.fail(name, f"{os.path.basename(e.cmd[1 if e.cmd[0] == sys.executable else 0])} "
                      f"exited with status {e.returncode}")
        except subprocess.TimeoutExpired:
            self.fail(name, f"stopped at --time-limit ({self.a.time_limit:.0f} s)")
        except (OSError, ValueError) as e:
            self.fail(name, str(e)[:300])
        self.doc.setdefault("elapsed_s", {})[name] = round(self.elapsed() - begin, 1)
        with open(self.a.json, "w") as f:
            json.dump(self.doc, f, indent=1)


def gpu_and_driver():
    out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         check=True, stdout=subprocess.PIPE, text=True).stdout
    name, _, driver = out.splitlines()[0].rpartition(",")
    return name.strip(), driver.strip()


def host_cpu():
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f
                         if line.startswith("model name"))
    except (OSError, StopIteration):
        model = "unknown CPU"
    return f"{model}, {os.cpu_count()} cores"


def close_rows(doc, below, limit):
    """interleave_vs_cudnn.py row specs of the forward / backward rows under `below` x cuDNN,
    the closest first, at most `limit`."""
    found = []
    for s in shapes(doc["grid"]):
        for fam in ("fwd", "bwd"):
            ratio = as_ratio(ours_figure(doc, s, fam, False), torch_figure(doc, s, fam, "cudnn"))
            if ratio is not None and ratio < below:
                mask = "causal" if s["causal"] else "none"
                spec = (f"{fam},{s['hdim']},{s['seqlen']},{s['batch']},{s['nhead_q']},"
                        f"{s['nhead_k']},{mask}")
                found.append((ratio, s["dtype"], spec))
    return sorted(found)[:limit]


def measure(a):
    grid = {key: getattr(a, key) for key in DEFAULTS}
    gpu, driver = gpu_and_driver()
    doc = {"schema": 1, "grid": grid, "gpu": gpu, "driver": driver, "host": host_cpu(),
           "date": f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
           "command": regenerate_command(grid, a.fmha_jit), "pair_below": a.pair_below}
    work = a.work or tempfile.mkdtemp(prefix="bench-page-")
    os.makedirs(work, exist_ok=True)
    sweep, configs = os.path.join(work, "sweep.json"), os.path.join(work, "kernels.json")
    with open(sweep, "w") as f:
        json.dump(sweep_document(grid), f, indent=1)
    with open(configs, "w") as f:
        json.dump(kernel_configs(grid), f, indent=1)
    r = Runner(a, doc)
    reps = ["--repeat", str(a.repeat), "--warmup", str(a.warmup)]
    r.step("prebuild", lambda: r.run([a.fmha_jit, "prebuild", configs]).strip().splitlines()[-1:])
    r.step("ours", lambda: json.loads(r.run([a.fmha_jit, "bench", "--sweep", sweep, "--json",
                                             *reps])))
    torch_json = os.path.join(work, "torch.json")

    def torch_rows():
        r.run([sys.executable, os.path.join(HERE, "torch_sdpa.py"), "--sweep", sweep, "--reps",
               str(a.repeat), "--warmup", str(a.warmup), "--json", torch_json])
        with open(torch_json) as f:
            return json.load(f)
    r.step("torch", torch_rows)
    r.step("jit", lambda: json.loads(r.run([a.fmha_jit, "bench-jit", "--config", configs,
                                            "--json", "--cold-rounds", str(a.cold_rounds)])))
    left = a.time_limit - r.elapsed()
    rows = close_rows(doc, a.pair_below, a.pair_max) if "torch" in doc and "ours" in doc else []
    if rows and left < 60:
        print(f"close rows not paired: {left:.0f} s left of --time-limit", file=sys.stderr)
    elif rows:
        r.step("paired", lambda: paired(r, rows, work))
    print(f"[{r.elapsed():4.0f} s] measured", file=sys.stderr, flush=True)
    return doc


def paired(r, rows, work):
    """interleave_vs_cudnn.py on the close rows, per dtype; the rows it finished if it is stopped
    at --time-limit (it writes its JSON after every row)."""
    a, out = r.a, []
    for dtype in sorted({d for _, d, _ in rows}):
        path = os.path.join(work, f"paired_{dtype}.json")
        specs = [x for _, d, spec in rows if d == dtype for x in ("--row", spec)]
        try:
            r.run([sys.executable, os.path.join(HERE, "interleave_vs_cudnn.py"), "--fmha-jit",
                   a.fmha_jit, "--dtype", dtype, "--rounds", str(a.pair_rounds), "--reps",
                   str(a.repeat), "--warmup", str(a.warmup), "--json", path, *specs])
        except subprocess.TimeoutExpired:
            print(f"paired rows of {dtype} stopped at --time-limit", file=sys.stderr)
        if os.path.exists(path):
            with open(path) as f:
                out += json.load(f)
    return out
    print(f"[{r.elapsed():4.0f} s] measured", file=sys.stderr, flush=True)
    return doc


# ------------------------------------------------------------------------------------------------
# Rendering (anywhere)


def ours_figure(doc, s, family, deterministic):
    for row in doc.get("ours", []):
        if (row.get("family"), bool(row.get("deterministic")), row.get("dtype"), row.get("hdim_q"),
                row.get("seqlen_q"), row.get("mask") == "causal", row.get("batch"),
                row.get("nhead_q"), row.get("nhead_k")) == (
                family, deterministic, s["dtype"], s["hdim"], s["seqlen"], s["causal"],
                s["batch"], s["nhead_q"], s["nhead_k"]):
            return row.get("tflops")
    return None


def torch_figure(doc, s, family, backend, deterministic=False):
    """TFLOP/s, "error" for a refused shape, or None where torch was not measured."""
    for row in doc.get("torch", {}).get("rows", []):
        if (row["backend"], row["family"], bool(row.get("deterministic")), row["dtype"],
                row["hdim"], row["seqlen"], row["causal"], row["batch"], row["nhead_q"],
                row["nhead_k"]) == (backend, family, deterministic, s["dtype"], s["hdim"],
                                    s["seqlen"], s["causal"], s["batch"], s["nhead_q"],
                                    s["nhead_k"]):
            return "error" if "error" in row else row.get("tflops")
    return None


def number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def as_ratio(a, b):
    return a / b if number(a) and number(b) and b else None


def cell(x, spec=".1f"):
    if number(x):
        return format(x, spec)
    return "error" if x == "error" else "–"


def shape_cells(s):
    return [str(s["hdim"]), str(s["seqlen"]), "yes" if s["causal"] else "no",
            f"{s['batch']} × {s['nhead_q']}:{s['nhead_k']}"]


def table(head, rows):
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head),
            *("| " + " | ".join(r) + " |" for r in rows)]


def comparison_rows(doc, dtype):
    """Per shape of `dtype`: the figures of the three tables and their ratios."""
    out = []
    for s in shapes(doc["grid"]):
        if s["dtype"] != dtype:
            continue
        f = {"shape": s}
        for fam in ("fwd", "bwd"):
            f[fam] = ours_figure(doc, s, fam, False)
            f[fam + "_cudnn"] = torch_figure(doc, s, fam, "cudnn")
            f[fam + "_fa2"] = torch_figure(doc, s, fam, "flash")
        f["det"] = ours_figure(doc, s, "bwd", True)
        f["det_fa2"] = torch_figure(doc, s, "bwd", "flash", deterministic=True)
        out.append(f)
    return out


RATIOS = [  # (summary label, numerator, denominator)
    ("forward / cuDNN", "fwd", "fwd_cudnn"), ("forward / FA2", "fwd", "fwd_fa2"),
    ("backward / cuDNN", "bwd", "bwd_cudnn"), ("backward / FA2", "bwd", "bwd_fa2"),
    ("deterministic / our atomic backward", "det", "bwd"),
    ("deterministic / FA2 deterministic", "det", "det_fa2")]


def summary(rows):
    body = []
    for label, num, den in RATIOS:
        r = [x for x in (as_ratio(f[num], f[den]) for f in rows) if x is not None]
        if r:
            body.append([label, f"{min(r):.2f}", f"{statistics.median(r):.2f}", f"{max(r):.2f}",
                         f"{sum(x >= 1 for x in r)} of {len(r)}"])
    return table(["ours", "min", "median", "max", "rows ≥ 1.00"], body)


def family_table(rows, fam):
    body = [shape_cells(f["shape"]) + [cell(f[fam]), cell(f[fam + "_cudnn"]), cell(f[fam + "_fa2"]),
                                       cell(as_ratio(f[fam], f[fam + "_cudnn"]), ".2f"),
                                       cell(as_ratio(f[fam], f[fam + "_fa2"]), ".2f")]
            for f in rows]
    return table(["hdim", "S", "causal", "B × Hq:Hk", "ours", "cuDNN", "FA2", "ours / cuDNN",
                  "ours / FA2"], body)


def det_table(rows):
    body = [shape_cells(f["shape"]) + [cell(f["det"]), cell(f["bwd"]),
                                       cell(as_ratio(f["det"], f["bwd"]), ".2f"),
                                       cell(f["det_fa2"]),
                                       cell(as_ratio(f["det"], f["det_fa2"]), ".2f")]
            for f in rows]
    return table(["hdim", "S", "causal", "B × Hq:Hk", "ours det", "ours atomic",
                  "det / atomic", "FA2 det", "ours det / FA2 det"], body)


def paired_section(doc):
    paired = doc.get("paired", [])
    if not paired:
        return []
    body = []
    for p in paired:
        if "error" in p:
            body.append([p["dtype"], p["row"], "error: " + p["error"], "", ""])
            continue
        body.append([p["dtype"], p["row"], " / ".join(f"{x:.1f}" for x in p["ours"]),
                     " / ".join(f"{x:.1f}" for x in p["cudnn"]), f"{p['ratio']:.3f}"])
    return ["## Rows close to cuDNN, measured alternating", "",
            *prose("One table row is one draw of each side, minutes apart. The rows under "
                   f"{doc.get('pair_below', 1.03)} × cuDNN above were measured again by "
                   "`tools/scripts/interleave_vs_cudnn.py`, ours and cuDNN alternating (row: "
                   "family,hdim,S,batch,Hq,Hk,mask):"), "",
            *table(["dtype", "row", "ours (each round)", "cuDNN (each round)",
                    "ours / cuDNN (medians)"], body), ""]


def jit_section(doc):
    jit = doc.get("jit")
    if not jit:
        return []
    rounds = jit["cold_compile_per_kernel_s"][0]["samples"] if jit.get(
        "cold_compile_per_kernel_s") else 1

    compilers = ", ".join(c.split(" (")[0] for c in jit["compilers"])  # "nvrtc 13.0 (path, size)"

    def stat(s, spec, unit):
        return [f"{s[k]:{spec}} {unit}" for k in ("median", "min", "max")] + [str(s["samples"])]
    body = [["cold compile, one kernel", *stat(jit["cold_compile_s"], ".2f", "s")],
            ["setup, disk hit", *stat(jit["disk_hit_ms"], ".3f", "ms")],
            ["setup, in-process hit", *stat(jit["memory_hit_us"], ".2f", "µs")],
            ["key computation", *stat(jit["key_us"], ".1f", "µs")]]
    slowest = [[f"`{k['kernel']}`", f"{k['median']:.2f}", f"{k['min']:.2f}", f"{k['max']:.2f}"]
               for k in jit.get("cold_compile_per_kernel_s", [])[:5]]
    return ["## JIT", "", *prose(
            f"`fmha-jit bench-jit --cold-rounds {rounds}` over the grid's {jit['kernels']} kernels "
            f"({', '.join(jit['archs'])}; {compilers}) in a temporary cache, on "
            f"{doc.get('jit_host', doc.get('host', 'the GPU machine'))}. Each round compiles "
            "every kernel cold, one at a time; a disk hit is a new process's setup of a kernel "
            "in a warm cache, an in-process hit a repeated `setup_fmha_dispatcher` call."), "",
            *table(["measure", "median", "min", "max", "samples"], body), "",
            "Slowest cold compiles (seconds over the rounds):", "",
            *table(["kernel", "median", "min", "max"], slowest), ""]


def prose(text, bullet=False):
    """A paragraph or list item wrapped at 100 columns (code spans may wrap; markdown joins)."""
    return textwrap.wrap(text, 100, subsequent_indent="  " if bullet else "",
                         break_long_words=False, break_on_hyphens=False)


def determinism_note(doc):
    """How many of torch flash's deterministic rows gave bit-identical dQ twice."""
    det = [r for r in doc.get("torch", {}).get("rows", [])
           if r.get("deterministic") and "dq_bitwise_repro" in r]
    if not det:
        return []
    same = sum(bool(r["dq_bitwise_repro"]) for r in det)
    return prose(f"FA2 det gave bit-identical dQ in two backward calls on {same} of {len(det)} "
                 "rows; fmha-jit's deterministic mode is checked bit-exact by its gpu test suite "
                 "and example 37.") + [""]


# Sections other scripts write at the end of the page (python_bench.py, varlen_bench.py), kept as
# they are.
KEPT_SECTIONS = ("## Python package", "## Packed batches, sinks and softcap")


def kept_sections(path):
    """The page's trailing sections of KEPT_SECTIONS, or "" (no page yet, or none there)."""
    try:
        with open(path) as f:
            old = f.read()
    except OSError:
        return ""
    starts = [old.find("\n" + title + "\n") for title in KEPT_SECTIONS]
    starts = [i for i in starts if i >= 0]
    return "\n" + old[min(starts) + 1:] if starts else ""


def render(doc):
    grid = doc["grid"]
    t = doc.get("torch", {})
    versions = f"torch {t.get('torch', '?')}"
    if t.get("cudnn"):
        versions += f" (cuDNN {t['cudnn']})"
    gqa = f"; GQA {grid['gqa']} rows at hdim {grid['gqa_hdim']}" if grid["gqa"] else ""
    bullets = [
        f"**GPU**: {doc['gpu']}, driver {doc['driver']}; {versions}; {doc['date']}.",
        "**TFLOP/s**, FlashAttention's convention: forward = 4·B·Hq·Sq·Sk·D, halved when causal; "
        "backward = 2.5 × forward; the same count for every implementation of a row.",
        f"**Grid**: {', '.join(grid['dtype'])}; hdim {' / '.join(map(str, grid['hdim']))} with "
        f"{grid['model_dim']} / hdim heads{gqa}; batch = {grid['tokens']} / S.",
        f"**ours**: `fmha-jit bench`, median of {grid['repeat']} launches after {grid['warmup']} "
        "warm-up, CUDA events around each, inputs rotated through copies larger than L2. The "
        "backward is all its kernels; det is the deterministic dQ mode (bit-identical "
        "gradients run to run), atomic the default one.",
        "**torch**: `tools/scripts/torch_sdpa.py`, the same medians; FA2 = the `flash` backend "
        "(FlashAttention-2), cuDNN = the `cudnn` backend, FA2 det = `flash` under "
        "`torch.use_deterministic_algorithms(True)`; `error`: the backend refused the shape."]
    lines = ["# Benchmarks", "",
             "<!-- Generated by tools/scripts/bench_page.py; change the script, not this page. -->", "",
             *prose("Attention kernel throughput of fmha-jit next to PyTorch's SDPA backends on "
                    "the same GPU, measured by one command in one process tree."), ""]
    for b in bullets:
        lines += prose("- " + b, bullet=True)
    lines += ["", "Regenerated on a GPU machine by (tools/scripts/README.md says how to stage the build):",
              "", "```sh", doc["command"], "```", ""]
    if doc.get("note"):
        lines += prose(doc["note"]) + [""]
    if doc.get("failed"):
        lines += prose("Steps that failed in this run: " + "; ".join(
            f"{k}: {v}" for k, v in doc["failed"].items())) + [""]
    for dtype in grid["dtype"]:
        rows = comparison_rows(doc, dtype)
        suffix = f", {dtype}" if len(grid["dtype"]) > 1 else ""
        lines += [f"## Summary{suffix}", "", *summary(rows), "",
                  f"## Forward{suffix}", "", *family_table(rows, "fwd"), "",
                  f"## Backward{suffix}", "", *family_table(rows, "bwd"), "",
                  f"## Deterministic backward{suffix}", "", *det_table(rows), ""]
    lines += determinism_note(doc) + paired_section(doc) + jit_section(doc)
    return "\n".join(lines).rstrip() + "\n"


# ------------------------------------------------------------------------------------------------
# Self-check (no GPU)


def synthetic_doc():
    """A document shaped like a measured one, with figures that make known ratios: ours is 1.1 x
    cuDNN and 2.0 x FA2, det 0.95 x atomic and 3.0 x FA2 det; cuDNN refuses one shape."""
    grid = dict(DEFAULTS)
    doc = {"schema": 1, "grid": grid, "gpu": "Test GPU", "driver": "0.0", "host": "test CPU",
           "date": "2000-01-01 00:00 UTC", "command": regenerate_command(grid, "fmha-jit"),
           "ours": [], "torch": {"torch": "0.0", "cudnn": 1, "rows": []}, "pair_below": 1.03,
           "paired": [{"row": "bwd,128,512,32,16,16,none", "dtype": "bf16",
                       "ours": [101.0, 99.0, 100.0], "cudnn": [98.0, 99.0, 97.0],
                       "ratio": 100.0 / 98.0}],
           "jit": {"kernels": 2, "archs": ["sm_90a"], "compilers": ["nvrtc 13.0"],
                   "cold_compile_s": {"median": 1.3, "min": 0.6, "max": 2.1, "samples": 6},
                   "cold_compile_per_kernel_s": [
                       {"kernel": "k1", "median": 2.0, "min": 1.9, "max": 2.1, "samples": 3},
                       {"kernel": "k2", "median": 0.7, "min": 0.6, "max": 0.8, "samples": 3}],
                   "disk_hit_ms": {"median": 0.1, "min": 0.09, "max": 0.2, "samples": 40},
                   "memory_hit_us": {"median": 0.3, "min": 0.2, "max": 9.0, "samples": 10000},
                   "key_us": {"median": 13.0, "min": 12.0, "max": 20.0, "samples": 40}}}
    for i, s in enumerate(shapes(grid)):
        base = 100.0 + i
        common = dict(dtype=s["dtype"], batch=s["batch"], nhead_q=s["nhead_q"],
                      nhead_k=s["nhead_k"])
        for fam, det, value in (("fwd", False, 1.1 * base), ("bwd", False, 1.1 * base),
                                ("bwd", True, 1.045 * base)):
            doc["ours"].append(dict(common, family=fam, deterministic=det, hdim_q=s["hdim"],
                                    seqlen_q=s["seqlen"], mask="causal" if s["causal"] else "none",
                                    tflops=value))
        for backend, fam, det, value in (
                ("cudnn", "fwd", False, base), ("flash", "fwd", False, 0.55 * base),
                ("cudnn", "bwd", False, base), ("flash", "bwd", False, 0.55 * base),
                ("flash", "bwd", True, 1.045 * base / 3)):
            row = dict(common, backend=backend, family=fam, deterministic=det, hdim=s["hdim"],
                       seqlen=s["seqlen"], causal=s["causal"], tflops=value)
            if i == 0 and backend == "cudnn" and fam == "fwd":
                row = {k: v for k, v in row.items() if k != "tflops"} | {"error": "refused"}
            doc["torch"]["rows"].append(row)
    return doc


def self_check():
    doc = synthetic_doc()
    with tempfile.TemporaryDirectory() as d:  # the page must come back the same from its JSON
        path = os.path.join(d, "doc.json")
        with open(path, "w") as f:
            json.dump(doc, f)
        with open(path) as f:
            page = render(json.load(f))
    assert page == render(doc)
    lines = page.splitlines()
    n = len(shapes(doc["grid"]))
    # Each of the three per-row tables has one line per shape; the summary one per ratio.
    for title in ("## Forward", "## Backward", "## Deterministic backward"):
        start = lines.index(title) + 4
        rows = [x for x in lines[start:start + n + 1] if x.startswith("| ")]
        assert len(rows) == n, (title, len(rows), n)
    first_fwd = lines[lines.index("## Forward") + 4]
    want = "| 64 | 512 | no | 32 × 32:32 | 110.0 | error | 55.0 | – | 2.00 |"
    assert first_fwd == want, first_fwd
    det_row = lines[lines.index("## Deterministic backward") + 4]
    assert "| 0.95 | 34.8 | 3.00 |" in det_row, det_row
    for label in ("forward / cuDNN | 1.10 | 1.10 | 1.10 | 31 of 31",
                  "deterministic / our atomic backward | 0.95 | 0.95 | 0.95 | 0 of 32"):
        assert any(label in x for x in lines), label
    assert "| bf16 | bwd,128,512,32,16,16,none | 101.0 / 99.0 / 100.0 |" in page
    assert "| cold compile, one kernel | 1.30 s | 0.60 s | 2.10 s | 6 |" in page
    assert len(lines) < 300, len(lines)
    assert "--out BENCHMARKS.md" in page
    print(f"self-check passed: {len(lines)} lines, {n} rows per table")


# ------------------------------------------------------------------------------------------------


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--fmha-jit", help="the fmha-jit executable (measuring)")
    p.add_argument("--out", help="the page written (e.g. BENCHMARKS.md)")
    p.add_argument("--json", help="every figure (default: --out with .json)")
    p.add_argument("--from-json", help="render this saved JSON instead of measuring")
    p.add_argument("--self-check", action="store_true", help="render a synthetic JSON and check")
    p.add_argument("--work", help="folder for the sweep and intermediate files (default: a new "
                   "temporary one)")
    g = p.add_argument_group("grid")
    g.add_argument("--dtype", nargs="+", default=DEFAULTS["dtype"], choices=["bf16", "fp16"])
    g.add_argument("--hdim", nargs="+", type=int, default=DEFAULTS["hdim"])
    g.add_argument("--seqlen", nargs="+", type=int, default=DEFAULTS["seqlen"])
    g.add_argument("--gqa", default=DEFAULTS["gqa"], help="Hq:Hk of the GQA rows ('' for none)")
    g.add_argument("--gqa-hdim", type=int, default=DEFAULTS["gqa_hdim"])
    g.add_argument("--tokens", type=int, default=DEFAULTS["tokens"], help="batch = tokens / S")
    g.add_argument("--model-dim", type=int, default=DEFAULTS["model_dim"],
                   help="heads = model_dim / hdim")
    g.add_argument("--repeat", type=int, default=DEFAULTS["repeat"], help="timed launches")
    g.add_argument("--warmup", type=int, default=DEFAULTS["warmup"])
    m = p.add_argument_group("measuring")
    m.add_argument("--cold-rounds", type=int, default=3, help="bench-jit's rounds")
    m.add_argument("--pair-below", type=float, default=1.03,
                   help="rows under this x cuDNN are measured again alternating (0: none)")
    m.add_argument("--pair-max", type=int, default=6, help="at most this many such rows")
    m.add_argument("--pair-rounds", type=int, default=3)
    m.add_argument("--time-limit", type=float, default=500,
                   help="seconds from the start: a step still running then is stopped (the page "
                   "says so), and the paired rows start only with a minute left")
    a = p.parse_args()
    if a.self_check:
        self_check()
        return
    if not a.out or not (a.from_json or a.fmha_jit):
        p.error("give --out and either --fmha-jit (measure) or --from-json (render)")
    if a.from_json:
        with open(a.from_json) as f:
            doc = json.load(f)
    else:
        a.json = a.json or os.path.splitext(a.out)[0] + ".json"
        os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
        doc = measure(a)
    page = render(doc) + kept_sections(a.out)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        f.write(page)
    print(f"wrote {a.out} ({len(page.splitlines())} lines)", file=sys.stderr)


if __name__ == "__main__":
    main()
