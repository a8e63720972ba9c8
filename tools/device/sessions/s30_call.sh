#!/usr/bin/env bash
# Session 30, second call: where the fused dQ conversion (bwd-dq-convert-in-stage2.patch) loses
# its main-kernel time (dq_dk_dv +4 % at hdim 128 S 2048, +11 % at GQA 32:8 S 16384 causal in
# the first call). Staged builds (tools/device/stage_branch.sh, branches deleted afterwards):
#   s29-fused-convert  both session 29 patches;
#   s30-v1  the count as a release atomic, the acquire as a fence on the tile's last arrival only;
#   s30-v2  (diagnostic, dQ wrong) v1's counting, no conversion;
#   s30-v3  (diagnostic, dQ wrong) no counting and no conversion: the shape alone.
# 1. v1's Hopper backward suites. 2. Rows in the order main fused v1 v2 v3 v3 v2 v1 fused main.
# 3. cuDNN on the same shapes. 4. SASS counts of the writer's memory-order instructions.
source "$(dirname "$0")/../call_env.sh"
run_gpu_suites .carry/alt/s30-v1/fmha_jit_gpu_tests "gpu sm90a bwd: every dtype*;\
gpu sm90a bwd: the split*;gpu sm90a bwd: causal launches*;gpu sm90a bwd: seqlen 1*" 150
timeout 60 .carry/alt/s29-fused-convert/37_bwd_deterministic --hdim 128 --seqlen 1024 2>&1 |
  grep -iE "bit-exact" | head -2
builds="main s29-fused-convert s30-v1 s30-v2 s30-v3"
order="$builds $(echo $builds | tr ' ' '\n' | tac | tr '\n' ' ')"
for row in "2048 8 16 16 none" "8192 2 16 16 none" "16384 1 32 8 causal_top_left" \
  "16384 1 16 16 none"; do
  read -r s bt hq hk m <<<"$row"
  for side in $order; do
    echo "$side: $(FMHA_JIT_CACHE_DIR=/tmp/cache-$side timeout 40 "$(staged_fmha_jit "$side")" \
      bench --family bwd --hdim-q 128 --seqlen-q $s --batch $bt --nhead-q $hq --nhead-k $hk \
      --mask $m --repeat 10 --warmup 3 2>&1 | tail -1)"
  done
done
echo "rows done at ${SECONDS}s"
timeout 60 python3 .carry/anchor_sdpa.py --hdim 128 --seqlen 2048 8192 16384 --causal both \
  --backend cudnn --reps 10 --warmup 3 --json "$out/anchor.json" 2>&1 | grep -v "^#" |
  python3 -c "
import json, sys
for l in sys.stdin:
    try: r = json.loads(l)
    except Exception: print(l, end=''); continue
    print(r['backend'], r['seqlen'], 'causal' if r['causal'] else 'none', 'bwd', r['bwd_tflops'],
          'fwd', r['fwd_tflops'])"
echo "anchor done at ${SECONDS}s"
for side in $builds; do
  for c in /tmp/cache-$side/v1/entries/*/*/kernel.cubin; do
    manifest=$(dirname "$c")/manifest.json
    n=$(python3 -c "import json; print(json.load(open('$manifest'))['config']['mask'])")
    sass=$(/usr/local/cuda/bin/cuobjdump -sass "$c" 2>/dev/null)
    echo "$side $n: $(for i in ATOM RED MEMBAR CCTL FENCE UTMAREDG UTMALDG STG; do
      echo -n "$i $(grep -c "$i" <<<"$sass") "; done)"
  done
done
echo "done at ${SECONDS}s"
