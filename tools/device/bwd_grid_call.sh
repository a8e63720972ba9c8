#!/usr/bin/env bash
# One device call (session 5, call 4, run as .carry/call4.sh): the shipped backward (k loops in groups, unmasked copy for full tiles, late
# release + per-warp waits for causal deterministic): gpu bwd tests, bwd verify/repro, then the
# bf16 grid next to torch (BENCHMARKS.md).
set -uo pipefail
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH=$PWD/.carry/lib:/usr/local/cuda/lib64 FMHA_JIT_CACHE_DIR=/tmp/fmha-jit-cache PYTHONUNBUFFERED=1
mkdir -p $FMHA_JIT_CACHE_DIR; cp -r .carry/cache/. $FMHA_JIT_CACHE_DIR/
b=.carry/bin
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 150 $b/fmha_jit_gpu_tests "gpu bwd: every dtype*","gpu bwd: deterministic*" --durations yes > $OUT/bwd_tests.txt 2>&1
echo "bwd tests rc=$? at $SECONDS s"; tail -2 $OUT/bwd_tests.txt
{
for det in "" --deterministic; do
  for mask in none causal; do
    timeout 40 $b/fmha-jit run --family bwd --dtype bf16 --hdim-q 128 --mask $mask --batch 2 --nhead-q 16 --nhead-k 4 --seqlen-q 4096 --layout bshd --verify --repro 10 $det 2>&1 | tail -4
  done
done
} > $OUT/bwd_verify.txt 2>&1
echo "verify at $SECONDS s"; grep -E "repro|FAIL" $OUT/bwd_verify.txt
timeout $((440 - SECONDS)) python3 tools/bench/grid_vs_torch.py --fmha-jit $b/fmha-jit --anchor .carry/anchor_sdpa.py --dtype bf16 --out $OUT/grid > $OUT/grid.log 2>&1
echo "grid rc=$? done at $SECONDS s"; tail -3 $OUT/grid.log
