#!/usr/bin/env bash
# One device call for the Hopper kernels (issue 7): the probe GEMMs (descriptor encodings), the
# wgmma_sm90a forward's and backward's gpu tests, their SASS (HGMMA count, spills), and a first
# benchmark next to the sm_80 kernels and torch (flash, cuDNN) in the same call. Run from the repository root with
# .carry/ staged (tools/device/stage.sh); logs go to $OUT.
source "$(dirname "$0")/call_env.sh"
FMHA_JIT_SM90_PROBE_CUBIN=$out/sm90_probe.cubin timeout 120 $b/fmha_jit_gpu_tests "gpu sm90a:*" \
  --success > "$out/sm90_probe_test.txt" 2>&1
echo "probe tests rc=$? at ${SECONDS}s"; grep -E "WARN|expected encoding|passed|failed" "$out/sm90_probe_test.txt" | tail -5
timeout 150 $b/fmha_jit_gpu_tests "gpu sm90a fwd*,gpu fwd: automatic*" --durations yes > "$out/sm90_fwd_tests.txt" 2>&1
echo "sm90a fwd tests rc=$? at ${SECONDS}s"; grep -E "FAILED|passed|failed|with expansion" -A2 "$out/sm90_fwd_tests.txt" | tail -16
timeout 150 $b/fmha_jit_gpu_tests "gpu sm90a bwd*" --durations yes > "$out/sm90_bwd_tests.txt" 2>&1
echo "sm90a bwd tests rc=$? at ${SECONDS}s"; grep -E "FAILED|passed|failed|with expansion|bit-exact" -A2 "$out/sm90_bwd_tests.txt" | tail -16
sweep=$out/sm90_sweep.json
cat > "$sweep" <<'JSON'
[{"dtype": "bf16", "hdim": [64, 128, 256], "seqlen": [2048, 8192], "causal": [false, true],
  "tokens": 16384, "model_dim": 2048, "family": "fwd"},
 {"dtype": "bf16", "hdim": [64, 128, 256], "seqlen": [2048, 8192], "causal": [false, true],
  "tokens": 16384, "model_dim": 2048, "family": "fwd", "impl": "mma_sm80"},
 {"dtype": "bf16", "hdim": [64, 128], "seqlen": [2048, 8192], "causal": [false, true],
  "tokens": 16384, "model_dim": 2048, "family": "bwd", "deterministic": [false, true]},
 {"dtype": "bf16", "hdim": [64, 128], "seqlen": [2048, 8192], "causal": [false, true],
  "tokens": 16384, "model_dim": 2048, "family": "bwd", "impl": "mma_sm80"}]
JSON
timeout 150 $b/fmha-jit bench --sweep "$sweep" --repeat 10 --warmup 3 > "$out/sm90_bench.txt" 2>&1
echo "bench rc=$? at ${SECONDS}s"; cat "$out/sm90_bench.txt" | tail -48
timeout 120 python3 .carry/anchor_sdpa.py --dtype bf16 --hdim 64 128 256 --seqlen 2048 8192 --causal both \
  --backend flash cudnn --reps 10 --warmup 3 --json "$out/sm90_torch.json" > "$out/sm90_torch.txt" 2>&1
echo "torch rc=$? at ${SECONDS}s"; grep -v '^ *$' "$out/sm90_torch.txt" | tail -40
python3 - "$FMHA_JIT_CACHE_DIR" > "$out/sm90_cubins.txt" <<'PY'
import glob, json, os, sys
for m in glob.glob(os.path.join(sys.argv[1], "v1/entries/*/*/manifest.json")):
    j = json.load(open(m))
    if j["config"]["impl"] == "wgmma_sm90a":
        print(os.path.join(os.path.dirname(m), "kernel.cubin"), j["kernel_symbols"][0])
PY
while read -r cubin name; do
  cuobjdump --dump-sass "$cubin" > "$out/sass_$name.txt" 2>&1
  echo "$name HGMMA=$(grep -c HGMMA "$out/sass_$name.txt") HMMA=$(grep -c ' HMMA' "$out/sass_$name.txt") STL=$(grep -c 'STL' "$out/sass_$name.txt") UTMALDG=$(grep -c UTMALDG "$out/sass_$name.txt")"
done < "$out/sm90_cubins.txt" | sort | head -40
echo "done at ${SECONDS}s"
