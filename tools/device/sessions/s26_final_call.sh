#!/usr/bin/env bash
# Session 26's last call: main with det_alternate (the walking chains alternate direction pair by
# pair): the Hopper backward suites and examples 37 / 01, then ABBA against main before it
# (s26-base, staged with tools/device/stage_branch.sh) on the GQA causal deterministic rows, the
# MHA control and the atomic GQA S 16384 row. Run from the repository root with .carry/ staged.
source "$(dirname "$0")/../call_env.sh"
check_main "gpu sm90a bwd: every dtype*;gpu sm90a bwd: deterministic*;\
gpu sm90a bwd: causal launches*;gpu sm90a bwd: seqlen 1*"
BRANCH=s26-base ABBA=1 ROWS="bwd,128,16384,1,32,8,causal_top_left,1 \
bwd,128,8192,2,32,8,causal_top_left,1 bwd,128,2048,8,32,8,causal_top_left,1 \
bwd,128,8192,2,16,16,causal_top_left,1 bwd,128,16384,1,32,8,causal_top_left,0" \
  bash "$(dirname "$0")/../ab_branch_call.sh"
echo "call done at ${SECONDS}s"
