#!/usr/bin/env bash
# Examples 37 (hdim 64, 128, 256: the Hopper backward selected, deterministic bit-exact against the
# atomic mode) and 01 on the GPU. Run from the repository root with .carry/ staged; logs go to $OUT.
source "$(dirname "$0")/call_env.sh"
run_examples
echo "done at ${SECONDS}s"
