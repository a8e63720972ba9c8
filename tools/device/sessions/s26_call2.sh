#!/usr/bin/env bash
# Session 26's second call, GQA 32:8 S 16384 causal deterministic: the trace of the two-dQ-block
# candidate beside main's (builds dq2-trace and trace: s26-dq2 and main with
# bwd-sm90a-trace.patch), then the walk's tail section swept with FMHA_JIT_BWD_DET_TAIL_PAIRS
# (build s26-tail: main with that override), forward and back, main between. Run from the
# repository root with .carry/ staged; logs go to $OUT.
source "$(dirname "$0")/../call_env.sh"
gqa="--family bwd --hdim-q 128 --seqlen-q 16384 --batch 1 --nhead-q 32 --nhead-k 8"
gqa="$gqa --mask causal_top_left --deterministic"
bench() { timeout 40 "$1"/fmha-jit bench $gqa "${@:2}" 2>&1 | tail -1; }
mkdir -p /tmp/trace
for alt in trace dq2-trace; do
  echo "$alt untraced: $(bench .carry/alt/$alt --warmup 3 --repeat 10)"
  FMHA_JIT_TRACE=/tmp/trace/$alt.bin bench .carry/alt/$alt --warmup 1 --repeat 3 >/dev/null
done
tar czf "$out/traces2.tgz" -C /tmp trace
for k in 1 2 4 8 8 4 2 1; do
  echo "tail $k: $(FMHA_JIT_BWD_DET_TAIL_PAIRS=$k bench .carry/alt/s26-tail --warmup 3 --repeat 10)"
  [ "$k" = 8 ] && echo "main: $(bench $b --warmup 3 --repeat 10)"
done
echo "main: $(bench $b --warmup 3 --repeat 10)"
echo "call done at ${SECONDS}s"
