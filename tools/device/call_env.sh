# Sourced by the tools/device/*_call.sh scripts, run from the repository root on the device
# machine with .carry/ staged (tools/device/stage.sh): the carried libraries, a kernel cache
# outside the carried tree, $out (the folder that comes back) and $b (the carried binaries); then
# which GPU and when, for the log.
set -uo pipefail
export LD_LIBRARY_PATH="$PWD/.carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export FMHA_JIT_CACHE_DIR=/tmp/fmha-jit-cache PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
mkdir -p "$out"
b=.carry/bin
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
date -u +"%Y-%m-%d %H:%M UTC"

# run_gpu_suites TESTS "suite;suite..." [SECONDS]: each gpu test suite under a kill timeout (a
# hang must not cost the call), its log in $out, its verdict here. Returns 1 if one failed, and
# with STOP_ON_FAIL=1 runs no suite after it (a build whose first suite hangs would hang the
# next ones too, each for the whole timeout).
run_gpu_suites() {
  local tests=$1 limit=${3:-150} suite log rc failed=0
  local -a suites
  IFS=";" read -ra suites <<<"$2"
  for suite in "${suites[@]}"; do
    log="$out/$(echo "$suite" | tr -c 'a-z0-9\n' '_').txt"
    timeout --signal=KILL "$limit" "$tests" "$suite" --durations yes > "$log" 2>&1
    rc=$?
    echo "$suite rc=$rc at ${SECONDS}s"
    grep -E "FAILED|passed|failed|with expansion" -A2 "$log" | tail -12
    if [ "$rc" != 0 ] && [ "$rc" != 77 ]; then
      failed=1
      [ "${STOP_ON_FAIL:-0}" = 1 ] && break
    fi
  done
  return $failed
}

# run_examples: example 37 at hdim 64, 128, 256 (deterministic bit-exact against the atomic mode,
# with the kernels `auto` picks) and example 01, logs in $out.
run_examples() {
  local hd
  for hd in 64 128 256; do
    timeout 60 $b/37_bwd_deterministic --hdim $hd --seqlen 1024 > "$out/ex37_hd$hd.txt" 2>&1
    echo "example 37 hdim $hd rc=$?: $(grep -iE 'kernel|bit-exact|PASS|FAIL' "$out/ex37_hd$hd.txt" | head -5 | tr '\n' ' ')"
  done
  timeout 60 $b/01_basic_fwd > "$out/ex01.txt" 2>&1
  echo "example 01 rc=$?: $(tail -2 "$out/ex01.txt" | tr '\n' ' ')"
}

# staged_fmha_jit NAME: the fmha-jit of a staged build (.carry/alt/NAME, tools/device/
# stage_branch.sh), or the carried tree's for NAME main.
staged_fmha_jit() {
  if [ "$1" = main ]; then echo "$b/fmha-jit"; else echo ".carry/alt/$1/fmha-jit"; fi
}

# warm_sm90a FMHA_JIT: compiles, on all cores, the sm_90a kernels the Hopper gpu suites use
# (every hdim, dtype, mask, dQ mode and LSE flag, both families) into the cache, since the gpu
# tests compile one at a time.
warm_sm90a() {
  local sweep=/tmp/sm90a-sweep.json
  python3 - "$sweep" <<'PY'
import json, sys
masks = ["none", "causal_top_left", "causal_bottom_right", "sliding_window"]
json.dump([{"family": ["fwd", "bwd"], "dtype": ["fp16", "bf16"], "hdim_q": d, "hdim_v": d,
            "mask": masks, "deterministic": [False, True], "lse": [False, True], "arch": "sm_90"}
           for d in (64, 128, 256)], open(sys.argv[1], "w"))
PY
  timeout 120 "$1" prebuild "$sweep" -j "$(nproc)" 2>&1 | tail -1
}

