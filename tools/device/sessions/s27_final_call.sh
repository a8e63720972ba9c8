#!/usr/bin/env bash
# Session 27's final call: main with the dQ writer reading its turn ahead and one up cell at
# hdim 256 where a chain outgrows the SMs, on whatever GPU came. The Hopper backward suites and
# examples; deterministic and atomic interleaved (ABBA) at GQA 32:8 S 16384 / 8192 (hdim 128),
# hdim 256 GQA 8:2 S 16384 / 8192 and MHA S 16384; the bf16 grid with torch and cuobjdump's
# counts; then traces and launch-order overrides at hdim 256 GQA S 16384. Run from the repository root with .carry/ staged; everything comes back in one
# tarball.
source "$(dirname "$0")/../call_env.sh"
start_final_call
gqa="--hdim-q 128 --nhead-q 32 --nhead-k 8"
hd256="--hdim-q 256 --nhead-q 8 --nhead-k 2"
det_atomic_rows \
  "gqa16k|$gqa --seqlen-q 16384 --batch 1" \
  "gqa8k|$gqa --seqlen-q 8192 --batch 2" \
  "hd256 gqa16k|$hd256 --seqlen-q 16384" \
  "hd256 gqa8k|$hd256 --seqlen-q 8192 --batch 2" \
  "hd256 mha16k|--hdim-q 256 --nhead-q 8 --seqlen-q 16384"
run_grid "${LIMIT:-370}" bf16
tar czf "$back/grid.tgz" -C /tmp grid  # kept if the call is cut short below
sass_counts
# What is left at hdim 256 GQA 8:2 S 16384 causal: traces (build trace27: main with the trace and
# override patches), then launch orders the override can set, if time is left.
tr=.carry/alt/trace27/fmha-jit
s16="--family bwd --mask causal --seqlen-q 16384 --warmup 1 --repeat 3"
mkdir -p /tmp/grid/trace
for spec in "gqa|--hdim-q 256 --nhead-q 8 --nhead-k 2" "mha|--hdim-q 256 --nhead-q 8"; do
  IFS="|" read -r name shape <<<"$spec"
  for det in "" --deterministic; do
    [ $((395 - SECONDS)) -lt 20 ] && break
    FMHA_JIT_TRACE=/tmp/grid/trace/hd256_${name}${det:+_det}.bin timeout 30 $tr bench $s16 $shape \
      $det > /dev/null 2>&1
    echo "trace hd256 $name ${det:-atomic} rc=$?"
  done
done
for o in tail=2,asc=2 tail=2,asc=2,alt=0 asc=0,alt=0,walkup=0 ""; do
  [ $((400 - SECONDS)) -lt 10 ] && break
  echo "hd256 gqa16k det [$o]: $(FMHA_JIT_BWD_DET_OVERRIDE=$o timeout 20 $tr bench --family bwd \
    --mask causal --hdim-q 256 --nhead-q 8 --nhead-k 2 --seqlen-q 16384 --deterministic \
    --repeat 10 --warmup 3 2>&1 | tail -1)" | tee -a /tmp/grid/rows.txt
done
tar czf "$back/grid.tgz" -C /tmp grid
echo "done at ${SECONDS}s"
