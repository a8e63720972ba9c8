#!/usr/bin/env bash
# The GQA 32:8 S 16384 non-causal forward is bimodal (BENCHMARKS.md: 591-611 TFLOP/s run alone,
# 625-674 inside the grid's sweep, the MHA row of the same size 677-682). This call runs the same
# kernel in the ways that differ between the two: alone, alone three times in one process (a
# sweep of one point), after the MHA row in one sweep, after the grid's other forward rows, with
# bshd strides, and with no LSE store; then the fast and a slow way under Nsight Compute
# (SpeedOfLight, MemoryWorkloadAnalysis). Run from the repository root with .carry/ staged; logs
# go to $OUT.
source "$(dirname "$0")/call_env.sh"
[ -d .carry/cache ] && export FMHA_JIT_CACHE_DIR=$PWD/.carry/cache
gqa='"family": "fwd", "dtype": "bf16", "hdim": 128, "seqlen": 16384, "batch": 1, "nhead_q": 32, "nhead_k": 8'
mha='"family": "fwd", "dtype": "bf16", "hdim": 128, "seqlen": 16384, "batch": 1, "nhead_q": 16'
run_sweep() {  # name, JSON list of points
  echo "$2" > "/tmp/$1.json"
  echo "== $1"
  $b/fmha-jit bench --sweep "/tmp/$1.json" 2>&1 | grep -E "^bf16" | awk '{print "  ", $0}'
}
echo "== alone"
for i in 1 2 3; do
  $b/fmha-jit bench --family fwd --hdim-q 128 --seqlen-q 16384 --nhead-q 32 --nhead-k 8 2>&1 | tail -1
done
run_sweep one_process "[{$gqa}, {$gqa}, {$gqa}]"
run_sweep after_mha "[{$mha}, {$gqa}, {$mha}, {$gqa}]"
run_sweep grid_forward "[{\"family\": \"fwd\", \"dtype\": \"bf16\", \"hdim\": [64, 128, 256], \"seqlen\": [512, 2048, 8192, 16384], \"causal\": [false, true], \"tokens\": 16384, \"model_dim\": 2048}, {$gqa}]"
run_sweep bshd_and_no_lse "[{$gqa, \"layout\": \"bshd\"}, {$gqa, \"lse\": false}, {$gqa}]"
for how in alone after_mha; do
  cmd="$b/fmha-jit bench --family fwd --hdim-q 128 --seqlen-q 16384 --nhead-q 32 --nhead-k 8 --warmup 1 --repeat 1"
  [ $how = after_mha ] && cmd="$b/fmha-jit bench --sweep /tmp/after_mha.json --warmup 1 --repeat 1"
  timeout --signal=KILL 120 ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis \
    -k regex:fmha_fwd -c 8 $cmd > "$out/ncu_gqa_$how.txt" 2>&1
  echo "ncu $how rc=$?: $(grep -E "Duration|L2 Hit Rate |DRAM Throughput" "$out/ncu_gqa_$how.txt" | tr -s ' ' | tr '\n' ';' | head -c 900)"
done
echo "done at ${SECONDS}s"
