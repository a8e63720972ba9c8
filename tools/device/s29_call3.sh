#!/usr/bin/env bash
# Session 29's last try, for the device time left (under 300 s after ten refused starts): branch
# s29-fused-convert's every-dtype suite (against the CPU reference, every mask, both dtypes and
# modes), then hdim 128 non-causal S 2048 / 8192 ABBA against main and cuDNN in the same call.
source "$(dirname "$0")/call_env.sh"
warm_sm90a .carry/alt/s29-fused-convert/fmha-jit
SUITES="gpu sm90a bwd: every dtype*" BRANCH=s29-fused-convert ABBA=1 \
  ROWS="bwd,128,2048,8,16,16,none,0 bwd,128,8192,2,16,16,none,0" \
  bash "$(dirname "$0")/ab_branch_call.sh"
timeout 60 python3 .carry/anchor_sdpa.py --backend cudnn --hdim 128 --seqlen 2048 8192 \
  --causal no --reps 10 --warmup 3 2>&1 | tail -6
echo "done at ${SECONDS}s"
