#!/usr/bin/env bash
# The deterministic causal backward's up-down walk (tools/device/patches/bwd-det-up-down-walk.patch)
# on a GPU, against the current tree (.carry/bin). Stage from a clean tree:
#   p=tools/device/patches
#   tools/device/stage_patches.sh walk $p/bwd-det-up-down-walk.patch
#   tools/device/stage_patches.sh walk-u $p/bwd-det-up-down-walk.patch $p/bwd-det-up-cells-override.patch
#   tools/device/stage.sh && rm -f .carry/bin/fmha_jit_{rtc,unit,stress}_tests
#   then prebuild the rows' kernels of both builds (one JSON: bwd, bf16, hdim 128,
#   causal_top_left, deterministic [true, false]) with .carry/bin/fmha-jit and
#   .carry/alt/walk/fmha-jit prebuild FILE --cache-dir .carry/cache
# 1. the walk build's deterministic suites (their GQA causal cases walk) and example 37;
# 2. current / walk, ABBA, on the deterministic GQA causal rows, an MHA control (no walk) and the
#    atomic GQA row (the det / atomic ratio); 3. the walk's dQ against head-major's, bit for bit
#    (the override at 0 and 2); 4. the cells up swept with the override
#    (FMHA_JIT_BWD_DET_UP_CELLS; 0 = head-major) on two GQA rows, and on MHA, where u = 2 is
#    head-major's order through the walk's arithmetic (its cost). Each sweep goes up, then down.
# Run from the repository root with .carry/ staged; logs go to $OUT.
source "$(dirname "$0")/call_env.sh"
export FMHA_JIT_CACHE_DIR=$PWD/.carry/cache  # the A/B kernels of both builds, prebuilt
walk=.carry/alt/walk
warm_sm90a $walk/fmha-jit
for hd in 128 256; do
  timeout 60 $walk/37_bwd_deterministic --hdim $hd --seqlen 1024 > "$out/ex37_hd$hd.txt" 2>&1
  echo "example 37 hdim $hd rc=$?: $(grep -iE 'bit-exact|PASS|FAIL' "$out/ex37_hd$hd.txt" | head -3 | tr '\n' ' ')"
done
echo "=== A/B at ${SECONDS}s"
OUT=$out BRANCH=walk ABBA=1 SUITES="gpu sm90a bwd: deterministic*;gpu sm90a bwd: seqlen 1*" \
  ROWS="${ROWS:-bwd,128,8192,2,32,8,causal_top_left,1 bwd,128,2048,8,32,8,causal_top_left,1 bwd,128,512,32,32,8,causal_top_left,1 bwd,128,16384,1,32,8,causal_top_left,1 bwd,128,8192,2,16,16,causal_top_left,1 bwd,128,8192,2,32,8,causal_top_left,0}" \
  timeout --signal=KILL 420 bash "$(dirname "$0")/ab_branch_call.sh" 2>&1
echo "=== the walk's gradients against head-major's, bit for bit, at ${SECONDS}s"
# The walk moves dQ's visits in time only: its additions keep their order, so dQ must be the same
# bytes as with det_up_cells = 0. dK and dV may differ (session 23 saw them differ): each CTA sums
# its own query tiles in registers, and the walk reorders them. GQA at hdim 128 and 256, and the
# bottom-right mask with more keys than queries (the clamped corner, where k0 > n_block).
for case in "128 3001 3001 causal" "256 2000 2000 causal" "128 1500 3001 causal-br"; do
  read -r d sq sk m <<<"$case"
  compare_walk_bits .carry/alt/walk-u/fmha-jit "$d" "$sq" "$sk" "$m"
done
echo "=== cells up at ${SECONDS}s"
sweep_up_cells 128 8192 2 32 8 "0 1 2 3 4 8"
sweep_up_cells 128 2048 8 32 8 "0 1 2 4 8"
sweep_up_cells 128 8192 2 16 16 "0 1 2"
echo "all done at ${SECONDS}s"
