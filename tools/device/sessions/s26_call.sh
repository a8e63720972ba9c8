#!/usr/bin/env bash
# Session 26's first call: main at HEAD (the review commits changed kernel source: the suites and
# examples), the trace of GQA 32:8 S 16384 causal with the consumers' waits (bwd-sm90a-trace.patch,
# staged as .carry/alt/trace), then PLAN's candidates ABBA against main
# (tools/device/patches_ab_call.sh). Run from the repository root with .carry/ staged; logs go to
# $OUT (three tarballs: the device tool brings back 8 files at most).
source "$(dirname "$0")/../call_env.sh"
here=$(dirname "$0")/..
back=$out
out=/tmp/s26/main
mkdir -p "$out"
check_main \
  "${SUITES:-gpu sm90a bwd: every dtype*;gpu sm90a bwd: deterministic*;gpu sm90a bwd: causal launches*}"
if [ "${TRACE:-1}" = 1 ]; then
  echo "=== trace at ${SECONDS}s"
  OUT=/tmp/s26/trace BRANCH=trace SHAPE="--hdim-q 128 --nhead-q 32 --nhead-k 8 --mask causal_top_left" \
    ROWS="16384,1" timeout --signal=KILL 150 bash "$here/sm90_det_trace_call.sh"
  cp /tmp/s26/trace/traces.tgz "$back/" 2>/dev/null
fi
if [ -n "${PLAN:-}" ]; then
  echo "=== plan $PLAN at ${SECONDS}s"
  # Under what is left of 570 s, so that the logs' tarball is written inside the tool's 600 s.
  OUT=/tmp/s26/plan PLAN=$PLAN timeout --signal=KILL $((570 - SECONDS)) \
    bash "$here/patches_ab_call.sh"
fi
tar czf "$back/s26_logs.tgz" -C /tmp s26
echo "call done at ${SECONDS}s"
