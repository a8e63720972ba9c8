#!/usr/bin/env bash
# Where the Hopper backward's warps wait, per source line: Nsight Compute's warp-state sampling of
# the dq_dk_dv kernel, compiled with line tables (FMHA_JIT_LINEINFO=1, a key of its own), on the
# rows where it trails cuDNN (bf16 / fp16 hdim 128 S 16384 non-causal; BENCHMARKS.md). ROWS:
# 'dtype,hdim,seqlen,batch,heads,mask,det' entries (det: 0 or 1). The details page keeps the
# top stall locations; the source page (SASS with its CUDA line, every sampled stall reason)
# comes back as CSV. Run from the repository root with .carry/ staged; logs go to $OUT.
source "$(dirname "$0")/call_env.sh"
export FMHA_JIT_LINEINFO=1
for row in ${ROWS:-bf16,128,16384,1,16,none,0}; do
  IFS=, read -r dt d s bt h m det <<<"$row"
  flag=""
  [ "$det" = 1 ] && flag=--deterministic
  name="stalls_${dt}_hd${d}_s${s}_${m}_det${det}"
  bench="$b/fmha-jit bench --family bwd --dtype $dt --hdim-q $d --seqlen-q $s --batch $bt --nhead-q $h --mask $m $flag --warmup 1 --repeat 1 --quiet"
  $bench > /dev/null 2>&1  # compile outside the profiler
  timeout --signal=KILL 150 ncu --clock-control none --section SourceCounters --section WarpStateStats \
    --import-source yes -k regex:dq_dk_dv --launch-skip 1 -c 1 -o "/tmp/$name" -f $bench > "$out/$name.log" 2>&1
  echo "$row ncu rc=$? at ${SECONDS}s"
  ncu --import "/tmp/$name.ncu-rep" --page details > "$out/$name.txt" 2>&1
  grep -iE "stall|Warp Cycles|Issued|Location|0x" "$out/$name.txt" | head -40
  ncu --import "/tmp/$name.ncu-rep" --page source --csv --print-source sass,cuda > "/tmp/$name.csv" 2>&1 &&
    gzip -c "/tmp/$name.csv" > "$out/$name.csv.gz"
done
echo "done at ${SECONDS}s"
