#!/usr/bin/env bash
# Where the backward's extra time goes, against torch flash (FA2): executed instructions per SASS
# opcode and the warp stall reasons of the dq_dk_dv kernel, ours and FA2's, plus our
# deterministic mode against our atomic mode. One text report per row under OUT_DIR.
#   profile_mix.sh FMHA_JIT_BINARY OUT_DIR
set -uo pipefail
bin=$1
out=$2
here=$(dirname "$0")
what="--section WarpStateStats --metrics sass__inst_executed_per_opcode --print-metric-instances details"
ncu_run() { timeout --signal=KILL 120 ncu --clock-control none --page details $what "$@" 2>&1; }
ours() {  # hdim seqlen heads [--deterministic]
  ncu_run -k regex:dq_dk_dv --launch-skip 1 -c 1 "$bin" bench --family bwd --hdim-q "$1" \
    --seqlen-q "$2" --batch $((16384 / $2)) --nhead-q "$3" "${@:4}" --warmup 1 --repeat 1 --quiet
}
flash() {  # hdim seqlen
  ncu_run -k regex:flash_bwd_dq_dk_dv --launch-skip 1 -c 1 python3 "$here/torch_sdpa_once.py" \
    --hdim "$1" --seqlen "$2"
}
{ echo "=== ours hd256"; ours 256 8192 8; echo "=== flash hd256"; flash 256 8192; } > "$out/mix_hd256.txt"
{ echo "=== ours hd64"; ours 64 8192 32; echo "=== flash hd64"; flash 64 8192; } > "$out/mix_hd64.txt"
{ echo "=== ours hd128 atomic"; ours 128 8192 16; echo "=== ours hd128 det"; ours 128 8192 16 --deterministic; } > "$out/mix_det128.txt"
