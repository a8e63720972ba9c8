#!/usr/bin/env bash
# Runs every libFuzzer target for SECONDS each (default 60), starting from the seed corpus in
# tests/fuzz/corpus/<target>/. New inputs go to a scratch folder (WORK, default a temp dir), not
# into the repository; crashes are written there as crash-* and the script exits non-zero.
#   tests/fuzz/run_fuzzers.sh [SECONDS] [TARGET...]     (after cmake --build --preset fuzz)
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-60}
shift || true
targets=("${@:-config sweep npy env}")
work=${WORK:-$(mktemp -d)}
status=0
for t in ${targets[@]}; do
  mkdir -p "$work/$t"
  echo "fuzzing $t for ${seconds}s (scratch corpus $work/$t)"
  if ! build-fuzz/tests/fuzz/fmha_jit_fuzz_$t -max_total_time="$seconds" -timeout=10 \
      -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$work/$t/" \
      "$work/$t" "tests/fuzz/corpus/$t" 2>&1 | tail -12; then
    echo "fuzz target $t FAILED; artifacts in $work/$t" >&2
    status=1
  fi
done
exit $status
