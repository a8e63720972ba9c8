#!/usr/bin/env bash
# Stages a branch's fmha-jit, example 37 and gpu tests next to the current tree's
# (tools/device/stage.sh) for a same-call A/B on the GPU: builds BRANCH in the release build
# folder, copies those binaries to .carry/alt/<BRANCH>/, then rebuilds the checked-out tree so
# build-release matches it again.
# Run from a clean working tree: usage tools/device/stage_branch.sh BRANCH [build folder].
set -euo pipefail
cd "$(dirname "$0")/../.."
branch=$1
build=${2:-build-release}
here=$(git rev-parse --abbrev-ref HEAD)
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  echo "stage_branch.sh: commit or stash first (the tree is switched to $branch and back)" >&2
  exit 1
fi
git checkout -q "$branch"
trap 'git checkout -q "$here"' EXIT
cmake --build "$build" -j "$(nproc)" >/dev/null
dest=.carry/alt/$branch
rm -rf "$dest" && mkdir -p "$dest"
cp "$build"/bin/fmha-jit "$build"/bin/37_bwd_deterministic "$build"/tests/fmha_jit_gpu_tests "$dest"/
strip --strip-debug "$dest"/* 2>/dev/null || true
git checkout -q "$here"
trap - EXIT
cmake --build "$build" -j "$(nproc)" >/dev/null
du -sh .carry
