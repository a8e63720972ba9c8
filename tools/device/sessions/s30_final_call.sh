#!/usr/bin/env bash
# Session 30's final call: main (code as in session 28; neither session 29 patch merged) on
# whatever GPU came. On an H200, the issue's card, the bf16 grid (forward and backward, torch in
# the same call) comes first; on an H100, whose grid session 28 ran, first the hdim 128 backward
# rows near 1.0 x cuDNN, ours and cuDNN alternating three times each
# (tools/bench/interleave_vs_cudnn.py), then the grid. Then deterministic and atomic interleaved
# on the grid's GQA S 8192 causal row (0.89 in session 28's grid, 0.99 interleaved), and
# cuobjdump's counts. Everything comes back in one tarball.
source "$(dirname "$0")/../call_env.sh"
back=$out
out=/tmp/grid/logs
mkdir -p "$out"
ROWS_FILE=/tmp/grid/rows.txt
interleave() {
  timeout 200 python3 tools/bench/interleave_vs_cudnn.py --fmha-jit $b/fmha-jit --rounds 3 \
    --row bwd,128,2048,8,16,16,none --row bwd,128,2048,8,16,16,causal \
    --row bwd,128,8192,2,16,16,none --row bwd,128,16384,1,16,16,none \
    --row bwd,128,16384,1,32,8,causal --json /tmp/grid/interleave.json 2>&1 |
    tee /tmp/grid/interleave.md
  echo "interleave done at ${SECONDS}s"
}
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  run_grid 380 bf16
  interleave
else
  interleave
  run_grid 420 bf16
fi
tar czf "$back/grid.tgz" -C /tmp grid  # kept if the call is cut short below
det_atomic_rows "gqa8k|--hdim-q 128 --nhead-q 32 --nhead-k 8 --seqlen-q 8192 --batch 2"
sass_counts
tar czf "$back/grid.tgz" -C /tmp grid
echo "done at ${SECONDS}s"
