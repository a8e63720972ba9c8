#!/usr/bin/env bash
# Stages what a GPU machine needs into .carry/ (git-ignored), to be copied there beside the
# working tree: the release build's executables and test suites, and the two shared libraries
# they need that a GPU image may lack (spdlog, fmt). The other tools/scripts scripts run there, from
# the repository root.
#   tools/scripts/stage.sh [BUILD_DIR]   (default build-release, configured by `cmake --preset release`)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-release}
# Built first: staging the binaries of an older tree would measure the wrong code.
cmake --build "$build" -j "$(nproc)" >/dev/null
rm -rf .carry/bin .carry/lib  # .carry/cache (a warmed kernel cache) stays
mkdir -p .carry/bin .carry/lib
cp "$build"/bin/* .carry/bin/
for t in "$build"/tests/fmha_jit_*_tests; do cp "$t" .carry/bin/; done
strip --strip-debug .carry/bin/* 2>/dev/null || true
for lib in $(ldd .carry/bin/fmha-jit | awk '/spdlog|fmt/ {print $3}'); do cp -L "$lib" .carry/lib/; done
du -sh .carry
