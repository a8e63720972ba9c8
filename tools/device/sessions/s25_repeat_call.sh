#!/usr/bin/env bash
# Session 25's repeat of the two rows the H100 grids left below a target: fp16 GQA 32:8 S 16384
# non-causal backward (0.99 x cuDNN in the fp16 grid) and bf16 GQA 32:8 S 16384 causal
# deterministic / atomic (0.89 in the bf16 grid, 0.91 in a repeat of the next call). Three rounds,
# each ours (fmha-jit bench) then torch's (anchor_gqa.py, cuDNN and flash), so that a mode or a
# drift shows as a difference between rounds. Run from the repository root with .carry/ staged.
source "$(dirname "$0")/../call_env.sh"
export FMHA_JIT_CACHE_DIR=$PWD/.carry/cache
bench() { timeout 40 $b/fmha-jit bench --repeat 10 --warmup 3 "$@" 2>&1 | tail -1; }
gqa="--hdim-q 128 --seqlen-q 16384 --batch 1 --nhead-q 32 --nhead-k 8"
for round in 1 2 3; do
  echo "== round $round at ${SECONDS}s"
  bench --family bwd $gqa --dtype fp16
  bench --family bwd $gqa --dtype bf16 --mask causal_top_left
  bench --family bwd $gqa --dtype bf16 --mask causal_top_left --deterministic
  timeout 90 python3 tools/bench/anchor_gqa.py --dtype fp16 --seqlen 16384 --causal no --reps 10 \
    --warmup 3 2>&1 | grep '^{' | cut -c1-400
done
echo "call done at ${SECONDS}s"
