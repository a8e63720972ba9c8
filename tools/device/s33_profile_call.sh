#!/usr/bin/env bash
# Session 33's second call: on an H200 the issue's bf16 grid (tools/device/h200_grid_call.sh,
# GRID_LIMIT default 560); on any other GPU, where the current Hopper backward waits (docs/SM90.md
# Next 0000), on a row at parity with cuDNN (bf16 hdim 128 S 8192, 2 x 16 heads, no mask):
# 1. stall reasons per issued instruction and pipe activity (raw metrics), ours and cuDNN's;
# 2. Nsight Compute's throughput, warp-state and instruction sections of our main kernel and of
#    cuDNN's backward kernel, one steady-state launch each;
# 3. per-line stall sampling of ours (tools/device/sm90_stalls_bwd_call.sh, lineinfo build).
# Each step writes its log under $OUT before the next starts (a call cut short keeps them).
here=$(dirname "$0")
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  exec bash "$here/h200_grid_call.sh"
fi
source "$here/call_env.sh"
# Compile outside the profiler.
$b/fmha-jit bench --family bwd --hdim-q 128 --seqlen-q 8192 --batch 2 --nhead-q 16 --warmup 1 --repeat 1 --quiet > /dev/null 2>&1
# Stall reasons per issued instruction and the tensor pipe's activity, as raw metrics.
met="regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,regex:sm__pipe_tensor.*cycles_active\.avg\.pct_of_peak_sustained_active,regex:sm__inst_executed_pipe_(xu|fma|alu|uniform)\.avg\.pct_of_peak_sustained_active"
{
  echo "=== ours"
  timeout --signal=KILL 120 ncu --clock-control none --page raw --metrics "$met" -k regex:dq_dk_dv --launch-skip 1 -c 1 \
    $b/fmha-jit bench --family bwd --hdim-q 128 --seqlen-q 8192 --batch 2 --nhead-q 16 --warmup 1 --repeat 1 --quiet
  echo "=== cudnn"
  timeout --signal=KILL 120 ncu --clock-control none --page raw --metrics "$met" -k regex:'bprop|dgrad|bwd' --launch-skip 1 -c 1 \
    python3 tools/bench/torch_sdpa_once.py --backend cudnn --dtype bf16 --hdim 128 --seqlen 8192
} > "$out/ncu_stalls_raw.txt" 2>&1
echo "raw metrics done at ${SECONDS}s"
grep -E "^=== |stalled|pipe_|==ERR|error" "$out/ncu_stalls_raw.txt" | awk '$NF != "0" || /===/' | head -70
sec="--section SpeedOfLight --section WarpStateStats --section InstructionStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis"
log=$out/ncu_bwd_vs_cudnn_bf16_hd128_s8192.txt
{
  echo "=== ours bwd bf16 hdim 128 S 8192"
  timeout --signal=KILL 120 ncu --clock-control none --page details $sec -k regex:dq_dk_dv --launch-skip 1 -c 1 \
    $b/fmha-jit bench --family bwd --hdim-q 128 --seqlen-q 8192 --batch 2 --nhead-q 16 --warmup 1 --repeat 1 --quiet
  echo "=== cudnn bwd bf16 hdim 128 S 8192"
  timeout --signal=KILL 120 ncu --clock-control none --page details $sec -k regex:'bprop|dgrad|bwd' --launch-skip 1 -c 1 \
    python3 tools/bench/torch_sdpa_once.py --backend cudnn --dtype bf16 --hdim 128 --seqlen 8192
} > "$log" 2>&1
echo "ncu pair done at ${SECONDS}s"
grep -E "^=== |  [a-z_0-9]+.*\(|Duration|SM Active Cycles|Compute \(SM\) Throughput|Memory Throughput|Executed Ipc Active|Executed Instructions  |Issue Slots Busy|Warp Cycles Per Issued|Registers Per|Grid Size|L1/TEX Hit|L2 Hit Rate|DRAM Throughput|Shared Memory|Stall|Tensor" "$log" | head -90
ROWS=bf16,128,8192,2,16,none,0 bash "$here/sm90_stalls_bwd_call.sh"
