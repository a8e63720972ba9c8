#!/usr/bin/env bash
# Session 27: why hdim 256 GQA 8:2 S 16384 causal ran deterministic at 0.78 x atomic (call 1).
# The deterministic schedule's fields overridden one at a time (build ovr: main with
# tools/device/patches/bwd-det-plan-override.patch, FMHA_JIT_BWD_DET_OVERRIDE), at S 16384 / 8192
# / 2048, the MHA row beside; then traces of S 16384 in both modes (build trace: main with the
# trace and override patches). Run from the repository root with .carry/ staged; logs to $OUT.
source "$(dirname "$0")/../call_env.sh"
ovr=.carry/alt/ovr
row() {  # row LABEL OVERRIDE ARGS...: one bench row of the ovr build, into rows.txt
  local label=$1 o=$2
  shift 2
  echo "$label [$o]: $(FMHA_JIT_BWD_DET_OVERRIDE=$o timeout 60 $ovr/fmha-jit bench --family bwd \
    --mask causal --repeat 20 --warmup 5 "$@" 2>&1 | tail -1)" | tee -a "$out/rows.txt"
}
hd256="--hdim-q 256 --nhead-q 8 --nhead-k 2"
s16="$hd256 --seqlen-q 16384 --batch 1"
row atomic "" $s16
for o in "" alt=0,walkup=0 alt=0,walkup=0,up=0 walkup=0 walkup=1 walkup=4 up=1,walkup=3 \
  up=4,walkup=0 alt=0,walkup=0,up=4 ""; do
  row det "$o" $s16 --deterministic
done
row atomic "" $s16
for row in "8192 2" "2048 8"; do
  read -r s bt <<<"$row"
  row atomic "" $hd256 --seqlen-q $s --batch $bt
  for o in "" alt=0,walkup=0 alt=0,walkup=0,up=0; do
    row det "$o" $hd256 --seqlen-q $s --batch $bt --deterministic
  done
done
row "mha atomic" "" --hdim-q 256 --nhead-q 8 --seqlen-q 16384
row "mha det" "" --hdim-q 256 --nhead-q 8 --seqlen-q 16384 --deterministic
echo "rows done at ${SECONDS}s"
mkdir -p /tmp/trace
for o in "" alt=0,walkup=0,up=0; do
  for det in "" --deterministic; do
    [ -z "$det" ] && [ -n "$o" ] && continue
    FMHA_JIT_BWD_DET_OVERRIDE=$o FMHA_JIT_TRACE=/tmp/trace/hd256_gqa_s16384${det:+_det}${o:+_nowalk}.bin \
      timeout 60 .carry/alt/trace/fmha-jit bench --family bwd --mask causal $s16 $det --warmup 1 \
      --repeat 3 > /dev/null 2>&1
    echo "trace ${det:-atomic} [$o] rc=$?"
  done
done
tar czf "$out/traces.tgz" -C /tmp trace
echo "done at ${SECONDS}s"
