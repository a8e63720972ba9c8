#!/usr/bin/env bash
# Measures several staged patch sets in one device call. PLAN names a file of lines
#   NAME|SUITES|ROWS|EX37
# (tools/device/patches/ab-plan-*.txt): NAME a set staged with tools/device/stage_patches.sh,
# SUITES and ROWS as tools/device/ab_branch_call.sh takes them (ROWS space-separated), EX37 "yes"
# to run that build's example 37 at hdim 256 as well. Every set runs ABBA against the current
# tree (.carry/bin) under its own time limit (LIMIT seconds, default 200), so that one hang costs
# its set only. Kernels are compiled up front on all cores (the gpu tests compile one at a time).
# Run from the repository root with .carry/ staged; logs go to $OUT.
source "$(dirname "$0")/call_env.sh"
sweep=/tmp/sm90a-sweep.json
python3 - "$sweep" <<'PY'
import json, sys
masks = ["none", "causal_top_left", "causal_bottom_right", "sliding_window"]
json.dump([{"family": ["fwd", "bwd"], "dtype": ["fp16", "bf16"], "hdim_q": d, "hdim_v": d,
            "mask": masks, "deterministic": [False, True], "arch": "sm_90"} for d in (64, 128, 256)],
          open(sys.argv[1], "w"))
PY
warm() {
  timeout 120 "$1" prebuild "$sweep" -j "$(nproc)" 2>&1 | tail -1
}
warm $b/fmha-jit
while IFS='|' read -r name suites rows ex37; do
  [ -z "$name" ] || [ "${name:0:1}" = "#" ] && continue
  echo "=== $name at ${SECONDS}s"
  alt=.carry/alt/$name
  if [ ! -x "$alt/fmha-jit" ]; then
    echo "$name: not staged"
    continue
  fi
  warm "$alt/fmha-jit"
  if [ "$ex37" = yes ] && [ -x "$alt/37_bwd_deterministic" ]; then
    timeout 60 "$alt/37_bwd_deterministic" --hdim 256 --seqlen 1024 > "$out/ex37_$name.txt" 2>&1
    echo "$name example 37 hdim 256 rc=$?: $(grep -iE 'bit-exact|PASS|FAIL' "$out/ex37_$name.txt" |
      head -4 | tr '\n' ' ')"
  fi
  mkdir -p "$out/$name"
  OUT=$out/$name BRANCH=$name SUITES=$suites ROWS=$rows ABBA=1 timeout --signal=KILL \
    "${LIMIT:-200}" bash "$(dirname "$0")/ab_branch_call.sh" 2>&1 | tee "$out/$name/ab.txt"
done < "${PLAN:?set PLAN}"
echo "all done at ${SECONDS}s"
