#!/usr/bin/env bash
# Session 35's third call: the fp16 grid of main's build (torch in the same call, rows under
# 1.03 x cuDNN again alternating with cuDNN), then, in what is left of the call, the sm_80 gpu
# suites (`gpu fwd*`, `gpu bwd*`: the kernels a Hopper config falls back to); all under /tmp/grid,
# tarred into $OUT/grid.tgz after each step.
source "$(dirname "$0")/../call_env.sh"
back=$out
out=/tmp/grid/logs
mkdir -p "$out"
PAIR_BELOW=1.03 run_grid 330 fp16
tar czf "$back/grid.tgz" -C /tmp grid
left=$((560 - SECONDS))
[ "$left" -gt 60 ] && run_gpu_suites $b/fmha_jit_gpu_tests "gpu fwd*;gpu bwd*" "$((left / 2))"
tar czf "$back/grid.tgz" -C /tmp grid
echo "done at ${SECONDS}s"
