#!/usr/bin/env bash
# Are the grid's misses against cuDNN repeatable within one call? Three rounds (session 15 call
# 4), each: our rows (fmha-jit bench), then cuDNN's (anchor_sdpa.py / anchor_gqa.py), bf16. Run
# from the repository root with .carry/ staged (tools/device/stage.sh, .carry/anchor_sdpa.py).
source "$(dirname "$0")/call_env.sh"
export FMHA_JIT_CACHE_DIR=$PWD/.carry/cache
bench() { timeout 40 $b/fmha-jit bench --repeat 10 --warmup 3 "$@" 2>&1 | tail -1; }
for round in 1 2 3; do
  echo "== round $round at ${SECONDS}s"
  bench --family fwd --hdim-q 128 --seqlen-q 2048 --batch 8 --nhead-q 16 --mask causal
  bench --family fwd --hdim-q 256 --seqlen-q 512 --batch 32 --nhead-q 8 --mask causal
  bench --family bwd --hdim-q 128 --seqlen-q 2048 --batch 8 --nhead-q 16
  bench --family bwd --hdim-q 128 --seqlen-q 16384 --batch 1 --nhead-q 16 --mask causal
  bench --family bwd --hdim-q 128 --seqlen-q 8192 --batch 2 --nhead-q 32 --nhead-k 8
  bench --family bwd --hdim-q 128 --seqlen-q 8192 --batch 2 --nhead-q 32 --nhead-k 8 --mask causal
  bench --family bwd --hdim-q 256 --seqlen-q 2048 --batch 8 --nhead-q 8
  bench --family bwd --hdim-q 256 --seqlen-q 2048 --batch 8 --nhead-q 8 --deterministic
  timeout 60 python3 .carry/anchor_sdpa.py --backend cudnn --hdim 128 --seqlen 2048 --causal both \
    --reps 10 --warmup 3 2>&1 | grep '^{' | cut -c1-400
  timeout 60 python3 .carry/anchor_sdpa.py --backend cudnn --hdim 128 --seqlen 16384 --causal yes \
    --reps 10 --warmup 3 2>&1 | grep '^{' | cut -c1-400
  timeout 60 python3 .carry/anchor_sdpa.py --backend cudnn --hdim 256 --seqlen 512 --causal yes \
    --reps 10 --warmup 3 2>&1 | grep '^{' | cut -c1-400
  timeout 90 python3 tools/bench/anchor_gqa.py --seqlen 8192 --causal both --reps 10 --warmup 3 \
    2>&1 | grep '^{' | cut -c1-400
done
echo "call done at ${SECONDS}s"
