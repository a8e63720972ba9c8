#!/usr/bin/env bash
# Session 26: deterministic causal chains alternating direction pair by pair (build s26-alt,
# FMHA_JIT_BWD_DET_ALTERNATE=1: odd pairs ascend, the planned tail kept), against main ABBA, after the deterministic and
# every-dtype suites under that variable. Run from the repository root with .carry/ staged.
source "$(dirname "$0")/call_env.sh"
alt=.carry/alt/s26-alt
warm_sm90a $alt/fmha-jit
export FMHA_JIT_BWD_DET_ALTERNATE=1
if ! STOP_ON_FAIL=1 run_gpu_suites $alt/fmha_jit_gpu_tests \
  "gpu sm90a bwd: deterministic*;gpu sm90a bwd: every dtype*" 150; then
  echo "s26-alt: a suite failed; no rows"
  exit 1
fi
unset FMHA_JIT_BWD_DET_ALTERNATE
for row in "16384 1 32" "8192 2 32" "2048 8 32" "8192 2 16"; do
  read -r s bt hq <<<"$row"
  hk=8
  [ "$hq" = 16 ] && hk=16
  for side in main alt alt main; do
    bin=$b env=""
    [ $side = alt ] && bin=$alt env="FMHA_JIT_BWD_DET_ALTERNATE=1"
    echo "$side: $(env $env timeout 40 $bin/fmha-jit bench --family bwd --hdim-q 128 --seqlen-q $s \
      --batch $bt --nhead-q $hq --nhead-k $hk --mask causal_top_left --deterministic --repeat 10 \
      --warmup 3 2>&1 | tail -1)"
  done
done
for i in 1 2; do
  echo "main atomic: $(timeout 40 $b/fmha-jit bench --family bwd --hdim-q 128 --seqlen-q 16384 \
    --batch 1 --nhead-q 32 --nhead-k 8 --mask causal_top_left --repeat 10 --warmup 3 2>&1 |
    tail -1)"
done
echo "call done at ${SECONDS}s"
