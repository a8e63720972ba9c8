#!/usr/bin/env bash
# Session 35's first call: main's Hopper kernels through every `gpu sm90a*` suite (forward,
# backward, the probes) and the GPU reference's, in one Catch2 run each under one timeout, then
# examples 37 (hdim 64 / 128 / 256) and 01; the card is named first, logs in $OUT.
source "$(dirname "$0")/../call_env.sh"
warm_sm90a $b/fmha-jit
echo "warm done at ${SECONDS}s"
run_gpu_suites $b/fmha_jit_gpu_tests "gpu sm90a*;gpu reference*" 400
run_examples
echo "done at ${SECONDS}s"
