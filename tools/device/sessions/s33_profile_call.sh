#!/usr/bin/env bash
# Session 33's second call: on an H200 the issue's bf16 grid (tools/device/h200_grid_call.sh,
# GRID_LIMIT default 560); on any other GPU, where the current Hopper backward waits (docs/SM90.md
# Next 0000), on a row at parity with cuDNN (bf16 hdim 128 S 8192, 2 x 16 heads, no mask):
# 1. stall reasons per issued instruction and pipe activity (raw metrics), ours and cuDNN's;
# 2. Nsight Compute's throughput, warp-state and instruction sections of our main kernel and of
#    cuDNN's backward kernel, one steady-state launch each;
# 3. per-line stall sampling of ours (tools/device/sm90_stalls_bwd_call.sh, lineinfo build).
# Each step writes its log under $OUT before the next starts (a call cut short keeps them).
here=$(dirname "$0")/..
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  exec bash "$here/h200_grid_call.sh"
fi
source "$here/call_env.sh"
ours=($b/fmha-jit bench --family bwd --hdim-q 128 --seqlen-q 8192 --batch 2 --nhead-q 16 --warmup 1
  --repeat 1 --quiet)
cudnn=(python3 tools/bench/torch_sdpa_once.py --backend cudnn --dtype bf16 --hdim 128 --seqlen 8192)
# ncu_pair LOG NCU_OPTIONS...: one steady-state launch of our main kernel and of cuDNN's backward
# kernel under ncu with those options, into LOG.
ncu_pair() {
  local log=$1
  shift
  {
    echo "=== ours bwd bf16 hdim 128 S 8192"
    timeout --signal=KILL 120 ncu --clock-control none "$@" -k regex:dq_dk_dv --launch-skip 1 -c 1 "${ours[@]}"
    echo "=== cudnn bwd bf16 hdim 128 S 8192"
    timeout --signal=KILL 120 ncu --clock-control none "$@" -k regex:'bprop|dgrad|bwd' --launch-skip 1 -c 1 "${cudnn[@]}"
  } > "$log" 2>&1
}
"${ours[@]}" > /dev/null 2>&1  # compile outside the profiler
# Stall reasons per issued instruction and the pipes' activity, as raw metrics.
ncu_pair "$out/ncu_stalls_raw.txt" --page raw --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,regex:sm__pipe_tensor.*cycles_active\.avg\.pct_of_peak_sustained_active,regex:sm__inst_executed_pipe_(xu|fma|alu|uniform)\.avg\.pct_of_peak_sustained_active"
echo "raw metrics done at ${SECONDS}s"
grep -E "^=== |stalled|pipe_|==ERR|error" "$out/ncu_stalls_raw.txt" | awk '$NF != "0" || /===/' | head -70
log=$out/ncu_bwd_vs_cudnn_bf16_hd128_s8192.txt
ncu_pair "$log" --page details --section SpeedOfLight --section WarpStateStats \
  --section InstructionStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis
echo "ncu pair done at ${SECONDS}s"
grep -E "^=== |  [a-z_0-9]+.*\(|Duration|SM Active Cycles|Compute \(SM\) Throughput|Memory Throughput|Executed Ipc Active|Executed Instructions  |Issue Slots Busy|Warp Cycles Per Issued|Registers Per|Grid Size|L1/TEX Hit|L2 Hit Rate|DRAM Throughput|Shared Memory|Stall|Tensor" "$log" | head -90
ROWS=bf16,128,8192,2,16,none,0 bash "$here/sm90_stalls_bwd_call.sh"
