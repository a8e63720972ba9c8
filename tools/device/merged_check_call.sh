#!/usr/bin/env bash
# One device call after patches merge into main: the Hopper gpu suites they touch (kernels
# compiled up front on all cores), examples 37 and 01, then the grid of BENCHMARKS.md for each
# dtype of DTYPE (default "bf16 fp16") with torch in the same call, each under what is left of
# LIMIT seconds (default 570) so that the call ends inside the device tool's 600 s. Run from the
# repository root with .carry/ staged (warmed .carry/cache: see sm90_grid_only_call.sh); logs go
# to $OUT.
source "$(dirname "$0")/call_env.sh"
sweep=/tmp/sm90a-sweep.json
python3 - "$sweep" <<'PY'
import json, sys
masks = ["none", "causal_top_left", "causal_bottom_right", "sliding_window"]
json.dump([{"family": ["fwd", "bwd"], "dtype": ["fp16", "bf16"], "hdim_q": d, "hdim_v": d,
            "mask": masks, "deterministic": [False, True], "lse": [False, True], "arch": "sm_90"}
           for d in (64, 128, 256)], open(sys.argv[1], "w"))
PY
timeout 120 $b/fmha-jit prebuild "$sweep" -j "$(nproc)" 2>&1 | tail -1
run_gpu_suites $b/fmha_jit_gpu_tests \
  "${SUITES:-gpu sm90a fwd*;gpu sm90a bwd: every dtype*;gpu sm90a bwd: deterministic*}" 150
run_examples
[ -d .carry/cache ] && export FMHA_JIT_CACHE_DIR=$PWD/.carry/cache
mkdir -p /tmp/grid
for dtype in ${DTYPE:-bf16 fp16}; do
  left=$((${LIMIT:-570} - SECONDS))
  [ "$left" -lt 60 ] && echo "grid $dtype: skipped, ${left}s left" && continue
  timeout "$left" python3 tools/bench/grid_vs_torch.py --fmha-jit $b/fmha-jit \
    --anchor .carry/anchor_sdpa.py --dtype "$dtype" --fwd-impl auto \
    --out "/tmp/grid/grid_$dtype" > "$out/grid_log_$dtype.txt" 2>&1
  echo "grid $dtype rc=$? at ${SECONDS}s"
  cp /tmp/grid/grid_$dtype.md /tmp/grid/grid_$dtype.json "$out/" 2>/dev/null
  tail -3 "$out/grid_log_$dtype.txt"
done
echo "done at ${SECONDS}s"
