#!/usr/bin/env bash
# Session 27: the dQ writer's turn read ahead with a relaxed load while the adds complete (build
# pa2ovr: pollahead2 with the override patch) against main: its deterministic suite and example
# 37 at hdim 256, ABBA rows, then hdim 256 GQA 8:2 S 16384 under the walk's overrides beside main's
# (build trace: main with the trace and override patches, tracing off). Run from the repository
# root with .carry/ staged; logs go to $OUT.
source "$(dirname "$0")/../call_env.sh"
warm_branch pa2ovr
SUITES="gpu sm90a bwd: deterministic*" BRANCH=pa2ovr ABBA=1 ROWS="\
bwd,256,16384,1,8,2,causal_top_left,1 bwd,256,8192,2,8,2,causal_top_left,1 \
bwd,256,16384,1,8,8,causal_top_left,1 bwd,256,2048,8,8,8,none,1 \
bwd,128,16384,1,32,8,causal_top_left,1 bwd,128,8192,2,16,16,causal_top_left,1 \
bwd,64,16384,1,32,8,causal_top_left,1 bwd,128,8192,2,32,8,causal_top_left,1" \
  bash "$(dirname "$0")/../ab_branch_call.sh" || exit 1
s16="--family bwd --mask causal --hdim-q 256 --nhead-q 8 --nhead-k 2 --seqlen-q 16384 --deterministic"
for o in up=1,walkup=3 up=1,walkup=1 up=1,walkup=0 up=1,alt=0,walkup=0; do
  for build in trace pa2ovr; do
    echo "$build [$o]: $(FMHA_JIT_BWD_DET_OVERRIDE=$o timeout 60 .carry/alt/$build/fmha-jit bench \
      $s16 --repeat 10 --warmup 3 2>&1 | tail -1)"
  done
done
echo "call done at ${SECONDS}s"
