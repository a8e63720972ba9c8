#!/usr/bin/env bash
# Session 34's call. The branch s34-compile (the hdim 64 / 128 consumers' walk a runtime flag:
# one copy of the tile code, the deterministic causal kernel's cold compile 3.65-4.33 s -> 2.16-2.82
# s) checked (Hopper backward suites, example 37) and measured against main on deterministic
# causal rows that walk (GQA) or run the same code unwalked (MHA), ABBA. Then on an H200 the
# issue's bf16 grid with the branch's build (its other kernels' cubins are main's); on any other
# GPU the stall profile of tools/device/sessions/s33_profile_call.sh (main's build). Logs under $OUT.
here=$(dirname "$0")/..
source "$here/call_env.sh"
alt=s34-compile
check_branch_bwd "$alt" || { echo "suites failed at ${SECONDS}s: no benchmark"; exit 1; }
abba_bwd_rows "$alt" "$out/abba.txt" "128 16384 1 32 8 causal_top_left det" \
  "128 8192 2 32 8 causal_top_left det" "128 8192 2 16 16 causal_top_left det" \
  "64 8192 2 32 8 causal_top_left det" "128 2048 8 32 8 causal_top_left det"
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  b=.carry/alt/$alt
  PAIR_BELOW=1.03 grid_and_counts "${GRID_LIMIT:-585}"
else
  bash "$(dirname "$0")/s33_profile_call.sh"
fi
