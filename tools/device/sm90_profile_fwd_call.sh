#!/usr/bin/env bash
# Session 7, last device call: example 37 and 01 with the Hopper kernels selected (hdim 64, 128,
# 256), then Nsight Compute of the forward next to cuDNN's on the two non-causal rows where it
# trails cuDNN most at long sequences (hdim 128 and 256, S 8192), same sections for both.
# Run from the repository root with .carry/ staged; logs go to $OUT.
source "$(dirname "$0")/call_env.sh"
run_examples
sec="--section SpeedOfLight --section WarpStateStats --section InstructionStats --section LaunchStats --section ComputeWorkloadAnalysis"
for row in "128 16" "256 8"; do
  read -r hd h <<<"$row"
  {
    echo "=== ours fwd hdim $hd S 8192"
    timeout --signal=KILL 120 ncu --clock-control none --page details $sec -k regex:fmha_fwd --launch-skip 1 -c 1 \
      $b/fmha-jit bench --family fwd --hdim-q $hd --seqlen-q 8192 --batch 2 --nhead-q $h --warmup 1 --repeat 1 --quiet
    echo "=== cudnn fwd hdim $hd S 8192"
    timeout --signal=KILL 120 ncu --clock-control none --page details $sec -k regex:fprop --launch-skip 1 -c 1 \
      python3 tools/bench/torch_sdpa_once.py --backend cudnn --hdim $hd --seqlen 8192
  } > "$out/ncu_fwd_vs_cudnn_hd$hd.txt" 2>&1
  grep -E "^=== |Duration|SM Active Cycles|Compute \(SM\) Throughput|Executed Ipc Active|Executed Instructions  |Warp Cycles Per Issued|Registers Per|Block Size|Grid Size" "$out/ncu_fwd_vs_cudnn_hd$hd.txt"
done
echo "done at ${SECONDS}s"
