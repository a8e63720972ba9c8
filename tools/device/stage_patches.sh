#!/usr/bin/env bash
# Stages the current tree with patches applied (tools/device/patches/*.patch) as .carry/alt/NAME,
# for tools/device/ab_branch_call.sh BRANCH=NAME: commits the patches on a temporary branch NAME
# from HEAD, stages it with tools/device/stage_branch.sh (which rebuilds this tree afterwards),
# then deletes the branch. Run from a clean working tree:
#   tools/device/stage_patches.sh NAME PATCH [PATCH ...]
set -euo pipefail
cd "$(dirname "$0")/../.."
name=$1
shift
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  echo "stage_patches.sh: commit or stash first" >&2
  exit 1
fi
here=$(git rev-parse --abbrev-ref HEAD)
git branch -f "$name" HEAD
git checkout -q "$name"
trap 'git checkout -q "$here"; git branch -D "$name" >/dev/null' EXIT
for patch in "$@"; do git apply --index "$patch"; done
git commit -qm "staged patches: $*"
git checkout -q "$here"
tools/device/stage_branch.sh "$name"
