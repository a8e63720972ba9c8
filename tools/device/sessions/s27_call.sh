#!/usr/bin/env bash
# Session 27's first call: main with the alternation and the ascending walks, on whatever GPU
# came. The Hopper backward suites (with the GQA 4:1 causal deterministic case, first run here)
# and examples; the GQA 32:8 S 16384 causal row, deterministic and atomic interleaved (ABBA twice,
# the atomic figure spreads 8 % run to run); GQA causal at hdim 64 / 256; the bf16 grid with torch
# and cuobjdump's counts; then the hdim 128 S 16384 causal backward row against cuDNN, interleaved.
# Run from the repository root with .carry/ staged; everything comes back in one tarball.
source "$(dirname "$0")/../call_env.sh"
back=$out
out=/tmp/grid/logs
mkdir -p "$out"
check_main "gpu sm90a bwd: every dtype*;gpu sm90a bwd: deterministic*;\
gpu sm90a bwd: causal launches*"
ROWS_FILE=/tmp/grid/rows.txt
gqa="--hdim-q 128 --nhead-q 32 --nhead-k 8"
for round in 1 2; do
  for mode in det atomic atomic det; do
    flag=""
    [ $mode = det ] && flag=--deterministic
    bench_row "gqa16k $mode" $gqa --seqlen-q 16384 --batch 1 $flag
  done
done
for mode in det atomic atomic det; do
  flag=""
  [ $mode = det ] && flag=--deterministic
  bench_row "gqa8k $mode" $gqa --seqlen-q 8192 --batch 2 $flag
done
for mode in det atomic; do
  flag=""
  [ $mode = det ] && flag=--deterministic
  bench_row "hd64 gqa16k $mode" --hdim-q 64 --nhead-q 32 --nhead-k 8 --seqlen-q 16384 $flag
  bench_row "hd256 gqa16k $mode" --hdim-q 256 --nhead-q 8 --nhead-k 2 --seqlen-q 16384 $flag
done
echo "rows done at ${SECONDS}s"
run_grid "${LIMIT:-470}" bf16
sass_counts
for round in 1 2; do
  [ $((560 - SECONDS)) -lt 30 ] && break
  bench_row "mha16k atomic" --hdim-q 128 --nhead-q 16 --seqlen-q 16384
  timeout 40 python3 .carry/anchor_sdpa.py --backend cudnn --hdim 128 --seqlen 16384 \
    --causal yes 2>&1 | tail -1 | tee -a /tmp/grid/rows.txt
done
tar czf "$back/grid.tgz" -C /tmp grid
echo "done at ${SECONDS}s"
