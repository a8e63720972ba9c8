#!/usr/bin/env bash
# One device call after patches merge into main: the Hopper gpu suites they touch (kernels
# compiled up front on all cores), examples 37 and 01, then the grid of BENCHMARKS.md for each
# dtype of DTYPE (default "bf16 fp16") with torch in the same call, each under what is left of
# LIMIT seconds (default 570) so that the call ends inside the device tool's 600 s. Run from the
# repository root with .carry/ staged (warmed .carry/cache: see sm90_grid_only_call.sh); logs go
# to $OUT.
# For a short budget after a forward change (about 200 s):
#   SUITES="gpu sm90a fwd*" EXAMPLES=0 FAMILIES=fwd SASS=1 LIMIT=230
# FAMILIES: the grid's families (default "fwd bwd"); SASS=1 adds cuobjdump's HGMMA / STL / LDL
# counts of every cubin in .carry/cache (sass.txt in the tarball).
source "$(dirname "$0")/call_env.sh"
# Everything goes in one tarball: the device tool brings back 8 files at most, and five suites'
# and four examples' logs alone are 9 (session 21 lost a grid's tarball so).
back=$out
out=/tmp/grid/logs
mkdir -p "$out"
check_main "${SUITES:-gpu sm90a fwd*;gpu sm90a bwd: every dtype*;gpu sm90a bwd: deterministic*}" \
  "${EXAMPLES:-1}"
[ -d .carry/cache ] && export FMHA_JIT_CACHE_DIR=$PWD/.carry/cache
run_grid "${LIMIT:-570}" "${DTYPE:-bf16 fp16}" "${FAMILIES:-fwd bwd}"
[ "${SASS:-0}" = 1 ] && sass_counts
tar czf "$back/grid.tgz" -C /tmp grid
echo "done at ${SECONDS}s"
