# Sourced by the tools/device/*_call.sh scripts, run from the repository root on the device
# machine with .carry/ staged (tools/device/stage.sh): the carried libraries, a kernel cache
# outside the carried tree, $out (the folder that comes back) and $b (the carried binaries); then
# which GPU and when, for the log.
set -uo pipefail
export LD_LIBRARY_PATH="$PWD/.carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export FMHA_JIT_CACHE_DIR=/tmp/fmha-jit-cache PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
b=.carry/bin
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
date -u +"%Y-%m-%d %H:%M UTC"
