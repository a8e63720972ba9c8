#!/usr/bin/env bash
# Where the deterministic backward's time goes at hdim 256 (session 16 call 3): for each row, the
# atomic and deterministic modes of a build carrying the trace patch (.carry/alt/$BRANCH, see
# tools/device/patches/bwd-sm90a-trace.patch) untraced, main's, then one traced bench run (a
# warm-up and 3 launches; the last launch is summarised). The traces come back as one archive;
# summarise them here with tools/device/trace_bwd_sm90a.py FILE:TILES (TILES = seqlen / 64).
# ROWS: 'seqlen,batch' entries; SHAPE: the other bench flags (default hdim 256 with 8 heads,
# no mask; session 24 traced GQA 32:8 causal at hdim 128, where TILES = 0 takes each CTA's count
# from its record). Run from the repository root with .carry/ staged; logs go to $OUT.
source "$(dirname "$0")/call_env.sh"
alt=.carry/alt/${BRANCH:?set BRANCH}
mkdir -p /tmp/trace
read -r -a shape <<<"${SHAPE:---hdim-q 256 --nhead-q 8}"
bench() { timeout 60 "$1"/fmha-jit bench --family bwd "${shape[@]}" "${@:2}" 2>&1 | tail -1; }
for row in ${ROWS:-512,32 2048,8 8192,2 16384,1}; do
  IFS=, read -r s bt <<<"$row"
  for det in "" --deterministic; do
    echo "branch s$s $det: $(bench $alt --seqlen-q $s --batch $bt $det --warmup 3 --repeat 10)"
    echo "main   s$s $det: $(bench $b --seqlen-q $s --batch $bt $det --warmup 3 --repeat 10)"
    FMHA_JIT_TRACE=/tmp/trace/s${s}_b${bt}${det:+_det}.bin \
      bench $alt --seqlen-q $s --batch $bt $det --warmup 1 --repeat 3 >/dev/null
  done
done
tar czf "$out/traces.tgz" -C /tmp trace
echo "done at ${SECONDS}s"
