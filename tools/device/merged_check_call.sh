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
mkdir -p /tmp/grid
for dtype in ${DTYPE:-bf16 fp16}; do
  left=$((${LIMIT:-570} - SECONDS))
  [ "$left" -lt 60 ] && echo "grid $dtype: skipped, ${left}s left" && continue
  timeout "$left" python3 tools/bench/grid_vs_torch.py --fmha-jit $b/fmha-jit \
    --anchor .carry/anchor_sdpa.py --dtype "$dtype" --fwd-impl auto \
    --families ${FAMILIES:-fwd bwd} \
    --out "/tmp/grid/grid_$dtype" > "/tmp/grid/grid_log_$dtype.txt" 2>&1
  echo "grid $dtype rc=$? at ${SECONDS}s"
  tail -3 "/tmp/grid/grid_log_$dtype.txt"
done
if [ "${SASS:-0}" = 1 ]; then
  for cubin in "$FMHA_JIT_CACHE_DIR"/v1/entries/*/*/kernel.cubin; do
    sass=$(/usr/local/cuda/bin/cuobjdump -sass "$cubin" 2>/dev/null)
    echo "$(basename "$(dirname "$cubin")" | cut -c1-12) HGMMA $(grep -c HGMMA <<<"$sass")" \
      "STL $(grep -c STL <<<"$sass") LDL $(grep -c LDL <<<"$sass")"
  done > /tmp/grid/sass.txt
fi
tar czf "$back/grid.tgz" -C /tmp grid
echo "done at ${SECONDS}s"
