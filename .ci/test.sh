#!/usr/bin/env bash
# The test job (README "Test"): install what is missing, then build and run every test that needs
# no GPU in the dev configuration (warnings are errors), the Python package's tests (.ci/python.sh),
# and the C++ tests again under ASan + UBSan.
# GPU tests run where a GPU exists and report "skipped" elsewhere. The ASan pass leaves out the
# rtc spill sweeps (CMakePresets.json): what ptxas reports does not depend on host sanitizers, and
# they are the longest tests.
set -euo pipefail
cd "$(dirname "$0")/.."
.ci/install-deps.sh
jobs=$(nproc)
cmake --preset dev
cmake --build --preset dev -j "$jobs"
ctest --preset dev -j "$jobs"
.ci/python.sh
cmake --preset asan
cmake --build --preset asan -j "$jobs"
ctest --preset asan -j "$jobs"
# libFuzzer targets (clang, ASan + UBSan): one minute each from the seed corpus.
cmake --preset fuzz
cmake --build --preset fuzz -j "$jobs"
tests/fuzz/run_fuzzers.sh 60
