#!/usr/bin/env bash
# Session 30, not run: too little device time was left to start a machine. The rows that main's
# grid of call 3 put under or at 1.0 x cuDNN and that no alternating run covered, ours and cuDNN
# alternating three times each (tools/bench/interleave_vs_cudnn.py): hdim 128 S 16384 causal (0.98
# in the grid), GQA 32:8 S 16384 causal again (0.95 in the grid, 1.03 alternating), and the
# forward's closest row, hdim 256 S 8192 non-causal (1.00).
source "$(dirname "$0")/../call_env.sh"
timeout 150 python3 tools/bench/interleave_vs_cudnn.py --fmha-jit $b/fmha-jit --rounds 3 \
  --row bwd,128,16384,1,16,16,causal --row bwd,128,16384,1,32,8,causal \
  --row fwd,256,8192,2,8,8,none --json "$out/interleave.json" 2>&1
echo "done at ${SECONDS}s"
