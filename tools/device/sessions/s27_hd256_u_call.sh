#!/usr/bin/env bash
# Session 27: the walk's up cells u and the ascending walk's f at hdim 256 GQA 8:2 causal
# deterministic with the turn read ahead (build pa2ovr, FMHA_JIT_BWD_DET_OVERRIDE), each setting
# run twice around the others, the atomic rows beside. Run from the repository root with .carry/
# staged; logs go to $OUT.
source "$(dirname "$0")/../call_env.sh"
alt=.carry/alt/pa2ovr/fmha-jit
hd256="--family bwd --mask causal --hdim-q 256 --nhead-q 8 --nhead-k 2 --repeat 10 --warmup 3"
for row in "16384 1 up=2 up=1,walkup=3 up=1,walkup=4 up=1,walkup=2" \
  "8192 2 up=2 up=1,walkup=2 up=1,walkup=3 up=1,walkup=0" "2048 8 up=2 up=1"; do
  read -r s bt settings <<<"$row"
  echo "atomic S $s: $(timeout 60 $alt bench $hd256 --seqlen-q $s --batch $bt 2>&1 | tail -1)"
  for o in $settings $(echo $settings | tr ' ' '\n' | tac); do
    echo "S $s [$o]: $(FMHA_JIT_BWD_DET_OVERRIDE=$o timeout 60 $alt bench $hd256 --seqlen-q $s \
      --batch $bt --deterministic 2>&1 | tail -1)"
  done
done
echo "call done at ${SECONDS}s"
