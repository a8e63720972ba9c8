#!/usr/bin/env bash
# Session 28's final call: main with the hdim 256 one-section plan and the single consumer loop,
# on whatever GPU came. The Hopper backward suites and examples; deterministic and atomic
# interleaved (ABBA) at hdim 128 GQA 32:8 S 16384 / 8192 and hdim 256 GQA at 2 and 4 pairs and
# MHA; the bf16 grid with torch and cuobjdump's counts; then, at 4 pairs of hdim 256 GQA S 16384,
# launch orders the override build sets (stage_patches.sh ovr bwd-det-plan-override.patch).
# Run from the repository root with .carry/ staged; everything comes back in one tarball.
source "$(dirname "$0")/../call_env.sh"
start_final_call
gqa="--hdim-q 128 --nhead-q 32 --nhead-k 8"
hd256="--hdim-q 256 --nhead-q 8 --nhead-k 2"
det_atomic_rows \
  "gqa16k|$gqa --seqlen-q 16384 --batch 1" \
  "gqa8k|$gqa --seqlen-q 8192 --batch 2" \
  "hd256 gqa16k|$hd256 --seqlen-q 16384" \
  "hd256 gqa16k 16:4|--hdim-q 256 --nhead-q 16 --nhead-k 4 --seqlen-q 16384" \
  "hd256 gqa16k 2x8:2|$hd256 --seqlen-q 16384 --batch 2" \
  "hd256 gqa8k|$hd256 --seqlen-q 8192 --batch 2" \
  "hd256 mha16k|--hdim-q 256 --nhead-q 8 --seqlen-q 16384"
run_grid "${LIMIT:-400}" bf16
tar czf "$back/grid.tgz" -C /tmp grid  # kept if the call is cut short below
sass_counts
ovr=.carry/alt/ovr/fmha-jit
for shape in "--nhead-q 16 --nhead-k 4 --batch 1" "--nhead-q 8 --nhead-k 2 --batch 2"; do
  for o in "" tail=2,asc=4,alt=0 tail=1,asc=4,alt=0 tail=1,asc=4,alt=0 tail=2,asc=4,alt=0 ""; do
    [ $((430 - SECONDS)) -lt 10 ] && break
    echo "hd256 16k $shape det [$o]: $(FMHA_JIT_BWD_DET_OVERRIDE=$o timeout 20 $ovr bench \
      --family bwd --mask causal --hdim-q 256 $shape --seqlen-q 16384 --deterministic \
      --repeat 10 --warmup 3 2>&1 | tail -1)" | tee -a /tmp/grid/rows.txt
  done
done
tar czf "$back/grid.tgz" -C /tmp grid
echo "done at ${SECONDS}s"
