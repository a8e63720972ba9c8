#!/usr/bin/env bash
# The next device call for issue 7 (written in session 6, not yet run): measure before changing.
#   1. the three-consumer forward (hdim 64, block_m 192): its gpu test, then next to the default
#      128-row tile on the grid rows where hdim 64 trails cuDNN;
#   2. Nsight Compute of the Hopper forward on the rows that miss (hdim 64 non-causal, hdim 128
#      causal, S 8192) and of the sm_80 backward at hdim 64 / 256 (issue 5's unexplained rows),
#      with torch's kernels beside them (tools/bench/profile_rows.sh does the sm_80 part);
#   3. torch (flash, cuDNN) on the same rows, same call.
# Run from the repository root with .carry/ staged (tools/device/stage.sh); logs go to $OUT.
set -uo pipefail
export LD_LIBRARY_PATH="$PWD/.carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export FMHA_JIT_CACHE_DIR=/tmp/fmha-jit-cache PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
b=.carry/bin
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
timeout 120 $b/fmha_jit_gpu_tests "gpu sm90a fwd: three consumer*" --durations yes > "$out/three_wg_test.txt" 2>&1
echo "three-consumer test rc=$? at ${SECONDS}s"; grep -E "FAILED|passed|failed|s: gpu" "$out/three_wg_test.txt" | tail -4
for bm in 128 192; do
  for s in 2048 8192 16384; do
    for m in none causal; do
      timeout 30 $b/fmha-jit bench --family fwd --hdim-q 64 --seqlen-q $s --batch $((16384 / s)) \
        --nhead-q 32 --mask $m --block-m $bm --repeat 10 --warmup 3 2>&1 | tail -1
    done
  done
done
timeout 90 python3 .carry/anchor_sdpa.py --dtype bf16 --hdim 64 --seqlen 2048 8192 16384 --causal both \
  --backend cudnn flash --reps 10 --warmup 3 2>&1 | grep -v '^ *$' | tail -12
if command -v ncu > /dev/null; then
  sec="--section SpeedOfLight --section WarpStateStats --section InstructionStats --section LaunchStats"
  for row in "64 none 32" "128 causal 16"; do
    read -r hd m h <<<"$row"
    timeout --signal=KILL 150 ncu --clock-control none --page details $sec -k regex:fmha_fwd \
      --launch-skip 1 -c 1 $b/fmha-jit bench --family fwd --hdim-q $hd --seqlen-q 8192 --batch 2 \
      --nhead-q $h --mask $m --warmup 1 --repeat 1 --quiet > "$out/ncu_fwd_hd${hd}_$m.txt" 2>&1
    echo "ncu fwd hdim $hd $m: $(grep -E 'Duration|Issue Slots Busy' "$out/ncu_fwd_hd${hd}_$m.txt" | tr -s ' ' | head -2 | tr '\n' ' ')"
  done
  IMPL=mma_sm80 timeout 300 bash tools/bench/profile_rows.sh $b/fmha-jit "$out"
fi
echo "done at ${SECONDS}s"
