#!/usr/bin/env bash
# Session 32's call: main (kernel and library code as in session 28) on whatever GPU came, asked
# for as an H200 (the issue's card; no H200 grid since session 26). 1. The bf16 grid (forward and
# backward, torch in the same call), rows under 1.03 x cuDNN measured again alternating with
# cuDNN. 2. Deterministic and atomic interleaved on GQA S 8192 causal, cuobjdump's counts. 3. The
# Hopper backward suites and examples 37 / 01 on this card, as far as the call's time allows.
# Everything under /tmp/grid, back as one tarball (saved after each step).
source "$(dirname "$0")/call_env.sh"
back=$out
out=/tmp/grid/logs
mkdir -p "$out"
ROWS_FILE=/tmp/grid/rows.txt
PAIR_BELOW=${PAIR_BELOW:-1.03} run_grid 420 bf16
tar czf "$back/grid.tgz" -C /tmp grid
det_atomic_rows "gqa8k|--hdim-q 128 --nhead-q 32 --nhead-k 8 --seqlen-q 8192 --batch 2"
sass_counts
tar czf "$back/grid.tgz" -C /tmp grid
left=$((575 - SECONDS))
if [ "$left" -gt 240 ]; then
  warm_sm90a $b/fmha-jit
  run_gpu_suites $b/fmha_jit_gpu_tests "gpu sm90a bwd: every dtype*;gpu sm90a bwd: deterministic*;\
gpu sm90a bwd: causal launches*" 60
  run_examples
else
  echo "suites skipped: ${left}s left"
fi
tar czf "$back/grid.tgz" -C /tmp grid
echo "done at ${SECONDS}s"
