#!/usr/bin/env bash
# Session 33's call, on whatever GPU comes (branches staged with tools/device/stage_branch.sh):
# 1. s33-interleave (dV / dK issued k-step by k-step while P^T / dS^T are packed) against main as
#    tools/device/branch_bwd_call.sh does it: its Hopper backward suites, example 37, ABBA rows.
# 2. On an H200: the bf16 grid (torch in the same call) of whichever of the two gained, by
#    GRID_LIMIT (default 590), then det / atomic and cuobjdump's counts; nothing else.
# 3. On any other GPU: the exp2 share on the FMA pipe (s33-poly-q: a quarter of the
#    probabilities, s33-poly-h: half; both on top of s33-interleave): poly-h's `every dtype`
#    suite, then rows in rounds interleave, poly-q, poly-h and back, until second 560.
source "$(dirname "$0")/../call_env.sh"
alt=s33-interleave
check_branch_bwd $alt || { echo "suites failed at ${SECONDS}s: no benchmark"; exit 1; }
rows=$out/abba.txt
abba_bwd_rows $alt "$rows" "128 2048 8 16 16 none" "128 8192 2 16 16 none" \
  "128 8192 2 16 16 causal_top_left" "128 16384 1 32 8 causal_top_left" "64 8192 2 16 16 none" \
  "128 8192 2 16 16 none det"
gain=$(abba_gain "$rows" $alt)
echo "hdim 128 rows, branch / main: $gain"
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  awk -v g="$gain" 'BEGIN { exit !(g >= 1.01) }' && b=.carry/alt/$alt && echo "grid: the branch's"
  grid_and_counts "${GRID_LIMIT:-590}"
  exit 0
fi
warm_sm90a .carry/alt/s33-poly-h/fmha-jit
STOP_ON_FAIL=1 run_gpu_suites .carry/alt/s33-poly-h/fmha_jit_gpu_tests "gpu sm90a bwd: every dtype*" 150 ||
  { echo "poly-h failed at ${SECONDS}s"; exit 1; }
ROWS_UNTIL=560 rounds_bwd_rows "$out/poly.txt" "$alt s33-poly-q s33-poly-h" "128 8192 2 16 16 none" \
  "128 2048 8 16 16 none" "128 16384 1 32 8 causal_top_left" "64 8192 2 16 16 none" \
  "256 8192 2 8 8 none"
echo "done at ${SECONDS}s"
