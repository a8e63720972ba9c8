#!/usr/bin/env bash
# Session 27: the dQ writer reading its next turn's semaphore ahead (build pollahead) against main:
# its deterministic suite and example 37 at hdim 256, then ABBA rows (hdim 256 GQA / MHA, where the
# writer bound the visit in call 2's trace, and the hdim 64 / 128 controls), plus the SASS of an
# acquire load (acq.cubin). Run from the repository root with .carry/ staged; logs go to $OUT.
source "$(dirname "$0")/../call_env.sh"
/usr/local/cuda/bin/cuobjdump -sass .carry/acq.cubin | grep -E "LDG|STG|MEMBAR|CCTL|FENCE|ERRBAR" \
  | sed 's/^ */acq.cubin: /'
warm_branch pollahead
SUITES="gpu sm90a bwd: deterministic*" BRANCH=pollahead ABBA=1 ROWS="\
bwd,256,16384,1,8,2,causal_top_left,1 bwd,256,8192,2,8,2,causal_top_left,1 \
bwd,256,16384,1,8,8,causal_top_left,1 bwd,256,2048,8,8,8,none,1 \
bwd,128,16384,1,32,8,causal_top_left,1 bwd,128,8192,2,16,16,none,1 \
bwd,64,16384,1,32,8,causal_top_left,1 bwd,128,8192,2,16,16,none,0 \
bwd,256,16384,1,8,2,causal_top_left,0" bash "$(dirname "$0")/../ab_branch_call.sh"
