#!/usr/bin/env bash
# Session 31, the call that ran: the persistent Hopper backward (branch s31-persistent: main with
# tools/device/patches/bwd-persistent.patch, whose header says how to stage it with
# tools/device/stage_branch.sh) against main (.carry/bin). 1. The branch's Hopper backward suites
# (every dtype, the deterministic mode's bit-exactness, the split tail, causal sections, seqlen 1)
# and example 37 at hdim 64 / 128 / 256. 2. Backward rows main, branch, branch, main (ABBA).
# 3. The branch's bf16 grid with torch in the same call (rows under 1.03 x cuDNN re-run
# alternating with cuDNN): device starts were scarce, so one call carries all three. Logs under
# $OUT, the grid in grid.tgz.
source "$(dirname "$0")/../call_env.sh"
alt=s31-persistent
check_branch_bwd $alt || { echo "suites failed at ${SECONDS}s: no benchmark"; exit 1; }
abba_bwd_rows $alt "$out/abba.txt" "128 2048 8 16 16 none" "128 8192 2 16 16 none" \
  "128 16384 1 16 16 causal_top_left" "128 16384 1 32 8 causal_top_left" "64 8192 2 16 16 none" \
  "128 8192 2 16 16 none det"
b=.carry/alt/$alt  # the grid of the branch's build
PAIR_BELOW=1.03 run_grid 575 bf16
tar czf "$out/grid.tgz" -C /tmp grid
echo "done at ${SECONDS}s"
