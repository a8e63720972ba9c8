#!/usr/bin/env bash
# The issue's grid on the issue's card, or nothing: on an H200 the bf16 grid (forward and
# backward, torch in the same call) with the rows under 1.03 x cuDNN re-run alternating with
# cuDNN (PAIR_BELOW, which covers any close row tools/device/sessions/s30_rows_call.sh would
# pair), then the deterministic / atomic pair on GQA S 8192 causal and cuobjdump's counts, in one
# tarball. On any other GPU it stops at once, so that a call that drew an H100 costs only the
# machine's start. GRID_LIMIT (default 400): the second the grid ends by, for a call on little
# device time.
# ANY_CARD=1 runs it on whatever card came (the device tool's H100 serves for reported timings
# too: the torch rows of the same call are the baseline).
source "$(dirname "$0")/call_env.sh"
if [ "${ANY_CARD:-0}" != 1 ] && ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  echo "not an H200: no grid this call"
  exit 0
fi
grid_and_counts "${GRID_LIMIT:-400}"
