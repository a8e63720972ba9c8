#!/usr/bin/env bash
# Measures several staged patch sets in one device call. PLAN names a file of lines
#   NAME|SUITES|ROWS|EX37|FLAGS
# (tools/device/patches/ab-plan-*.txt): NAME a set staged with tools/device/stage_patches.sh (or
# "main": the current tree with FLAGS), SUITES and ROWS as tools/device/ab_branch_call.sh takes
# them (ROWS space-separated), EX37 "yes" to run that build's example 37 at hdim 256 as well,
# FLAGS extra bench flags for that side (ALT_FLAGS). Every set runs ABBA against the current
# tree (.carry/bin) under its own time limit (LIMIT seconds, default 300), so that one hang costs
# its set only. Kernels are compiled up front on all cores (the gpu tests compile one at a time).
# Run from the repository root with .carry/ staged; logs go to $OUT.
source "$(dirname "$0")/call_env.sh"
warm_sm90a $b/fmha-jit
n=0
while IFS='|' read -r -u 3 name suites rows ex37 flags; do
  [ -z "$name" ] || [ "${name:0:1}" = "#" ] && continue
  n=$((n + 1))
  log=$out/$n-$name
  echo "=== $n: $name ${flags:+($flags) }at ${SECONDS}s"
  alt=.carry/alt/$name
  [ "$name" = main ] && alt=$b
  if [ ! -x "$alt/fmha-jit" ]; then
    echo "$name: not staged"
    continue
  fi
  [ "$name" = main ] || warm_sm90a "$alt/fmha-jit"
  if [ "$ex37" = yes ] && [ -x "$alt/37_bwd_deterministic" ]; then
    mkdir -p "$log"
    timeout 60 "$alt/37_bwd_deterministic" --hdim 256 --seqlen 1024 > "$log/ex37.txt" 2>&1
    echo "$name example 37 hdim 256 rc=$?: $(grep -iE 'bit-exact|PASS|FAIL' "$log/ex37.txt" |
      head -4 | tr '\n' ' ')"
  fi
  mkdir -p "$log"
  OUT=$log BRANCH=$name SUITES=$suites ROWS=$rows ALT_FLAGS=$flags ABBA=1 timeout --signal=KILL \
    "${LIMIT:-300}" bash "$(dirname "$0")/ab_branch_call.sh" 2>&1 </dev/null | tee "$log/ab.txt"
done 3<"${PLAN:?set PLAN}"
echo "all done at ${SECONDS}s"
