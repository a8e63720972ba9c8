#!/usr/bin/env bash
# The atomic causal backward's section size, swept (session 21): for each row, `fmha-jit bench` of
# the sec-k build at each section size of the row, then again in reverse order, so that a drift
# over the row shows as a difference between the passes. The sec-k build is main plus the
# FMHA_JIT_BWD_SECTION_PAIRS override (measurement only), staged as .carry/alt/sec-k with
#   tools/device/stage_patches.sh sec-k tools/device/patches/bwd-section-pairs-override.patch
# ROWS: 'hdim,seqlen,batch,hq,hk:k k k' entries separated by ';'. Run from the repository root
# with .carry/ staged; logs go to $OUT.
source "$(dirname "$0")/call_env.sh"
alt=.carry/alt/sec-k
IFS=';' read -ra rows <<<"${ROWS:?set ROWS}"
for row in "${rows[@]}"; do
  IFS=: read -r shape ks <<<"$row"
  IFS=, read -r d s bt hq hk <<<"$shape"
  for k in $ks $(echo $ks | tr ' ' '\n' | tac); do
    echo -n "k=$k: "
    FMHA_JIT_BWD_SECTION_PAIRS=$k timeout 40 $alt/fmha-jit bench --family bwd --hdim-q "$d" \
      --seqlen-q "$s" --batch "$bt" --nhead-q "$hq" --nhead-k "$hk" --mask causal_top_left \
      --repeat 10 --warmup 3 2>&1 | tail -1
  done
done
echo "done at ${SECONDS}s"
