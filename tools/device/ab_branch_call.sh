#!/usr/bin/env bash
# Same-call A/B of a staged branch (tools/device/stage_branch.sh BRANCH) against the current tree
# (.carry/bin): the branch's gpu tests (SUITES, ';'-separated, under timeouts), then `fmha-jit
# bench` rows from both builds back to back. ROWS: 'family,hdim,seqlen,batch,hq,hk,mask,det'
# entries (det: 0 or 1). ABBA=1 runs each row as current, branch, branch, current, so that a
# difference that follows the order (clocks, L2 state) shows as one. ALT_FLAGS: extra bench flags
# for the branch's runs only (e.g. "--num-stages 1"). Run from the repository root with .carry/
# staged; logs go to $OUT.
# BRANCH=main measures the current tree against itself with ALT_FLAGS (a tile or stage count the
# heuristic does not pick).
source "$(dirname "$0")/call_env.sh"
alt=.carry/alt/${BRANCH:?set BRANCH}
[ "$BRANCH" = main ] && alt=$b
# A build whose suites fail is not measured: its rows would time a wrong kernel, or hang.
if [ -n "${SUITES:-}" ] && ! STOP_ON_FAIL=1 run_gpu_suites $alt/fmha_jit_gpu_tests "$SUITES" 170; then
  echo "$BRANCH: a gpu suite failed; no rows"
  exit 1
fi
for row in ${ROWS:?set ROWS}; do
  IFS=, read -r fam d s bt hq hk m det <<<"$row"
  flag=""
  [ "$det" = 1 ] && flag=--deterministic
  order="A B"
  [ "${ABBA:-0}" = 1 ] && order="A B B A"
  for side in $order; do
    bin=$b/fmha-jit extra="" label=main
    if [ "$side" = B ]; then
      bin=$alt/fmha-jit extra=${ALT_FLAGS:-} label=$BRANCH
    fi
    echo -n "$label${extra:+ $extra}: "
    timeout 40 $bin bench --family "$fam" --hdim-q "$d" --seqlen-q "$s" --batch "$bt" --nhead-q "$hq" \
      --nhead-k "$hk" --mask "$m" $flag $extra --repeat 10 --warmup 3 2>&1 | tail -1
  done
done
echo "done at ${SECONDS}s"
