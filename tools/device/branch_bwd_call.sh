#!/usr/bin/env bash
# One device call that judges a Hopper backward branch against main (.carry/bin), on whatever GPU
# came: usage tools/device/branch_bwd_call.sh BRANCH, with the branch staged by
# tools/device/stage_branch.sh BRANCH.
# 1. The branch's Hopper backward suites and example 37 at hdim 64 / 128 / 256 (stops on a
#    failure: no benchmark).
# 2. Backward rows main, branch, branch, main (ABBA; session 32's seven rows).
# 3. The bf16 grid with torch in the same call (rows under 1.03 x cuDNN again alternating with
#    cuDNN) of the branch's build if its hdim 128 rows gained 1 % or more on average, else of
#    main's; then det / atomic on GQA S 8192 causal and cuobjdump's counts. GRID=0 skips step 3;
#    GRID=h200 runs it only on an H200; GRID_LIMIT (default 560) is the second the grid ends by.
# Logs under $OUT, the grid in grid.tgz.
source "$(dirname "$0")/call_env.sh"
alt=$1
check_branch_bwd "$alt" || { echo "suites failed at ${SECONDS}s: no benchmark"; exit 1; }
rows=$out/abba.txt
abba_bwd_rows "$alt" "$rows" "128 2048 8 16 16 none" "128 8192 2 16 16 none" \
  "128 8192 2 16 16 causal_top_left" "128 16384 1 16 16 causal_top_left" \
  "128 16384 1 32 8 causal_top_left" "64 8192 2 16 16 none" "128 8192 2 16 16 none det"
gain=$(abba_gain "$rows" "$alt")
echo "hdim 128 rows, branch / main: $gain"
if awk -v g="$gain" 'BEGIN { exit !(g >= 1.01) }'; then
  b=.carry/alt/$alt
  echo "grid: the branch's build"
else
  echo "grid: main's build"
fi
case "${GRID:-1}" in
  0) exit 0 ;;
  h200) nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 ||
    { echo "not an H200: no grid"; exit 0; } ;;
esac
PAIR_BELOW=1.03 grid_and_counts "${GRID_LIMIT:-560}"
