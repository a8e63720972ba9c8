#!/usr/bin/env bash
# Session 28, last call: main with hdim 256 long chains ascending one pair per section. Its
# deterministic suite and example 37 at hdim 256, the hdim 256 GQA S 16384 rows (2 and 4 pairs)
# deterministic and atomic, then hdim 128 S 8192 without a mask against cuDNN, interleaved, with
# the GPU's clocks and power sampled (the final grid's median of that row sat 6 % above its
# fastest launch). Run from the repository root with .carry/ staged; logs go to $OUT.
source "$(dirname "$0")/../call_env.sh"
warm_sm90a $b/fmha-jit
run_gpu_suites $b/fmha_jit_gpu_tests "gpu sm90a bwd: deterministic*" 120
timeout 60 $b/37_bwd_deterministic --hdim 256 --seqlen 1024 2>&1 | grep -i bit-exact
ROWS_FILE=$out/rows.txt
for mode in det atomic det; do
  flag=""
  [ $mode = det ] && flag=--deterministic
  bench_row "hd256 8:2 $mode" --hdim-q 256 --nhead-q 8 --nhead-k 2 --seqlen-q 16384 $flag
  bench_row "hd256 16:4 $mode" --hdim-q 256 --nhead-q 16 --nhead-k 4 --seqlen-q 16384 $flag
  bench_row "hd256 2x8:2 $mode" --hdim-q 256 --nhead-q 8 --nhead-k 2 --seqlen-q 16384 --batch 2 $flag
done
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu \
  --format=csv,noheader -lms 500 > "$out/smi.csv" &
smi=$!
for i in 1 2; do
  python3 .carry/anchor_sdpa.py --backend cudnn --hdim 128 --seqlen 8192 --causal no 2>&1 |
    grep -o '"bwd_tflops": [0-9.]*'
  echo "ours: $(timeout 40 $b/fmha-jit bench --family bwd --hdim-q 128 --seqlen-q 8192 --batch 2 \
    --nhead-q 16 --mask none --repeat 20 --warmup 5 2>&1 | tail -1)"
done
kill $smi
sort -t, -k2 "$out/smi.csv" | awk -F, '{print $2, $4}' | sort | uniq -c | sort -rn | head -8
echo "done at ${SECONDS}s"
