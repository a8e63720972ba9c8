#!/usr/bin/env bash
# The main job (README "Run"): install what is missing, build, prebuild the default kernels into
# the cache, and run the examples (on the GPU where one exists; example 37 falls back to the CPU
# reference without one).
set -euo pipefail
cd "$(dirname "$0")/.."
.ci/install-deps.sh
cmake --preset release
cmake --build --preset release -j "$(nproc)"
build-release/bin/fmha-jit prebuild configs/default.json
build-release/bin/fmha-jit arch
build-release/bin/01_basic_fwd
build-release/bin/37_bwd_deterministic
