#!/usr/bin/env bash
# Session 34's second call: the branch s34-compile at its producer-published query tile (the
# consumers of the hdim 64 / 128 backward read each stage's first query row from shared memory
# instead of computing the visit: one copy of their code for every walk order) checked (Hopper
# backward suites, example 37) and measured against main, ABBA, on the masked rows whose kernels
# changed: deterministic causal (GQA walks, MHA does not) and atomic causal. Logs under $OUT.
source "$(dirname "$0")/../call_env.sh"
alt=s34-compile
check_branch_bwd "$alt" || { echo "suites failed at ${SECONDS}s: no benchmark"; exit 1; }
abba_bwd_rows "$alt" "$out/abba.txt" "128 16384 1 32 8 causal_top_left det" \
  "128 8192 2 32 8 causal_top_left det" "128 8192 2 16 16 causal_top_left det" \
  "64 8192 2 32 8 causal_top_left det" "128 2048 8 32 8 causal_top_left det" \
  "128 8192 2 16 16 causal_top_left" "128 16384 1 32 8 causal_top_left" "64 8192 2 16 16 causal_top_left"
