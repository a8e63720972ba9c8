#!/usr/bin/env bash
# One device call for the Hopper building blocks (issue 7, docs/SM90.md): the probe GEMM's gpu
# test (TMA + mbarrier + wgmma against a CPU GEMM), then the probe's SASS, counting HGMMA (a
# matrix kernel whose SASS shows only HMMA is on the slow path). Run from the repository root
# with .carry/ staged (tools/device/stage.sh); logs go to $OUT.
set -uo pipefail
export LD_LIBRARY_PATH="$PWD/.carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
out=${OUT:-/tmp}
FMHA_JIT_SM90_PROBE_CUBIN=$out/sm90_probe.cubin timeout 120 .carry/bin/fmha_jit_gpu_tests \
  "gpu sm90a*" --success > "$out/sm90_probe_test.txt" 2>&1
echo "probe test rc=$?"; tail -4 "$out/sm90_probe_test.txt"
if [ -f "$out/sm90_probe.cubin" ]; then
  cuobjdump --dump-sass "$out/sm90_probe.cubin" > "$out/sm90_probe_sass.txt" 2>&1
  echo "HGMMA: $(grep -c HGMMA "$out/sm90_probe_sass.txt"), HMMA: $(grep -c ' HMMA' "$out/sm90_probe_sass.txt"), UTMALDG: $(grep -c UTMALDG "$out/sm90_probe_sass.txt")"
fi
