#!/usr/bin/env bash
# The grid of BENCHMARKS.md for each dtype of DTYPE (default bf16; "bf16 fp16" runs both) with
# torch in the same call, then the SASS counts of the Hopper backward cubins it compiled. GRID_FLAGS
# narrows the grid for a call short of time, e.g. "--families bwd --torch-backends cudnn" after a
# change that left the forward alone. A kernel cache warmed here in .carry/cache is used when
# present, so the call compiles nothing:
#   tools/device/stage.sh && build-release/bin/fmha-jit prebuild configs/grid-sm90.json \
#       --cache-dir .carry/cache
# Run from the repository root with .carry/ staged; logs go to $OUT.
source "$(dirname "$0")/call_env.sh"
[ -d .carry/cache ] && export FMHA_JIT_CACHE_DIR=$PWD/.carry/cache
# The device tool brings back only a few files: the grid's intermediate files stay in /tmp, the
# table (.md), every row (.json) and the log come back.
mkdir -p /tmp/grid
for dtype in ${DTYPE:-bf16}; do
  timeout 540 python3 tools/bench/grid_vs_torch.py --fmha-jit $b/fmha-jit --anchor .carry/anchor_sdpa.py \
    --dtype "$dtype" --fwd-impl auto ${GRID_FLAGS:-} --out "/tmp/grid/grid_$dtype" \
    > "$out/grid_log_$dtype.txt" 2>&1
  echo "grid $dtype rc=$? at ${SECONDS}s"
  cp /tmp/grid/grid_$dtype.md /tmp/grid/grid_$dtype.json "$out/" 2>/dev/null
  tail -3 "$out/grid_log_$dtype.txt"
done
for cubin in $(grep -l '"family": "bwd"' $FMHA_JIT_CACHE_DIR/v1/entries/*/*/manifest.json |
  xargs grep -l wgmma_sm90a | xargs grep -l '"deterministic": true' | head -3); do
  sass=$(cuobjdump --dump-sass "$(dirname "$cubin")/kernel.cubin" 2>&1)
  echo "$(grep -o '"hdim_q": [0-9]*' "$cubin") det: HGMMA=$(grep -c HGMMA <<<"$sass") STL=$(grep -c STL <<<"$sass") UTMAREDG=$(grep -c UTMAREDG <<<"$sass")"
done
echo "done at ${SECONDS}s"
