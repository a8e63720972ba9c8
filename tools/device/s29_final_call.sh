#!/usr/bin/env bash
# Session 29's final call (not run: no device machine started that session): main as merged, on
# whatever GPU came. The Hopper backward suites (the split tail's included) and examples;
# deterministic and atomic interleaved (det, atomic, atomic, det) at hdim 128 GQA 32:8 S 16384 /
# 8192 and hdim 256 GQA / MHA; the bf16 grid with torch and cuobjdump's counts. Run from the
# repository root with .carry/ staged; everything comes back in one tarball.
source "$(dirname "$0")/call_env.sh"
start_final_call
run_gpu_suites $b/fmha_jit_gpu_tests "gpu sm90a bwd: the split*" 150
gqa="--hdim-q 128 --nhead-q 32 --nhead-k 8"
hd256="--hdim-q 256 --nhead-q 8 --nhead-k 2"
det_atomic_rows \
  "gqa16k|$gqa --seqlen-q 16384 --batch 1" \
  "gqa8k|$gqa --seqlen-q 8192 --batch 2" \
  "hd256 gqa16k|$hd256 --seqlen-q 16384" \
  "hd256 gqa8k|$hd256 --seqlen-q 8192 --batch 2" \
  "hd256 mha16k|--hdim-q 256 --nhead-q 8 --seqlen-q 16384"
run_grid "${LIMIT:-480}" bf16
tar czf "$back/grid.tgz" -C /tmp grid  # kept if the call is cut short below
sass_counts
tar czf "$back/grid.tgz" -C /tmp grid
echo "done at ${SECONDS}s"
