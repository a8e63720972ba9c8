#!/usr/bin/env bash
# One device call: correctness (GPU tests, verify runs, compute-sanitizer), the JIT pipeline
# (prebuild cold/warm, example, bench-jit) and the forward benchmark next to PyTorch's SDPA.
# Run from the repository root with .carry/ staged by tools/device/stage.sh (and
# .carry/anchor_sdpa.py copied from ../shared/tools). Logs go to $OUT.
# SANITIZER_TOOLS="" skips compute-sanitizer (default: memcheck racecheck).
set -uo pipefail
export LD_LIBRARY_PATH="$PWD/.carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export FMHA_JIT_CACHE_DIR=/tmp/fmha-jit-cache
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
bin=$PWD/.carry/bin
step() { echo; echo "=== $* ($(date +%T))"; }
{
  step "machine"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
  $bin/fmha-jit arch
  step "prebuild configs/default.json, cold then warm"
  $bin/fmha-jit prebuild configs/default.json
  $bin/fmha-jit prebuild configs/default.json
  step "example 01"; $bin/01_basic_fwd
  step "gpu tests"; $bin/fmha_jit_gpu_tests --durations yes
  step "run --verify"
  for m in none causal causal-br window:64,0; do
    $bin/fmha-jit run --family fwd --dtype bf16 --hdim-q 128 --mask $m --batch 2 --nhead-q 8 \
      --nhead-k 2 --seqlen-q 1000 --seqlen-k 1017 --layout bshd --verify
  done
  $bin/fmha-jit run --family fwd --dtype fp16 --hdim-q 256 --mask causal --batch 1 --nhead-q 4 \
    --seqlen-q 4097 --verify
  $bin/fmha-jit run --family bwd --dtype bf16 --hdim-q 64 --mask causal --batch 1 --nhead-q 4 \
    --seqlen-q 257 --verify --repro 3
  step "npy round trip"
  mkdir -p /tmp/npy && python3 tools/device/npy_roundtrip.py $bin/fmha-jit /tmp/npy
  step "compute-sanitizer"
  for tool in ${SANITIZER_TOOLS-memcheck racecheck}; do
    for args in "--hdim-q 128 --mask causal-br --seqlen-q 17 --seqlen-k 45" \
                "--hdim-q 64 --mask window:5,3 --seqlen-q 130 --seqlen-k 77" \
                "--hdim-q 256 --mask none --seqlen-q 1 --seqlen-k 1" \
                "--hdim-q 192 --hdim-v 128 --mask causal --seqlen-q 200"; do
      compute-sanitizer --tool $tool --error-exitcode 9 $bin/fmha-jit run --family fwd \
        --dtype bf16 --batch 2 --nhead-q 4 --nhead-k 2 $args --verify 2>&1 | tail -3
      echo "sanitizer $tool [$args] rc=${PIPESTATUS[0]}"
    done
  done
  step "bench-jit"; $bin/fmha-jit bench-jit
  step "forward benchmark vs torch"
  python3 tools/bench/compare_torch.py --fmha-jit $bin/fmha-jit --anchor .carry/anchor_sdpa.py \
    --dtype bf16 --hdim 64 128 256 --seqlen 2048 8192 --family fwd --out $out/bench_fwd
  step "done"
} 2>&1 | tee "$out/validate.log"
