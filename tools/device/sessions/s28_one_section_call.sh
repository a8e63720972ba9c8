#!/usr/bin/env bash
# For session 28: branch s28-one-section (hdim 256 chains longer than the SMs all ascend in one
# section) against main. Stage from main first:
#   tools/device/stage_branch.sh s28-one-section
# Its deterministic suite (the GQA 4:1 S 8704 hdim 256 case runs the new plan at 8 pairs) and
# example 37 at hdim 256, then ABBA rows at 2 and 4 pairs and two lengths, the atomic rows beside.
# Run from the repository root with .carry/ staged; logs go to $OUT.
source "$(dirname "$0")/../call_env.sh"
warm_branch s28-one-section
SUITES="gpu sm90a bwd: deterministic*" BRANCH=s28-one-section ABBA=1 ROWS="\
bwd,256,16384,1,8,2,causal_top_left,1 bwd,256,16384,1,16,4,causal_top_left,1 \
bwd,256,16384,2,8,2,causal_top_left,1 bwd,256,12288,1,8,2,causal_top_left,1 \
bwd,256,8192,2,8,2,causal_top_left,1 bwd,256,16384,1,8,2,causal_top_left,0 \
bwd,256,16384,1,16,4,causal_top_left,0" bash "$(dirname "$0")/../ab_branch_call.sh"
