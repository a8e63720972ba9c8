#!/usr/bin/env bash
# Stages what a GPU machine needs into .carry/ (git-ignored): the release build's executables and
# the two shared libraries they need that an Ubuntu GPU image may lack (spdlog, fmt). The device
# tool carries .carry/; tools/device/gpu_check.sh runs there.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-release}
# Build first: staging binaries of an older tree measures the wrong code (session 10 did once).
cmake --build "$build" -j "$(nproc)" >/dev/null
rm -rf .carry/bin .carry/lib  # .carry/cache (a warmed kernel cache) stays
mkdir -p .carry/bin .carry/lib
cp "$build"/bin/* .carry/bin/
for t in "$build"/tests/fmha_jit_*_tests; do cp "$t" .carry/bin/; done
strip --strip-debug .carry/bin/* 2>/dev/null || true
for lib in $(ldd .carry/bin/fmha-jit | awk '/spdlog|fmt/ {print $3}'); do cp -L "$lib" .carry/lib/; done
du -sh .carry
