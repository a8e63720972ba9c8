#!/usr/bin/env bash
# One device call (session 4, call 3, run as .carry/call3.sh): bwd verify/repro, forward gpu
# tests, the full grid (BENCHMARKS.md), then the sanitizers (RELIABILITY.md)
# with whatever time is left. Run from the repository root with .carry/ staged (validate.sh).
export LD_LIBRARY_PATH=$PWD/.carry/lib:/usr/local/cuda/lib64 FMHA_JIT_CACHE_DIR=/tmp/fmha-jit-cache PYTHONUNBUFFERED=1
mkdir -p $FMHA_JIT_CACHE_DIR; cp -r .carry/cache/. $FMHA_JIT_CACHE_DIR/
b=.carry/bin
{
for det in "" --deterministic; do
  timeout 60 $b/fmha-jit run --family bwd --dtype bf16 --hdim-q 128 --mask none --batch 2 --nhead-q 16 --nhead-k 4 --seqlen-q 4096 --layout bshd --verify --repro 10 $det 2>&1 | tail -4
  timeout 40 $b/fmha-jit run --family bwd --dtype fp16 --hdim-q 256 --mask causal --batch 2 --nhead-q 4 --seqlen-q 1000 --verify --repro 5 $det 2>&1 | tail -4
done
} > $OUT/bwd_verify.txt 2>&1
echo "bwd verify done at $SECONDS s"; grep -i -E "bit|verif|max" $OUT/bwd_verify.txt | head -12
timeout 170 $b/fmha_jit_gpu_tests "gpu fwd*" --durations yes > $OUT/fwd_tests.txt 2>&1; tail -3 $OUT/fwd_tests.txt
echo "fwd tests done at $SECONDS s"
timeout 345 python3 tools/bench/grid_vs_torch.py --fmha-jit $b/fmha-jit --anchor .carry/anchor_sdpa.py --out $OUT/grid > $OUT/grid.log 2>&1
echo "grid rc=$? done at $SECONDS s"; tail -3 $OUT/grid.log
left=$((575 - SECONDS))
if [ $left -gt 30 ]; then
  STEPS="sanitizer" timeout $left tools/device/validate.sh > /dev/null 2>&1
  echo "sanitizer: $(grep -c 'rc=0' $OUT/validate.log) of 36 rc=0 in $left s budget"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" $OUT/validate.log | sort | uniq -c
fi
