#!/usr/bin/env bash
# Nsight Compute on one attention row: fmha-jit's main kernel next to a torch SDPA backend's, the
# same sections for both, one steady-state launch of each (the second; the first warms up). On a
# GPU machine from the repository root with .carry/ staged (tools/scripts/stage.sh); our kernels are
# compiled with line tables (FMHA_JIT_LINEINFO=1) so that the source page names CUDA lines.
#   tools/scripts/ncu_row.sh FAMILY DTYPE HDIM SEQLEN BATCH HQ HK MASK [BACKEND]
#   e.g. tools/scripts/ncu_row.sh bwd bf16 128 8192 2 16 16 none cudnn
# FAMILY fwd | bwd; MASK none | causal; BACKEND cudnn (default) | flash. DET=1: the deterministic
# backward (ours, and flash's under torch.use_deterministic_algorithms). SECTIONS: ncu's section
# flags (default below). Reports: $OUT/ncu_ours.txt and $OUT/ncu_torch.txt (default /tmp).
set -uo pipefail
if [ $# -lt 8 ]; then sed -n '2,10p' "$0"; exit 2; fi
read -r fam dtype hd s batch hq hk mask <<<"$*"
backend=${9:-cudnn}
export LD_LIBRARY_PATH="$PWD/.carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export FMHA_JIT_CACHE_DIR="${FMHA_JIT_CACHE_DIR:-/tmp/fmha-jit-cache}" FMHA_JIT_LINEINFO=1
out=${OUT:-/tmp}
mkdir -p "$out"
sections=${SECTIONS:-"--section SpeedOfLight --section ComputeWorkloadAnalysis \
--section MemoryWorkloadAnalysis --section WarpStateStats --section InstructionStats \
--section LaunchStats --section Occupancy --section SourceCounters"}
# The main kernel of each side: ours by its stage name, torch's by its backend's kernel names.
case "$fam:$backend" in
  fwd:cudnn) theirs="regex:fprop" ;;
  bwd:cudnn) theirs="regex:bprop|dgrad" ;;
  fwd:flash) theirs="regex:flash_fwd" ;;
  bwd:flash) theirs="regex:flash_bwd_dq_dk_dv" ;;
  *) echo "FAMILY fwd | bwd, BACKEND cudnn | flash"; exit 2 ;;
esac
if [ "$fam" = fwd ]; then ours="regex:fmha_fwd"; else ours="regex:dq_dk_dv"; fi
det_ours=() det_torch=()
if [ "${DET:-0}" = 1 ]; then det_ours=(--deterministic); det_torch=(--deterministic); fi
bench=(.carry/bin/fmha-jit bench --family "$fam" --dtype "$dtype" --hdim-q "$hd" --seqlen-q "$s"
       --batch "$batch" --nhead-q "$hq" --nhead-k "$hk" --mask "$mask" "${det_ours[@]}")
causal=no
[ "$mask" = causal ] && causal=yes
torch=(python3 tools/scripts/torch_sdpa.py --family "$fam" --dtype "$dtype" --hdim "$hd" --seqlen "$s"
       --tokens $((batch * s)) --heads "$hq:$hk" --causal "$causal" --backend "$backend"
       "${det_torch[@]}" --reps 1 --warmup 1 --json /dev/null)
"${bench[@]}" --repeat 1 --warmup 0 > /dev/null 2>&1  # compiled outside the profiler
# shellcheck disable=SC2086  # $sections holds several flags
timeout --signal=KILL 300 ncu --clock-control none --page details --import-source yes $sections \
  -k "$ours" --launch-skip 1 -c 1 "${bench[@]}" --repeat 1 --warmup 1 > "$out/ncu_ours.txt" 2>&1
echo "ours rc $?: $out/ncu_ours.txt"
# shellcheck disable=SC2086
timeout --signal=KILL 300 ncu --clock-control none --page details $sections -k "$theirs" \
  --launch-skip 1 -c 1 "${torch[@]}" > "$out/ncu_torch.txt" 2>&1
echo "torch $backend rc $?: $out/ncu_torch.txt"
grep -E "^  [a-zA-Z_].*\(|Duration|Executed Instructions  |Warp Cycles Per Issued|Registers Per|Grid Size|Block Size" \
  "$out/ncu_ours.txt" "$out/ncu_torch.txt"