# warm_branch NAME: a staged build's (.carry/alt/NAME, tools/device/stage_branch.sh) sm_90a
# kernels compiled up front, and its example 37 at hdim 256 (the deterministic mode's bit-exact
# line), before its A/B (ab_branch_call.sh).
warm_branch() {
  warm_sm90a ".carry/alt/$1/fmha-jit"
  timeout 60 ".carry/alt/$1/37_bwd_deterministic" --hdim 256 --seqlen 1024 2>&1 | grep -i bit-exact
}

# check_main SUITES [EXAMPLES]: the carried build's sm_90a kernels compiled up front, its gpu
# suites (';'-separated) and, unless EXAMPLES is 0, examples 37 and 01; logs in $out.
check_main() {
  warm_sm90a $b/fmha-jit
  run_gpu_suites $b/fmha_jit_gpu_tests "$1" 150
  [ "${2:-1}" = 1 ] && run_examples
}

# check_branch_bwd NAME: a staged build's (.carry/alt/NAME) sm_90a kernels compiled up front, its
# Hopper backward suites (stopping at the first failure; returns 1 then) and example 37 at hdim
# 64 / 128 / 256, before its A/B against main (abba_bwd_rows).
check_branch_bwd() {
  local hd
  warm_sm90a ".carry/alt/$1/fmha-jit"
  STOP_ON_FAIL=1 run_gpu_suites ".carry/alt/$1/fmha_jit_gpu_tests" "gpu sm90a bwd: every dtype*;\
gpu sm90a bwd: deterministic*;gpu sm90a bwd: the split*;gpu sm90a bwd: causal launches*;\
gpu sm90a bwd: seqlen 1*" 120 || return 1
  for hd in 64 128 256; do
    echo "example 37 hdim $hd: $(timeout 60 ".carry/alt/$1/37_bwd_deterministic" --hdim $hd \
      --seqlen 1024 2>&1 | grep -iE 'bit-exact|FAIL' | head -2 | tr '\n' ' ')"
  done
  echo "checks done at ${SECONDS}s"
}

# bench_bwd_side FILE BUILD "HDIM SEQLEN BATCH HQ HK MASK [det]": one backward row benched with
# one build (main or a staged name, staged_fmha_jit), labelled with the row and the build, echoed
# and appended to FILE.
bench_bwd_side() {
  local file=$1 side=$2 row=$3 hd s bt hq hk m det flag=""
  read -r hd s bt hq hk m det <<<"$row"
  [ "$det" = det ] && flag=--deterministic
  echo "$row | $side: $(timeout 40 "$(staged_fmha_jit "$side")" bench --family bwd \
    --hdim-q $hd --seqlen-q $s --batch $bt --nhead-q $hq --nhead-k $hk --mask $m $flag \
    --repeat 10 --warmup 3 2>&1 | tail -1)" | tee -a "$file"
}

# abba_bwd_rows NAME FILE "HDIM SEQLEN BATCH HQ HK MASK [det]" ...: each backward row benched
# with main's build, NAME's, NAME's and main's (ABBA: a drift over the call shows as one), through
# bench_bwd_side.
abba_bwd_rows() {
  local alt=$1 file=$2 row side
  shift 2
  for row in "$@"; do
    for side in main "$alt" "$alt" main; do bench_bwd_side "$file" "$side" "$row"; done
  done
  echo "rows done at ${SECONDS}s"
}

# abba_gain FILE NAME: mean TFLOP/s of NAME's hdim 128 rows in FILE (abba_bwd_rows) over main's;
# TFLOP/s is the field before the setup's ("compiled ...", "disk ...", "memory ...").
abba_gain() {
  awk -v alt="$2" '$1 == 128 {split($0, a, "[|] "); n = split(a[2], f, " "); side = f[1];
    sub(":", "", side); v = 0
    for (i = 2; i <= n; i++) if (f[i] == "compiled" || f[i] == "disk" || f[i] == "memory") { v = f[i - 1]; break }
    if (side == alt) { b += v; nb++ } else if (side == "main") { m += v; nm++ } }
    END { if (nb && nm) printf "%.4f", (b / nb) / (m / nm); else print 0 }' "$1"
}

