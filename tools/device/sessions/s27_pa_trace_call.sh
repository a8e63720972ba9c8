#!/usr/bin/env bash
# Session 27: why the read-ahead turn (pollahead) lost 27 % at hdim 256 GQA 8:2 S 16384 causal
# deterministic while gaining elsewhere: main (build trace: trace + override patches) and the
# candidate (build pa-trace: the same patches on pollahead) under schedule overrides
# (FMHA_JIT_BWD_DET_OVERRIDE), then traces. Run from the repository root with .carry/ staged.
source "$(dirname "$0")/../call_env.sh"
s16="--family bwd --mask causal --hdim-q 256 --nhead-q 8 --nhead-k 2 --seqlen-q 16384 --deterministic"
for o in "" walkup=0 alt=0,walkup=0 alt=0,walkup=0,up=0 up=1,walkup=3 asc=0,alt=0,walkup=0; do
  for build in trace pa-trace; do
    echo "$build [$o]: $(FMHA_JIT_BWD_DET_OVERRIDE=$o timeout 60 .carry/alt/$build/fmha-jit bench \
      $s16 --repeat 10 --warmup 3 2>&1 | tail -1)"
  done
done
mkdir -p /tmp/trace
for spec in "pa-trace|" "pa-trace|alt=0,walkup=0" "trace|up=4,walkup=0" "pa-trace|asc=0,alt=0,walkup=0"; do
  IFS="|" read -r build o <<<"$spec"
  FMHA_JIT_BWD_DET_OVERRIDE=$o FMHA_JIT_TRACE=/tmp/trace/${build}_${o:-default}.bin \
    timeout 60 .carry/alt/$build/fmha-jit bench $s16 --warmup 1 --repeat 3 >/dev/null 2>&1
  echo "trace $build [$o] rc=$?"
done
tar czf "$out/traces.tgz" -C /tmp trace
echo "done at ${SECONDS}s"
