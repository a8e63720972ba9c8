#!/usr/bin/env bash
# Session 24's one call for the merge of the walk and the deterministic sections: the merged build
# (.carry/bin) against main before it (.carry/alt/s24-base: `git branch s24-base f72ff97;
# tools/device/stage_branch.sh s24-base`), ABBA on
# the deterministic causal rows the two change; the atomic section sweep of docs/SM90.md Next 0c
# (.carry/alt/sec-k); then the backward suites, examples and the bf16 backward grid with torch
# (merged_check_call.sh) in what is left of LIMIT seconds (default 480; GRID=0 skips the grid,
# SWEEP=0 the sweep). Run from the repository root with .carry/ staged; everything comes back in
# $OUT/s24.tgz.
back=${OUT:-/tmp}
mkdir -p "$back"
here=$(dirname "$0")/..
mkdir -p /tmp/s24
export OUT=/tmp/s24
start=$SECONDS
(
  source "$here/call_env.sh"
  warm_sm90a $b/fmha-jit
  warm_sm90a .carry/alt/s24-base/fmha-jit
) 2>&1 | tail -4
OUT=/tmp/s24/ab BRANCH=s24-base ABBA=1 ROWS="${ROWS:-bwd,128,8192,2,32,8,causal_top_left,1 \
bwd,128,2048,8,32,8,causal_top_left,1 bwd,128,8192,2,16,16,causal_top_left,1 \
bwd,128,2048,8,16,16,causal_top_left,1 bwd,64,2048,8,32,32,causal_top_left,1 \
bwd,256,2048,8,8,8,causal_top_left,1}" bash "$here/ab_branch_call.sh" 2>&1 | tail -26
[ "${SWEEP:-1}" = 1 ] && OUT=/tmp/s24/sweep ROWS="128,16384,1,32,8:1 2 4 8" \
  bash "$here/section_sweep_call.sh" 2>&1 | tail -10
left=$((${LIMIT:-480} - (SECONDS - start)))
[ "${GRID:-1}" = 1 ] || left=0  # suites and examples only
OUT=/tmp/s24/merged SUITES="gpu sm90a bwd: every dtype*;gpu sm90a bwd: deterministic*" \
  FAMILIES=bwd DTYPE=bf16 LIMIT=$left bash "$here/merged_check_call.sh" 2>&1 | tail -30
tar czf "$back/s24.tgz" -C /tmp s24
echo "all done at $((SECONDS - start))s"
