#!/usr/bin/env bash
# A short device call for forward changes: the Hopper forward suite on the staged build, then the
# forward half of the grid (torch in the same call) for each dtype of DTYPE (default "bf16 fp16")
# within LIMIT seconds (default 230), then cuobjdump's HGMMA / STL / LDL counts of every forward
# cubin in the warmed cache. For when too little device time is left for merged_check_call.sh.
# Run from the repository root with .carry/ staged and .carry/cache warmed; logs go to $OUT.
source "$(dirname "$0")/call_env.sh"
warm_sm90a $b/fmha-jit
run_gpu_suites $b/fmha_jit_gpu_tests "gpu sm90a fwd*" 120
export FMHA_JIT_CACHE_DIR=$PWD/.carry/cache
mkdir -p /tmp/grid
for dtype in ${DTYPE:-bf16 fp16}; do
  left=$((${LIMIT:-230} - SECONDS))
  [ "$left" -lt 40 ] && echo "grid $dtype: skipped, ${left}s left" && continue
  timeout "$left" python3 tools/bench/grid_vs_torch.py --fmha-jit $b/fmha-jit \
    --anchor .carry/anchor_sdpa.py --dtype "$dtype" --fwd-impl auto --families fwd \
    --out "/tmp/grid/grid_$dtype" > "/tmp/grid/grid_log_$dtype.txt" 2>&1
  echo "grid $dtype rc=$? at ${SECONDS}s"
done
for cubin in .carry/cache/v1/entries/*/*/kernel.cubin; do
  grep -q '"family": *"fwd"' "$(dirname "$cubin")/manifest.json" || continue
  sass=$(/usr/local/cuda/bin/cuobjdump -sass "$cubin" 2>/dev/null)
  echo "$(basename "$(dirname "$cubin")" | cut -c1-12) HGMMA $(grep -c HGMMA <<<"$sass")" \
    "STL $(grep -c 'STL' <<<"$sass") LDL $(grep -c 'LDL' <<<"$sass")"
done > /tmp/grid/sass.txt
tar czf "$out/grid.tgz" -C /tmp grid
echo "done at ${SECONDS}s"
