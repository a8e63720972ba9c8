#!/usr/bin/env bash
# Nsight Compute side by side: our kernel and torch flash's (FA2) on the grid rows that miss their
# targets (BENCHMARKS.md), same sections for both, one text report per row under $OUT.
#   profile_rows.sh FMHA_JIT_BINARY OUT_DIR
# IMPL=mma_sm80 profiles the mma.sync kernels where `auto` would pick the Hopper ones.
set -uo pipefail
bin=$1
out=$2
impl=${IMPL:-auto}
here=$(dirname "$0")
sections="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables
  --section WarpStateStats --section LaunchStats --section Occupancy --section InstructionStats
  --metrics l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,smsp__inst_executed_pipe_tensor_op_hmma.sum,smsp__inst_executed.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
ncu_run() { timeout --signal=KILL 180 ncu --clock-control none --page details $sections "$@" 2>&1; }
# row: name family hdim seqlen batch heads causal(0/1) our-kernel-regex flash-kernel-regex
rows=(
  "fwd_hd256_s8192 fwd 256 8192 2 8 0 regex:fmha_fwd regex:flash_fwd"
  "bwd_hd256_s8192 bwd 256 8192 2 8 0 regex:dq_dk_dv regex:flash_bwd_dq_dk_dv"
  "bwd_hd64_s8192 bwd 64 8192 2 32 0 regex:dq_dk_dv regex:flash_bwd_dq_dk_dv"
  "bwd_hd128_s8192 bwd 128 8192 2 16 0 regex:dq_dk_dv regex:flash_bwd_dq_dk_dv"
)
for row in "${rows[@]}"; do
  read -r name family hdim seqlen batch heads causal ours flash <<<"$row"
  mask=none; tcausal=""
  [ "$causal" = 1 ] && { mask=causal; tcausal=--causal; }
  {
    echo "=== ours $name"
    ncu_run -k "$ours" --launch-skip 1 -c 1 "$bin" bench --family "$family" --hdim-q "$hdim" --seqlen-q "$seqlen" \
      --batch "$batch" --nhead-q "$heads" --mask "$mask" --impl "$impl" --warmup 1 --repeat 1 --quiet
    echo "=== flash $name"
    ncu_run -k "$flash" --launch-skip 1 -c 1 python3 "$here/torch_sdpa_once.py" --hdim "$hdim" \
      --seqlen "$seqlen" $tcausal
  } > "$out/ncu_$name.txt"
  echo "$name: $(grep -c 'Duration' "$out/ncu_$name.txt") duration lines"
done
