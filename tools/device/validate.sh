#!/usr/bin/env bash
# One device call: correctness (GPU tests, examples, verify runs, compute-sanitizer), the JIT
# pipeline (prebuild cold/warm, bench-jit) and the benchmarks next to PyTorch's SDPA.
# Run from the repository root with .carry/ staged by tools/device/stage.sh (and
# .carry/anchor_sdpa.py copied from ../shared/tools; .carry/cache optionally warmed with
# `FMHA_JIT_CACHE_DIR=.carry/cache fmha-jit prebuild configs/gpu-tests.json`). Logs go to $OUT.
#   STEPS            which steps, in this order (default: all of them)
#   SANITIZER_TOOLS  compute-sanitizer tools (default: memcheck racecheck synccheck)
set -uo pipefail
export LD_LIBRARY_PATH="$PWD/.carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export FMHA_JIT_CACHE_DIR=/tmp/fmha-jit-cache
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
bin=$PWD/.carry/bin
steps=${STEPS:-machine prebuild examples tests verify npy sanitizer benchjit bench_fwd bench_bwd}
# Not in the default list: tests_bwd (the backward's gpu tests alone), tune (tile candidates of the backward, tools/bench/tune_bwd_tiles.json).
step() { echo; echo "=== $* ($(date +%T))"; }
# A hung kernel (say, a deadlocked deterministic backward) must not eat the whole call.
guard() {
  timeout --signal=KILL "$@"
  local rc=$?
  [ $rc -eq 0 ] || echo "!!! rc=$rc: ${*:2}"
  return $rc
}

machine() {
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
  $bin/fmha-jit arch
  [ -d .carry/cache ] && cp -r .carry/cache/. "$FMHA_JIT_CACHE_DIR"/ && echo "warm test cache copied"
}
prebuild() {
  FMHA_JIT_CACHE_DIR=/tmp/cold-cache guard 300 $bin/fmha-jit prebuild configs/default.json
  FMHA_JIT_CACHE_DIR=/tmp/cold-cache guard 60 $bin/fmha-jit prebuild configs/default.json
}
examples() {
  guard 60 $bin/01_basic_fwd
  guard 120 $bin/37_bwd_deterministic
  guard 180 $bin/37_bwd_deterministic --seqlen 4096 --batch 2 --nhead 16 --dtype bf16
}
tests() { guard 420 $bin/fmha_jit_gpu_tests --durations yes; }
tests_bwd() { guard 420 $bin/fmha_jit_gpu_tests "gpu bwd*" --durations yes; }
verify() {
  for m in none causal causal-br window:64,0; do
    guard 60 $bin/fmha-jit run --family fwd --dtype bf16 --hdim-q 128 --mask $m --batch 2 \
      --nhead-q 8 --nhead-k 2 --seqlen-q 1000 --seqlen-k 1017 --layout bshd --verify
  done
  guard 60 $bin/fmha-jit run --family fwd --dtype fp16 --hdim-q 256 --mask causal --batch 1 \
    --nhead-q 4 --seqlen-q 4097 --verify
  for det in "" --deterministic; do
    guard 60 $bin/fmha-jit run --family bwd --dtype bf16 --hdim-q 64 --mask causal --batch 1 \
      --nhead-q 4 --seqlen-q 257 --verify --repro 3 $det
    guard 120 $bin/fmha-jit run --family bwd --dtype bf16 --hdim-q 128 --mask none --batch 2 \
      --nhead-q 16 --nhead-k 4 --seqlen-q 4096 --layout bshd --verify --repro 10 $det
    guard 60 $bin/fmha-jit run --family bwd --dtype fp16 --hdim-q 192 --hdim-v 128 \
      --mask window:100,20 --batch 2 --nhead-q 4 --seqlen-q 1000 --seqlen-k 777 --verify --repro 3 $det
  done
}
npy() { mkdir -p /tmp/npy && guard 120 python3 tools/device/npy_roundtrip.py $bin/fmha-jit /tmp/npy; }
# compute-sanitizer over the forward and both backward modes at odd shapes: seqlen 1, 17 x 145,
# 130 x 77 and 1000 x 999, GQA, every mask kind (issue 6). Each run checks its result too.
sanitizer() {
  local shapes=(
    "--hdim-q 256 --mask none --seqlen-q 1 --seqlen-k 1 --nhead-q 2 --nhead-k 1"
    "--hdim-q 128 --mask causal-br --seqlen-q 17 --seqlen-k 145 --nhead-q 4 --nhead-k 2"
    "--hdim-q 192 --hdim-v 128 --mask causal --seqlen-q 130 --seqlen-k 77 --nhead-q 2"
    "--hdim-q 64 --mask window:64,16 --seqlen-q 1000 --seqlen-k 999 --nhead-q 4 --nhead-k 1 --layout bshd")
  for tool in ${SANITIZER_TOOLS-memcheck racecheck synccheck}; do
    for mode in "--family fwd" "--family bwd" "--family bwd --deterministic"; do
      for shape in "${shapes[@]}"; do
        guard 120 compute-sanitizer --tool $tool --error-exitcode 9 $bin/fmha-jit run \
          --dtype bf16 --batch 1 $mode $shape --verify 2>&1 | tail -2
        echo "sanitizer $tool [$mode $shape] rc=${PIPESTATUS[0]}"
      done
    done
  done
}
benchjit() { guard 120 $bin/fmha-jit bench-jit; }
compare() {
  guard 300 python3 tools/bench/compare_torch.py --fmha-jit $bin/fmha-jit \
    --anchor .carry/anchor_sdpa.py --dtype bf16 --hdim 64 128 256 --seqlen 2048 8192 "$@"
}
bench_fwd() { compare --family fwd --out $out/bench_fwd; }
bench_bwd() {
  compare --family bwd --out $out/bench_bwd
  compare --family bwd --deterministic --out $out/bench_bwd_det
}
tune() {
  guard 300 $bin/fmha-jit bench --sweep tools/bench/tune_bwd_tiles.json --json > $out/tune_bwd.json
  python3 -c "import json
for r in json.load(open('$out/tune_bwd.json')): print(r['kernel'], r.get('ms'), r.get('tflops'))"
}

{
  for s in $steps; do step "$s"; $s; done
  step "done"
} 2>&1 | tee "$out/validate.log"
