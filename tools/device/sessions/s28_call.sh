#!/usr/bin/env bash
# Session 28, first call. Staged from main (tools/device/stage.sh), then
#   tools/device/stage_branch.sh s28-one-section
#   tools/device/stage_patches.sh ovr tools/device/patches/bwd-det-plan-override.patch
#   git branch s27-start 49ebba7 && tools/device/stage_branch.sh s27-start
#   tools/device/stage_branch.sh s28-hd256-consume
# 1. s28_one_section_call.sh: the branch's deterministic suite, example 37 at hdim 256, ABBA rows.
# 2. hdim 128 GQA 32:8 S 16384 causal deterministic, main against every pair ascending in one
#    section (the override build, tail = asc = 8), ABBA.
# 3. Branch s28-hd256-consume (the hdim 256 consumers' loop once, with a runtime walk flag): its
#    deterministic and every-dtype suites, example 37 at hdim 256, ABBA rows at hdim 256 where
#    the chains walk (GQA) and where they do not (MHA).
# 4. The two atomic rows that read 0.99 x cuDNN (hdim 128 non-causal S 2048 / 16384): main against
#    session 27's start (before the writer's read-ahead), ABBA, between two cuDNN runs.
source "$(dirname "$0")/../call_env.sh"
bash "$(dirname "$0")/s28_one_section_call.sh"
ovr() {
  echo -n "$1: "
  FMHA_JIT_BWD_DET_OVERRIDE=$2 timeout 40 $3 bench --family bwd --hdim-q 128 --seqlen-q 16384 \
    --batch 1 --nhead-q 32 --nhead-k 8 --mask causal_top_left --deterministic --repeat 10 \
    --warmup 3 2>&1 | tail -1
}
for side in A B B A; do
  if [ $side = A ]; then ovr main "" $b/fmha-jit; else ovr one-section tail=8,asc=8 .carry/alt/ovr/fmha-jit; fi
done
warm_branch s28-hd256-consume
SUITES="gpu sm90a bwd: deterministic*;gpu sm90a bwd: every dtype*" BRANCH=s28-hd256-consume \
  ABBA=1 ROWS="bwd,256,16384,1,8,2,causal_top_left,1 bwd,256,8192,2,8,2,causal_top_left,1 \
bwd,256,16384,1,8,8,causal_top_left,1 bwd,256,2048,8,8,8,causal_top_left,1" \
  bash "$(dirname "$0")/../ab_branch_call.sh"
cudnn() {
  python3 .carry/anchor_sdpa.py --backend cudnn --hdim 128 --seqlen 2048 16384 --causal no \
    2>&1 | grep -o '"seqlen": [0-9]*\|"bwd_tflops": [0-9.]*' | paste -sd' '
}
cudnn
for s in 2048 16384; do
  for side in A B B A; do
    bin=$b/fmha-jit label=main
    [ $side = B ] && bin=.carry/alt/s27-start/fmha-jit label=s27-start
    echo -n "S $s $label: "
    timeout 40 $bin bench --family bwd --hdim-q 128 --seqlen-q $s --batch $((16384 / s)) \
      --nhead-q 16 --nhead-k 16 --mask none --repeat 20 --warmup 5 2>&1 | tail -1
  done
done
cudnn
echo "done at ${SECONDS}s"
