#!/usr/bin/env bash
# compute-sanitizer (memcheck, synccheck, racecheck) over the Hopper kernels through the CLI, on a
# GPU machine from the repository root with .carry/ staged (tools/scripts/stage.sh): forward and
# backward in both dQ modes, masked and unmasked, odd lengths, hdim 64 / 128 / 256, kernels
# compiled with line tables so that reports name source lines. Then the handoff probe under
# racecheck, with mbarriers and with __syncthreads. Prints one line per run; full reports in
# $OUT/sanitize.txt (default /tmp), racecheck hazards grouped by source line in
# $OUT/sanitize_hazards.txt.
set -uo pipefail
export LD_LIBRARY_PATH="$PWD/.carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export FMHA_JIT_CACHE_DIR="${FMHA_JIT_CACHE_DIR:-/tmp/fmha-jit-cache}"
export FMHA_JIT_LINEINFO=1
out=${OUT:-/tmp}
b=.carry/bin
mkdir -p "$out"
log=$out/sanitize.txt
: > "$log"
shape="--dtype bf16 --batch 1 --nhead-q 4 --nhead-k 2 --seqlen-q 301 --seqlen-k 517"
cases=()
for hd in 64 128 256; do
  cases+=("--family fwd --hdim-q $hd --mask causal-br" "--family fwd --hdim-q $hd --mask none"
          "--family bwd --hdim-q $hd --mask causal-br" "--family bwd --hdim-q $hd --mask none"
          "--family bwd --hdim-q $hd --mask causal-br --deterministic"
          "--family bwd --hdim-q $hd --mask window:64,0 --deterministic")
done
# Each case once without a sanitizer first: it compiles the kernel, and a wrong result shows here.
for c in "${cases[@]}"; do
  $b/fmha-jit run $shape $c --verify > /dev/null 2>&1 || echo "FAILED without a sanitizer: $c"
done
for tool in memcheck synccheck racecheck; do
  for c in "${cases[@]}"; do
    report=$(timeout 120 compute-sanitizer --tool "$tool" --print-limit 20 $b/fmha-jit run $shape \
      $c 2>&1)
    echo "$tool [$c] rc $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' <<<"$report" | head -1)"
    printf '===== %s %s\n%s\n' "$tool" "$c" "$report" >> "$log"
  done
done
for how in mbarriers __syncthreads; do
  t="gpu sm90a: the handoff probe passes rows between warps through $how"
  report=$(timeout 120 compute-sanitizer --tool racecheck --print-limit 20 \
    $b/fmha_jit_gpu_sm90_tests "$t" 2>&1)
  echo "racecheck [$t] rc $?: $(grep -E 'RACECHECK SUMMARY' <<<"$report") $(grep -cE 'FAILED' \
    <<<"$report") failed assertions"
  printf '===== racecheck %s\n%s\n' "$t" "$report" >> "$log"
done
grep -E "Race reported|and (Read|Write) access" "$log" | sed -E 's/\+0x[0-9a-f]+//; s/\[[0-9]+ hazards\]//' \
  | sort | uniq -c | sort -rn > "$out/sanitize_hazards.txt"
