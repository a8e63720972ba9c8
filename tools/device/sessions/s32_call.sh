#!/usr/bin/env bash
# Session 32's call: the software-pipelined Hopper backward (branch s32-pipelined: the next query
# tile's S^T issued under the current tile's dQ MMA and dQ block store; staged with
# tools/device/stage_branch.sh s32-pipelined) against main (.carry/bin), on whatever GPU came.
# 1. The branch's Hopper backward suites and example 37 at hdim 64 / 128 / 256 (stop on a
# failure). 2. Backward rows main, branch, branch, main (ABBA). 3. The bf16 grid with torch in
# the same call (rows under 1.03 x cuDNN again alternating with cuDNN) of the branch's build if
# its hdim 128 rows gained 1 % or more on average, else of main's, then det / atomic on GQA S 8192
# causal and cuobjdump's counts (GRID=0: not step 3; GRID_LIMIT: the second the grid ends by,
# default 540). Logs under
# $OUT, the grid in grid.tgz.
# The call is now tools/device/branch_bwd_call.sh's, for that branch (its gain awk, fixed after
# session 32, reads TFLOP/s by the setup column; session 32's took the 12th column, which on the
# deterministic row is the milliseconds).
GRID_LIMIT=${GRID_LIMIT:-540} exec bash "$(dirname "$0")/../branch_bwd_call.sh" s32-pipelined