# rounds_bwd_rows FILE "BUILD BUILD ..." "HDIM SEQLEN BATCH HQ HK MASK [det]" ...: each backward row
# benched with the builds in order and then in reverse (a drift over the call shows as one),
# through bench_bwd_side; rows start only before second ${ROWS_UNTIL:-540}.
rounds_bwd_rows() {
  local file=$1 row side
  local -a builds
  read -ra builds <<<"$2"
  shift 2
  for row in "$@"; do
    [ "$SECONDS" -ge "${ROWS_UNTIL:-540}" ] && echo "rows stopped at ${SECONDS}s" && break
    for side in "${builds[@]}" $(printf '%s\n' "${builds[@]}" | tac); do
      bench_bwd_side "$file" "$side" "$row"
    done
  done
  echo "rows done at ${SECONDS}s"
}

# compare_walk_bits FMHA_JIT HDIM SEQLEN_Q SEQLEN_K MASK: one deterministic backward (GQA 12:3, 2
# batches, seed 7) with FMHA_JIT_BWD_DET_UP_CELLS = 0 (head-major) and 2 (the up-down walk; a
# build with bwd-det-up-cells-override.patch), its dq / dk / dv compared byte for byte.
compare_walk_bits() {
  local u t r
  for u in 0 2; do
    rm -rf /tmp/walk-bits-u$u
    FMHA_JIT_BWD_DET_UP_CELLS=$u timeout 60 "$1" run --family bwd --hdim-q "$2" --seqlen-q "$3" \
      --seqlen-k "$4" --batch 2 --nhead-q 12 --nhead-k 3 --mask "$5" --deterministic --seed 7 \
      --outputs /tmp/walk-bits-u$u > /dev/null 2>&1
  done
  for t in dq dk dv; do
    r=missing
    if [ -f /tmp/walk-bits-u0/$t.npy ] && [ -f /tmp/walk-bits-u2/$t.npy ]; then
      cmp -s /tmp/walk-bits-u0/$t.npy /tmp/walk-bits-u2/$t.npy && r=identical || r=DIFFERENT
    fi
    echo "hdim $2 Sq $3 Sk $4 $5: $t $r"
  done
}

# sweep_up_cells HDIM SEQLEN BATCH HQ HK "u u u": the deterministic causal backward benched at each
# FMHA_JIT_BWD_DET_UP_CELLS in the list and back down (a trend that follows the order shows as
# one), with the walk-u build: tools/device/stage_patches.sh walk-u
# tools/device/patches/bwd-det-up-cells-override.patch.
sweep_up_cells() {
  local u
  for u in $6 $(echo $6 | tr ' ' '\n' | tac); do
    echo -n "$2 x $3 $4:$5 u=$u: "
    FMHA_JIT_BWD_DET_UP_CELLS=$u timeout 40 .carry/alt/walk-u/fmha-jit bench --family bwd \
      --hdim-q "$1" --seqlen-q "$2" --batch "$3" --nhead-q "$4" --nhead-k "$5" \
      --mask causal_top_left --deterministic --repeat 10 --warmup 3 2>&1 | tail -1
  done
}

# run_grid LIMIT DTYPES [FAMILIES]: tools/bench/grid_vs_torch.py for each dtype, with torch in the
# same call, each under what is left of LIMIT seconds; results and logs in /tmp/grid. PAIR_BELOW
# (e.g. 1.03; default off): rows under that x cuDNN measured again, ours and cuDNN alternating
# (about 15 s a row).
run_grid() {
  local dtype left
  mkdir -p /tmp/grid
  for dtype in $2; do
    left=$(($1 - SECONDS))
    [ "$left" -lt 60 ] && echo "grid $dtype: skipped, ${left}s left" && continue
    timeout "$left" python3 tools/bench/grid_vs_torch.py --fmha-jit $b/fmha-jit \
      --anchor .carry/anchor_sdpa.py --dtype "$dtype" --fwd-impl auto \
      --families ${3:-fwd bwd} --pair-below "${PAIR_BELOW:-0}" \
      --out "/tmp/grid/grid_$dtype" > "/tmp/grid/grid_log_$dtype.txt" 2>&1
    echo "grid $dtype rc=$? at ${SECONDS}s"
    tail -3 "/tmp/grid/grid_log_$dtype.txt"
  done
}

