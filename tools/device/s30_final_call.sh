#!/usr/bin/env bash
# Session 30's final call: main (47c91f8, code as in session 28; neither session 29 patch merged)
# on whatever GPU came: the bf16 grid, forward and backward, with torch in the same call, and
# cuobjdump's counts; then the fp16 grid in the time left. Everything comes back in one tarball.
source "$(dirname "$0")/call_env.sh"
back=$out
run_grid 420 bf16
tar czf "$back/grid.tgz" -C /tmp grid  # kept if the call is cut short below
sass_counts
run_grid 570 fp16
tar czf "$back/grid.tgz" -C /tmp grid
echo "done at ${SECONDS}s"
