#!/usr/bin/env bash
# Session 26: the ascending walk for the alternating pairs (build s26-ascwalk) against main: its
# deterministic suite, its GQA causal deterministic outputs against main's (the walk changes the
# order dK / dV are summed in, so close, not equal; dQ's order is unchanged), then ABBA rows.
# Run from the repository root with .carry/ staged; logs go to $OUT.
source "$(dirname "$0")/../call_env.sh"
alt=.carry/alt/s26-ascwalk
if ! STOP_ON_FAIL=1 run_gpu_suites $alt/fmha_jit_gpu_tests "gpu sm90a bwd: deterministic*" 60; then
  echo "s26-ascwalk: the suite failed; no rows"
  exit 1
fi
gqa="--family bwd --hdim-q 128 --nhead-q 32 --nhead-k 8 --mask causal_top_left --deterministic"
for side in main alt; do
  bin=$b
  [ $side = alt ] && bin=$alt
  timeout 60 $bin/fmha-jit run $gqa --seqlen-q 8192 --batch 2 --seed 7 --outputs /tmp/o_$side \
    >/dev/null 2>&1 || echo "$side run failed"
done
python3 - <<'PY'
import numpy as np
for t in ("dq", "dk", "dv"):
    a = np.load(f"/tmp/o_main/{t}.npy").astype(np.float32)
    b = np.load(f"/tmp/o_alt/{t}.npy").astype(np.float32)
    d = np.abs(a - b)
    print(f"{t}: max |main - alt| {d.max():.3e}, max |main| {np.abs(a).max():.3e}, "
          f"identical {np.array_equal(a, b)}")
PY
for row in "16384 1" "8192 2"; do
  read -r s bt <<<"$row"
  for side in main alt alt main; do
    bin=$b
    [ $side = alt ] && bin=$alt
    echo "$side: $(timeout 40 $bin/fmha-jit bench $gqa --seqlen-q $s --batch $bt --repeat 10 \
      --warmup 3 2>&1 | tail -1)"
  done
done
echo "call done at ${SECONDS}s"
