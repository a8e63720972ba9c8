#!/usr/bin/env bash
# The grid of BENCHMARKS.md for one dtype (DTYPE, default bf16) with torch in the same call, then
# the SASS counts of the Hopper backward cubins it compiled. Run from the repository root with
# .carry/ staged (tools/device/stage.sh); logs go to $OUT.
source "$(dirname "$0")/call_env.sh"
dtype=${DTYPE:-bf16}
# The device tool brings back only a few files: the grid's intermediate files stay in /tmp, the
# table (.md), every row (.json) and the log come back.
mkdir -p /tmp/grid
timeout 540 python3 tools/bench/grid_vs_torch.py --fmha-jit $b/fmha-jit --anchor .carry/anchor_sdpa.py \
  --dtype "$dtype" --fwd-impl auto --out "/tmp/grid/grid_$dtype" > "$out/grid_log_$dtype.txt" 2>&1
echo "grid $dtype rc=$? at ${SECONDS}s"
cp /tmp/grid/grid_$dtype.md /tmp/grid/grid_$dtype.json "$out/"
tail -3 "$out/grid_log_$dtype.txt"
for cubin in $(grep -l '"family": "bwd"' $FMHA_JIT_CACHE_DIR/v1/entries/*/*/manifest.json |
  xargs grep -l wgmma_sm90a | xargs grep -l '"deterministic": true' | head -3); do
  sass=$(cuobjdump --dump-sass "$(dirname "$cubin")/kernel.cubin" 2>&1)
  echo "$(grep -o '"hdim_q": [0-9]*' "$cubin") det: HGMMA=$(grep -c HGMMA <<<"$sass") STL=$(grep -c STL <<<"$sass") UTMAREDG=$(grep -c UTMAREDG <<<"$sass")"
done
echo "done at ${SECONDS}s"
