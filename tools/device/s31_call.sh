#!/usr/bin/env bash
# Session 31, the call that ran: the persistent Hopper backward (branch s31-persistent: main with
# tools/device/patches/bwd-persistent.patch, whose header says how to stage it with
# tools/device/stage_branch.sh) against main (.carry/bin). 1. The branch's Hopper backward suites
# (every dtype, the deterministic mode's bit-exactness, the split tail, causal sections, seqlen 1)
# and example 37 at hdim 64 / 128 / 256. 2. Backward rows main, branch, branch, main (ABBA).
# 3. The branch's bf16 grid with torch in the same call (rows under 1.03 x cuDNN re-run
# alternating with cuDNN): device starts were scarce, so one call carries all three. Logs under
# $OUT, the grid in grid.tgz.
source "$(dirname "$0")/call_env.sh"
alt=s31-persistent
warm_sm90a .carry/alt/$alt/fmha-jit
STOP_ON_FAIL=1 run_gpu_suites .carry/alt/$alt/fmha_jit_gpu_tests "gpu sm90a bwd: every dtype*;\
gpu sm90a bwd: deterministic*;gpu sm90a bwd: the split*;gpu sm90a bwd: causal launches*;\
gpu sm90a bwd: seqlen 1*" 120 || { echo "suites failed at ${SECONDS}s: no benchmark"; exit 1; }
for hd in 64 128 256; do
  echo "example 37 hdim $hd: $(timeout 60 .carry/alt/$alt/37_bwd_deterministic --hdim $hd \
    --seqlen 1024 2>&1 | grep -iE 'bit-exact|FAIL' | head -2 | tr '\n' ' ')"
done
echo "checks done at ${SECONDS}s"
for row in "128 2048 8 16 16 none" "128 8192 2 16 16 none" "128 16384 1 16 16 causal_top_left" \
  "128 16384 1 32 8 causal_top_left" "64 8192 2 16 16 none" "128 8192 2 16 16 none det"; do
  read -r hd s bt hq hk m det <<<"$row"
  flag=""
  [ "$det" = det ] && flag=--deterministic
  for side in main $alt $alt main; do
    echo "$row | $side: $(timeout 40 "$(staged_fmha_jit "$side")" bench --family bwd \
      --hdim-q $hd --seqlen-q $s --batch $bt --nhead-q $hq --nhead-k $hk --mask $m $flag \
      --repeat 10 --warmup 3 2>&1 | tail -1)"
  done
done
echo "rows done at ${SECONDS}s"
b=.carry/alt/$alt  # the grid of the branch's build
PAIR_BELOW=1.03 run_grid 575 bf16
tar czf "$out/grid.tgz" -C /tmp grid
echo "done at ${SECONDS}s"