# sass_counts: cuobjdump's HGMMA / STL / LDL counts of every cubin in $FMHA_JIT_CACHE_DIR, into
# /tmp/grid/sass.txt.
sass_counts() {
  local cubin sass
  mkdir -p /tmp/grid
  for cubin in "$FMHA_JIT_CACHE_DIR"/v1/entries/*/*/kernel.cubin; do
    sass=$(/usr/local/cuda/bin/cuobjdump -sass "$cubin" 2>/dev/null)
    echo "$(basename "$(dirname "$cubin")" | cut -c1-12) HGMMA $(grep -c HGMMA <<<"$sass")" \
      "STL $(grep -c STL <<<"$sass") LDL $(grep -c LDL <<<"$sass")"
  done > /tmp/grid/sass.txt
}

# bench_row LABEL ARGS...: one causal backward bench row of the carried build (median of 20
# launches), labelled, appended to $ROWS_FILE (default $out/rows.txt) and echoed.
bench_row() {
  local label=$1
  shift
  echo "$label: $(timeout 60 $b/fmha-jit bench --family bwd --mask causal --repeat 20 --warmup 5 \
    "$@" 2>&1 | tail -1)" | tee -a "${ROWS_FILE:-$out/rows.txt}"
}

# start_final_call: what a session's final call runs first. Logs go under /tmp/grid/logs (inside
# the tarball it brings back; $back is the folder that comes back), bench rows to
# /tmp/grid/rows.txt; then the Hopper backward suites and the examples.
start_final_call() {
  back=$out
  out=/tmp/grid/logs
  mkdir -p "$out"
  ROWS_FILE=/tmp/grid/rows.txt
  check_main "gpu sm90a bwd: every dtype*;gpu sm90a bwd: deterministic*;\
gpu sm90a bwd: causal launches*;gpu sm90a bwd: seqlen 1*"
}

# det_atomic_rows "LABEL|ARGS" ...: each causal backward row deterministic and atomic, interleaved
# (det, atomic, atomic, det: a drift over the call shows as one), through bench_row.
det_atomic_rows() {
  local mode flag row
  for mode in det atomic atomic det; do
    flag=""
    [ $mode = det ] && flag=--deterministic
    for row in "$@"; do
      bench_row "${row%%|*} $mode" ${row#*|} $flag
    done
  done
  echo "rows done at ${SECONDS}s"
}

# grid_and_counts LIMIT: what a call's grid step runs, with the build in $b. The bf16 grid (torch
# in the same call; rows under PAIR_BELOW, default 1.03, x cuDNN again alternating with cuDNN) by
# second LIMIT, then det / atomic on GQA S 8192 causal and cuobjdump's counts, all under
# /tmp/grid, tarred into $out/grid.tgz (once after the grid, so a call cut short keeps it).
grid_and_counts() {
  local back=$out
  out=/tmp/grid/logs
  mkdir -p "$out"
  ROWS_FILE=/tmp/grid/rows.txt
  PAIR_BELOW=${PAIR_BELOW:-1.03} run_grid "$1" bf16
  tar czf "$back/grid.tgz" -C /tmp grid
  det_atomic_rows "gqa8k|--hdim-q 128 --nhead-q 32 --nhead-k 8 --seqlen-q 8192 --batch 2"
  sass_counts
  tar czf "$back/grid.tgz" -C /tmp grid
  out=$back
  echo "done at ${SECONDS}s"
}
