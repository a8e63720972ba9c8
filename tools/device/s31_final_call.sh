#!/usr/bin/env bash
# Session 31's final call: main with the persistent backward merged, on whatever GPU came. The
# bf16 grid (forward and backward, torch in the same call; rows under 1.03 x cuDNN re-run
# alternating with cuDNN), then cuobjdump's counts over the call's cache, in one tarball.
source "$(dirname "$0")/call_env.sh"
back=$out
out=/tmp/grid/logs
mkdir -p "$out"
PAIR_BELOW=${PAIR_BELOW:-1.03} run_grid 540 bf16
tar czf "$back/grid.tgz" -C /tmp grid  # kept if the call is cut short below
sass_counts
tar czf "$back/grid.tgz" -C /tmp grid
echo "done at ${SECONDS}s"
