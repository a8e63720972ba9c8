#!/usr/bin/env bash
# Session 34's third call: main at the query-tile slot (staged as s34-final) against the
# previous main (.carry/bin) on rows without a mask, whose kernels no longer compute the visit
# in the consumers and whose barriers moved by the new slot; ABBA, with the suites first.
source "$(dirname "$0")/../call_env.sh"
alt=s34-final
warm_sm90a ".carry/alt/$alt/fmha-jit"
STOP_ON_FAIL=1 run_gpu_suites ".carry/alt/$alt/fmha_jit_gpu_tests" "gpu sm90a bwd: every dtype*" 90 ||
  exit 1
abba_bwd_rows "$alt" "$out/abba.txt" "128 2048 8 16 16 none" "128 8192 2 16 16 none" \
  "64 8192 2 16 16 none" "128 8192 2 16 16 none det"
