#!/usr/bin/env bash
# Device call for the deterministic Hopper backward's schedule (session 8): without a mask, the
# key-tile chains of as many heads as fill the GPU interleaved in the launch order; one semaphore
# chain per dQ round at hdim 256; the dQ buffers handed back before the adds complete. The
# bit-exact gpu tests of both tensor-core backwards (SUITES, under timeouts), then `fmha-jit bench`
# of the rows (ROWS) where deterministic / atomic was below 0.9, atomic and deterministic back to
# back.
# Run from the repository root with .carry/ staged (tools/device/stage.sh); logs go to $OUT.
source "$(dirname "$0")/call_env.sh"
run_gpu_suites $b/fmha_jit_gpu_tests "${SUITES:-gpu sm90a bwd*;gpu bwd: deterministic*}"
bench() {  # impl hdim seqlen batch hq hk mask
  for det in "" --deterministic; do
    timeout 40 $b/fmha-jit bench --family bwd --impl "$1" --hdim-q "$2" --seqlen-q "$3" --batch "$4" \
      --nhead-q "$5" --nhead-k "$6" --mask "$7" $det --repeat 10 --warmup 3 2>&1 | tail -1
  done
}
rows=${ROWS:-"256,2048,8,8,8 256,8192,2,8,8 256,16384,1,8,8 64,512,32,32,32 64,2048,8,32,32 \
  128,2048,8,16,16 128,8192,2,16,16 128,16384,1,32,8 128,2048,8,32,8"}
for row in $rows; do
  IFS=, read -r d s bt hq hk <<<"$row"
  for m in none causal; do bench wgmma_sm90a $d $s $bt $hq $hk $m; done
done
echo "done at ${SECONDS}s"
