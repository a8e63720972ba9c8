#!/usr/bin/env bash
# Runs on the GPU machine from the repository root, with .carry/ from tools/device/stage.sh.
# Everything it prints also lands in $OUT/gpu_check.log.
set -uo pipefail
export LD_LIBRARY_PATH="$PWD/.carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export FMHA_JIT_CACHE_DIR="${FMHA_JIT_CACHE_DIR:-/tmp/fmha-jit-cache}"
out=${OUT:-/tmp}
bin=.carry/bin
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
  $bin/fmha-jit arch
  echo "== prebuild configs/default.json (cold)"
  $bin/fmha-jit prebuild configs/default.json
  echo "== prebuild configs/default.json (warm)"
  $bin/fmha-jit prebuild configs/default.json
  echo "== example 01"
  $bin/01_basic_fwd
  echo "== gpu tests"
  $bin/fmha_jit_gpu_tests "${GPU_TEST_ARGS:-}"
  echo "== rtc tests"
  $bin/fmha_jit_rtc_tests
  echo "== bench-jit"
  $bin/fmha-jit bench-jit
} 2>&1 | tee "$out/gpu_check.log"
