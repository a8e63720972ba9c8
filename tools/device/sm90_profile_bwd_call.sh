#!/usr/bin/env bash
# Session 8: Nsight Compute of the Hopper backward's main kernel next to cuDNN's on the row where it
# trails cuDNN most (fp16, hdim 128, S 16384, non-causal; BENCHMARKS.md), same sections for both.
# Run from the repository root with .carry/ staged; logs go to $OUT.
source "$(dirname "$0")/call_env.sh"
sec="--section SpeedOfLight --section WarpStateStats --section InstructionStats --section LaunchStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis"
{
  echo "=== ours bwd fp16 hdim 128 S 16384"
  timeout --signal=KILL 100 ncu --clock-control none --page details $sec -k regex:dq_dk_dv --launch-skip 1 -c 1 \
    $b/fmha-jit bench --family bwd --dtype fp16 --hdim-q 128 --seqlen-q 16384 --batch 1 --nhead-q 16 --warmup 1 --repeat 1 --quiet
  echo "=== cudnn bwd fp16 hdim 128 S 16384"
  timeout --signal=KILL 100 ncu --clock-control none --page details $sec -k regex:'bprop|dgrad|bwd' --launch-skip 1 -c 1 \
    python3 tools/bench/torch_sdpa_once.py --backend cudnn --dtype fp16 --hdim 128 --seqlen 16384
} > "$out/ncu_bwd_vs_cudnn_hd128.txt" 2>&1
grep -E "^=== |  [a-z_0-9]+.*\(|Duration|SM Active Cycles|Compute \(SM\) Throughput|Memory Throughput|Executed Ipc Active|Executed Instructions  |Warp Cycles Per Issued|Registers Per|Block Size|Grid Size|L2 Hit Rate|DRAM Throughput" "$out/ncu_bwd_vs_cudnn_hd128.txt" | head -60
echo "done at ${SECONDS}s"
