#!/usr/bin/env bash
# Session 26: Nsight Compute of the Hopper backward's main kernel, GQA 32:8 causal at S 16384 and
# 8192, deterministic and atomic: L2 hit rate and DRAM throughput (are the deterministic chains'
# dQ sums and semaphores out of L2 when the next key tile comes?). Run from the repository root
# with .carry/ staged; logs go to $OUT.
source "$(dirname "$0")/../call_env.sh"
sec="--section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables"
for row in "16384 1" "8192 2"; do
  read -r s bt <<<"$row"
  for det in "" --deterministic; do
    echo "=== GQA 32:8 S $s batch $bt causal ${det:-atomic}"
    timeout --signal=KILL 120 ncu --clock-control none --page details $sec -k regex:dq_dk_dv \
      --launch-skip 1 -c 1 $b/fmha-jit bench --family bwd --hdim-q 128 --seqlen-q "$s" \
      --batch "$bt" --nhead-q 32 --nhead-k 8 --mask causal_top_left $det --warmup 1 --repeat 1 --quiet
  done
done > "$out/ncu_det.txt" 2>&1
grep -E "^=== |Duration|Memory Throughput|DRAM Throughput|L2 Hit Rate|L1/TEX Hit|Mem Busy|Max Bandwidth|L2 Compression" "$out/ncu_det.txt" | head -80
echo "done at ${SECONDS}s"
