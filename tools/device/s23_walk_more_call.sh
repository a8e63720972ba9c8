#!/usr/bin/env bash
# Session 23's second call (short budget): ab-plan-9c.txt's three sets, then the walk's cells up
# (FMHA_JIT_BWD_DET_UP_CELLS, walk-u build) on GQA 32:8 S 8192 causal, up and back down, then the
# walk's dq / dk / dv against head-major's byte for byte (u = 2 against u = 0) in two cases. Run
# from the repository root with .carry/ staged; logs go to $OUT.
source "$(dirname "$0")/call_env.sh"
PLAN=tools/device/patches/ab-plan-9c.txt LIMIT=${LIMIT:-75} bash "$(dirname "$0")/patches_ab_call.sh"
echo "=== cells up at ${SECONDS}s"
sweep_up_cells 128 8192 2 32 8 "0 1 2 3 4"
echo "=== bit for bit at ${SECONDS}s"
for case in "128 3001 3001 causal" "128 1500 3001 causal-br"; do
  read -r d sq sk m <<<"$case"
  compare_walk_bits .carry/alt/walk-u/fmha-jit "$d" "$sq" "$sk" "$m"
done
echo "all done at ${SECONDS}s"
