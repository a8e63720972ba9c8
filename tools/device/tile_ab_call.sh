#!/usr/bin/env bash
# Same-call A/B of two tile choices in one build (.carry/bin): the gpu tests (SUITES,
# ';'-separated), then for each ROWS entry 'family,dtype,hdim,seqlen,batch,hq,hk,mask' `fmha-jit
# bench` with the heuristic tile and with ALT (extra bench flags, e.g. "--block-n 64"), back to
# back; then torch's SDPA backends (anchor_sdpa.py) for ANCHOR_HDIMS in the same call. Run from
# the repository root with .carry/ staged (tools/device/stage.sh); logs go to $OUT.
source "$(dirname "$0")/call_env.sh"
[ -n "${SUITES:-}" ] && run_gpu_suites $b/fmha_jit_gpu_tests "$SUITES" 170
for row in ${ROWS:?set ROWS}; do
  IFS=, read -r fam dt d s bt hq hk m <<<"$row"
  for flags in "" "${ALT:?set ALT}"; do
    echo -n "${flags:-heuristic}: "
    timeout 40 $b/fmha-jit bench --family "$fam" --dtype "$dt" --hdim-q "$d" --seqlen-q "$s" \
      --batch "$bt" --nhead-q "$hq" --nhead-k "$hk" --mask "$m" $flags --repeat 10 --warmup 3 \
      2>&1 | tail -1
  done
done
if [ -n "${ANCHOR_HDIMS:-}" ]; then
  python3 .carry/anchor_sdpa.py --hdim $ANCHOR_HDIMS --backend cudnn --dtype ${ANCHOR_DTYPES:-bf16} \
    --reps 10 --warmup 3 2>&1 | tail -40
fi
echo "done at ${SECONDS}s"
