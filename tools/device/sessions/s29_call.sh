#!/usr/bin/env bash
# Session 29, first call; not run (no device machine started that session). Staged from main
# (tools/device/stage.sh), then
#   tools/device/stage_patches.sh ovr tools/device/patches/bwd-det-plan-override.patch
#   tools/device/stage_patches.sh s29-mixed-split tools/device/patches/bwd-split-two-sizes.patch
#   tools/device/stage_patches.sh s29-fused-convert tools/device/patches/bwd-split-two-sizes.patch \
#     tools/device/patches/bwd-dq-convert-in-stage2.patch
# 0. Branch s29-mixed-split (the split tail in two sizes of part; hdim 128 S 2048 now splits):
#    its split and every-dtype suites, then ABBA rows of the unmasked atomic backward.
# 0'. Branch s29-fused-convert (on top of it: the atomic hdim 128 stage 2 converts dQ, no stage
#    3): the Hopper backward suites, then ABBA rows against main.
# 1. The non-causal hdim 128 backward's launch-to-launch spread: ours (`bench --json`, launch_ms:
#    launch i reads input set (warmup + i) % rotated_sets) and cuDNN's (torch SDPA, every
#    launch's time), twice each, interleaved. A spread that alternates with the set points at the
#    inputs' placement, one that drifts at the GPU, one that both share at neither.
# 2. hdim 256 GQA 8:2 S 8192 causal deterministic (0.91 x atomic, its chains walk): main against
#    every pair ascending (the override build), ABBA, with the atomic mode between.
source "$(dirname "$0")/../call_env.sh"
warm_branch s29-mixed-split
SUITES="gpu sm90a bwd: the split*;gpu sm90a bwd: every dtype*" BRANCH=s29-mixed-split ABBA=1 \
  ROWS="bwd,128,2048,8,16,16,none,0 bwd,128,8192,2,16,16,none,0 bwd,128,16384,1,16,16,none,0 \
bwd,128,8192,2,32,8,none,0 bwd,64,8192,2,32,32,none,0 bwd,64,2048,8,32,32,none,0" \
  bash "$(dirname "$0")/../ab_branch_call.sh"
warm_branch s29-fused-convert
SUITES="gpu sm90a bwd: every dtype*;gpu sm90a bwd: the split*;gpu sm90a bwd: causal launches*;\
gpu sm90a bwd: seqlen 1*" BRANCH=s29-fused-convert ABBA=1 \
  ROWS="bwd,128,2048,8,16,16,none,0 bwd,128,8192,2,16,16,none,0 bwd,128,16384,1,16,16,none,0 \
bwd,128,2048,8,16,16,causal_top_left,0 bwd,128,16384,1,32,8,causal_top_left,0 \
bwd,128,8192,2,32,8,none,0" \
  bash "$(dirname "$0")/../ab_branch_call.sh"
echo "A/B done at ${SECONDS}s"
mkdir -p "$out/spread"
ours() {
  local s=$1 tag=$2
  timeout 60 $b/fmha-jit bench --family bwd --hdim-q 128 --seqlen-q "$s" --batch $((16384 / s)) \
    --nhead-q 16 --nhead-k 16 --mask none --repeat 40 --warmup 5 --json \
    > "$out/spread/ours_${s}_$tag.json" 2> "$out/spread/ours_${s}_$tag.err"
  python3 - "$out/spread/ours_${s}_$tag.json" <<'PY'
import json, sys, statistics
rows = json.load(open(sys.argv[1]))
for r in rows:
    t = r.get("launch_ms", [])
    if not t:
        print("no launch_ms:", {k: v for k, v in r.items() if k != "launch_ms"}); continue
    ev, od = t[0::2], t[1::2]
    print(f"ours S {r.get('seqlen_q')} sets {r.get('rotated_sets')}: median {statistics.median(t):.4f} min {min(t):.4f} "
          f"max {max(t):.4f} even {statistics.median(ev):.4f} odd {statistics.median(od):.4f} "
          f"first10 {' '.join(f'{x:.3f}' for x in t[:10])} last10 {' '.join(f'{x:.3f}' for x in t[-10:])}")
PY
}
cudnn() {
  python3 - "$1" "$out/spread/cudnn_$1_$2.json" <<'PY'
import json, sys, statistics, torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
s = int(sys.argv[1]); b = 16384 // s
q, k, v = (torch.randn(b, 16, s, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
           for _ in range(3))
with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
    o = F.scaled_dot_product_attention(q, k, v)
    g = torch.randn_like(o)
    t = []
    for i in range(45):
        a, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        torch.autograd.grad(o, (q, k, v), g, retain_graph=True)
        e.record()
        torch.cuda.synchronize()
        if i >= 5:
            t.append(a.elapsed_time(e))
json.dump(t, open(sys.argv[2], "w"))
fl = 4 * b * 16 * s * s * 128 * 2.5
print(f"cudnn S {s}: median {statistics.median(t):.4f} ({fl / statistics.median(t) / 1e9:.1f} TFLOP/s) "
      f"min {min(t):.4f} max {max(t):.4f} first10 {' '.join(f'{x:.3f}' for x in t[:10])}")
PY
}
for s in 2048 8192; do
  [ "$SECONDS" -gt 420 ] && break
  ours $s a
  cudnn $s a
  ours $s b
  cudnn $s b
done
echo "spread done at ${SECONDS}s"
ovr() {
  echo -n "$1: "
  FMHA_JIT_BWD_DET_OVERRIDE=$2 timeout 40 $3 bench --family bwd --hdim-q 256 --seqlen-q 8192 \
    --batch 2 --nhead-q 8 --nhead-k 2 --mask causal_top_left $4 --repeat 10 --warmup 3 2>&1 | tail -1
}
for side in A B C D D C B A; do
  [ "$SECONDS" -gt 520 ] && break
  case $side in
    A) ovr "main det" "" $b/fmha-jit --deterministic ;;
    B) ovr "asc tail=1" tail=1,asc=4,alt=0 .carry/alt/ovr/fmha-jit --deterministic ;;
    C) ovr "asc tail=2" tail=2,asc=4,alt=0 .carry/alt/ovr/fmha-jit --deterministic ;;
    D) ovr "atomic" "" $b/fmha-jit "" ;;
  esac
done
echo "done at ${SECONDS}s"
