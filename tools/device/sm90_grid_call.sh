#!/usr/bin/env bash
# One device call after the Hopper kernels' first run: the wgmma_sm90a forward's gpu tests (under
# a timeout: a hang must not cost the grid), then the bf16 grid of BENCHMARKS.md with torch in the
# same call, the mma_sm80 forward in its own columns. If the Hopper forward fails, the grid's main
# forward rows fall back to mma_sm80 so the call still measures everything else. Then the SASS
# counts of the Hopper cubins the grid compiled. Run from the repository root with .carry/ staged.
source "$(dirname "$0")/call_env.sh"
timeout 100 $b/fmha_jit_gpu_tests "gpu sm90a fwd*" --durations yes > "$out/sm90_fwd_tests.txt" 2>&1
rc=$?
echo "sm90a fwd tests rc=$rc at ${SECONDS}s"
grep -E "FAILED|passed|failed|with expansion|s: gpu" -A2 "$out/sm90_fwd_tests.txt" | tail -14
fwd_impl=auto
[ "$rc" -eq 0 ] || fwd_impl=mma_sm80
timeout 420 python3 tools/bench/grid_vs_torch.py --fmha-jit $b/fmha-jit --anchor .carry/anchor_sdpa.py \
  --dtype bf16 --fwd-impl "$fwd_impl" --fwd-also mma_sm80 --out "$out/grid" > "$out/grid_log.txt" 2>&1
echo "grid rc=$? (fwd impl $fwd_impl) at ${SECONDS}s"
tail -5 "$out/grid_log.txt"
cat "$out/grid.md" 2>/dev/null | head -60
python3 - "$FMHA_JIT_CACHE_DIR" > "$out/cubins.txt" <<'PY'
import glob, json, os, sys
for m in glob.glob(os.path.join(sys.argv[1], "v1/entries/*/*/manifest.json")):
    j = json.load(open(m))
    if j["config"]["impl"] == "wgmma_sm90a" and j["config"]["dtype"] == "bf16":
        print(os.path.join(os.path.dirname(m), "kernel.cubin"), j["kernel_symbols"][-1])
PY
while read -r cubin name; do
  cuobjdump --dump-sass "$cubin" > "$out/sass.txt" 2>&1
  echo "$name HGMMA=$(grep -c HGMMA "$out/sass.txt") STL=$(grep -c 'STL' "$out/sass.txt") LDL=$(grep -c 'LDL' "$out/sass.txt") UTMALDG=$(grep -c UTMALDG "$out/sass.txt") UTMAREDG=$(grep -c UTMAREDG "$out/sass.txt")"
done < "$out/cubins.txt" | sort | head -12
rm -f "$out/sass.txt"
echo "done at ${SECONDS}s"
