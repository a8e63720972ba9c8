#!/usr/bin/env bash
# The backward half of BENCHMARKS.md's grid (both dQ modes) for each dtype of DTYPES (default
# "bf16 fp16") with cuDNN in the same call: for a device call short of time, after a change that
# left the forward alone. Kernels come from a cache warmed here, so the call compiles nothing:
#   tools/device/stage.sh && build-release/bin/fmha-jit prebuild configs/grid-sm90.json \
#       --cache-dir .carry/cache
# Run from the repository root with .carry/ staged; the tables, rows and logs go to $OUT.
source "$(dirname "$0")/call_env.sh"
[ -d .carry/cache ] && export FMHA_JIT_CACHE_DIR=$PWD/.carry/cache
mkdir -p /tmp/grid
for dtype in ${DTYPES:-bf16 fp16}; do
  timeout 250 python3 tools/bench/grid_vs_torch.py --fmha-jit $b/fmha-jit --anchor .carry/anchor_sdpa.py \
    --dtype "$dtype" --families bwd --torch-backends cudnn --out "/tmp/grid/bwd_$dtype" \
    > "$out/bwd_grid_log_$dtype.txt" 2>&1
  echo "bwd grid $dtype rc=$? at ${SECONDS}s"
  cp /tmp/grid/bwd_$dtype.md /tmp/grid/bwd_$dtype.json "$out/" 2>/dev/null
done
echo "done at ${SECONDS}s"
