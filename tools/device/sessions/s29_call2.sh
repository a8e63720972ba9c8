#!/usr/bin/env bash
# Session 29, one call for both builds (written when refused starts had used most of the device
# time; no machine started that session, so it has not run). Stage main (tools/device/stage.sh)
# and the two builds from tools/device/patches/bwd-split-two-sizes.patch and
# bwd-dq-convert-in-stage2.patch (their headers say how; s29_call.sh's names are the defaults
# here), or name them in SPLIT / FUSED.
# 1. Branch s29-fused-convert (the two-size split tail, and the atomic hdim 128 stage 2
#    converting dQ, no stage 3): the Hopper backward suites and example 37 at hdim 128, then
#    ABBA rows against main. If a suite fails, the split-tail branch's suite and rows instead.
# 1'. The two non-causal hdim 128 rows through main and both builds (session 30).
# 2. The bf16 backward grid's hdim 128 rows with torch (the forward is unchanged since session
#    28; the device time left allowed no more), run by the branch whose suites passed, and
#    cuobjdump's counts.
# FUSED / SPLIT: the staged names (.carry/alt/NAME) of the two builds. With a whole call's time:
# GRID_BEFORE=300 GRID_END=560 GRID_HDIMS="64 128 256".
source "$(dirname "$0")/../call_env.sh"
fused=${FUSED:-s29-fused-convert}
split=${SPLIT:-s29-mixed-split}
back=$out
out=/tmp/grid/logs
mkdir -p "$out"
rows="bwd,128,2048,8,16,16,none,0 bwd,128,8192,2,16,16,none,0 bwd,128,16384,1,16,16,none,0 \
bwd,128,2048,8,16,16,causal_top_left,0 bwd,128,16384,1,32,8,causal_top_left,0 \
bwd,128,8192,2,32,8,none,0"
warm_branch "$fused"
timeout 60 .carry/alt/$fused/37_bwd_deterministic --hdim 128 --seqlen 1024 2>&1 |
  grep -iE "bit-exact|kernel" | head -3
if SUITES="gpu sm90a bwd: every dtype*;gpu sm90a bwd: the split*;\
gpu sm90a bwd: causal launches*;gpu sm90a bwd: seqlen 1*" BRANCH=$fused ABBA=1 \
  ROWS="$rows" bash "$(dirname "$0")/../ab_branch_call.sh"; then
  grid_bin=.carry/alt/$fused/fmha-jit
else
  warm_branch "$split"
  SUITES="gpu sm90a bwd: the split*" BRANCH=$split ABBA=1 ROWS="$rows" \
    bash "$(dirname "$0")/../ab_branch_call.sh" && grid_bin=.carry/alt/$split/fmha-jit
fi
echo "A/B done at ${SECONDS}s; grid with ${grid_bin:-none}"
# cuDNN and flash on the A/B's shapes, in the same call.
timeout 90 python3 .carry/anchor_sdpa.py --hdim 128 --seqlen 2048 8192 16384 --causal both \
  --reps 10 --warmup 3 --json "$back/anchor_hd128.json" 2>&1 | tail -20
echo "anchor done at ${SECONDS}s"
# The two non-causal rows through both builds (main, split, fused, fused, split, main), so that
# the two changes' shares can be told apart (session 30).
for row in "--seqlen-q 2048 --batch 8" "--seqlen-q 8192 --batch 2"; do
  for side in main $split $fused $fused $split main; do
    echo -n "$side $row: "
    timeout 40 "$(staged_fmha_jit "$side")" bench --family bwd --hdim-q 128 $row --nhead-q 16 \
      --nhead-k 16 --mask none --repeat 10 --warmup 3 2>&1 | tail -1
  done
done
echo "three-way done at ${SECONDS}s"
if [ -n "${grid_bin:-}" ] && [ "$SECONDS" -lt "${GRID_BEFORE:-200}" ]; then
  left=$((${GRID_END:-330} - SECONDS))
  timeout "$left" python3 tools/bench/grid_vs_torch.py --fmha-jit "$grid_bin" \
    --anchor .carry/anchor_sdpa.py --dtype bf16 --fwd-impl auto --families bwd --hdim ${GRID_HDIMS:-128} \
    --out /tmp/grid/grid_bf16 > /tmp/grid/grid_log_bf16.txt 2>&1
  echo "grid rc=$? at ${SECONDS}s"
  tail -3 /tmp/grid/grid_log_bf16.txt
  sass_counts
fi
tar czf "$back/grid.tgz" -C /tmp grid
echo "done at ${SECONDS}s"
