#!/usr/bin/env bash
# Examples 37 (hdim 64, 128, 256: the Hopper backward selected, deterministic bit-exact against the
# atomic mode) and 01 on the GPU. Run from the repository root with .carry/ staged; logs go to $OUT.
source "$(dirname "$0")/call_env.sh"
for hd in 64 128 256; do
  timeout 60 $b/37_bwd_deterministic --hdim $hd --seqlen 1024 > "$out/ex37_hd$hd.txt" 2>&1
  echo "example 37 hdim $hd rc=$?: $(grep -iE 'kernel|bit-exact|PASS|FAIL' "$out/ex37_hd$hd.txt" | head -5 | tr '\n' ' ')"
done
timeout 60 $b/01_basic_fwd > "$out/ex01.txt" 2>&1
echo "example 01 rc=$?: $(tail -2 "$out/ex01.txt" | tr '\n' ' ')"
echo "done at ${SECONDS}s"
