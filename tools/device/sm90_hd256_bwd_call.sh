#!/usr/bin/env bash
# Device call after the session-7 changes (hdim 64 forward on three consumer warpgroups, causal
# forward rounds in boustrophedon order, the hdim 256 Hopper backward): the wgmma_sm90a gpu tests
# under timeouts (a hang must not cost the call), then the hdim 256 backward next to the mma_sm80
# fallback it replaces and to torch (flash, cuDNN) in the same call, and its SASS counts.
# Run from the repository root with .carry/ staged (tools/device/stage.sh); logs go to $OUT.
source "$(dirname "$0")/call_env.sh"
for suite in "gpu sm90a bwd*" "gpu sm90a fwd*"; do
  log="$out/$(echo "$suite" | tr -c 'a-z0-9\n' '_').txt"
  timeout --signal=KILL 170 $b/fmha_jit_gpu_tests "$suite" --durations yes > "$log" 2>&1
  echo "$suite rc=$? at ${SECONDS}s"
  grep -E "FAILED|passed|failed|with expansion|s: gpu|bit-exact" -A2 "$log" | tail -24
done
for row in "2048 8" "8192 2" "16384 1"; do
  read -r s bt <<<"$row"
  for m in none causal; do
    for impl in wgmma_sm90a mma_sm80; do
      for det in "" --deterministic; do
        timeout 40 $b/fmha-jit bench --family bwd --hdim-q 256 --seqlen-q $s --batch $bt --nhead-q 8 \
          --mask $m --impl $impl $det --repeat 10 --warmup 3 2>&1 | tail -1
      done
    done
  done
done
timeout 90 python3 .carry/anchor_sdpa.py --dtype bf16 --hdim 256 --seqlen 2048 8192 16384 --causal both \
  --backend cudnn flash --reps 10 --warmup 3 2>&1 | grep -v '^ *$' | tail -12
cubin=$(grep -l '"hdim_q": 256' $FMHA_JIT_CACHE_DIR/v1/entries/*/*/manifest.json 2>/dev/null |
  xargs grep -l wgmma_sm90a | head -1)
if [ -n "$cubin" ]; then
  cuobjdump --dump-sass "$(dirname "$cubin")/kernel.cubin" > "$out/sass_bwd_hd256.txt" 2>&1
  echo "hdim 256 bwd SASS: HGMMA=$(grep -c HGMMA "$out/sass_bwd_hd256.txt") STL=$(grep -c STL "$out/sass_bwd_hd256.txt") UTMAREDG=$(grep -c UTMAREDG "$out/sass_bwd_hd256.txt")"
fi
echo "done at ${SECONDS}s"
