#!/usr/bin/env bash
# The checks of a staged build (tools/scripts/stage.sh) on a GPU machine, from the repository root:
# the GPU, the gpu suites' kernels compiled on every core first (the suites compile one at a time),
# examples 01 and 37, both gpu suites and the rtc suite, each under a kill timeout so that a hung
# kernel cannot take the whole run, then bench-jit. One log per step in $OUT (default /tmp), a
# verdict per step here; exits 1 if a step failed (77, a suite skipped on this GPU, is no failure).
#   GPU_TESTS    Catch2 test spec for both gpu suites (default: every case)
#   SUITE_LIMIT  seconds per suite, or per case with CASE_JOBS (default 600)
#   CASE_JOBS    > 1: each gpu suite's cases run as separate processes, this many at a time (one
#                GPU shared; the suites then fit one short session); a verdict line per case
#   SKIP         steps to leave out, e.g. "rtc_tests bench_jit"
set -uo pipefail
export LD_LIBRARY_PATH="$PWD/.carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export FMHA_JIT_CACHE_DIR="${FMHA_JIT_CACHE_DIR:-/tmp/fmha-jit-cache}"
# The gpu runner test compares against the CLI in another process: the staged one, not the path
# of the build it was compiled in.
export FMHA_JIT_CLI="$PWD/.carry/bin/fmha-jit"
out=${OUT:-/tmp}
bin=.carry/bin
limit=${SUITE_LIMIT:-600}
failed=0
mkdir -p "$out"
# step NAME SECONDS COMMAND...: COMMAND's output into $out/NAME.log, its verdict and last lines here.
step() {
  local name=$1 seconds=$2 rc
  shift 2
  case " ${SKIP:-} " in *" $name "*) echo "== $name: skipped"; return ;; esac
  timeout --signal=KILL "$seconds" "$@" > "$out/$name.log" 2>&1
  rc=$?
  echo "== $name: rc $rc at ${SECONDS}s"
  tail -3 "$out/$name.log"
  if [ "$rc" != 0 ] && [ "$rc" != 77 ]; then failed=1; fi
}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
$bin/fmha-jit arch
# The suites' kernels for this GPU's vendor (gpu-tests.json also lists the AMD ones, which need
# hipRTC), compiled on every core before the suites, which compile one at a time.
nvidia_sweep=$(mktemp --suffix=.json)
python3 -c 'import json, sys
json.dump([e for e in json.load(open(sys.argv[1])) if not str(e.get("arch", "")).startswith("gfx")],
          open(sys.argv[2], "w"))' configs/gpu-tests.json "$nvidia_sweep"
step prebuild 300 $bin/fmha-jit prebuild -j "$(nproc)" configs/default.json "$nvidia_sweep"
step example_01 60 $bin/01_basic_fwd
for hd in 64 128 256; do
  step "example_37_hd$hd" 60 $bin/37_bwd_deterministic --hdim "$hd" --seqlen 1024
done
# cases SUITE: each test case of a suite as its own process, CASE_JOBS at a time, each under the
# limit; one log per case in $out/SUITE/, a verdict line per case in $out/SUITE.log.
cases() {
  local suite=$1 dir="$out/$1"
  mkdir -p "$dir"
  $bin/"$suite" --list-test-names-only ${GPU_TESTS:+"$GPU_TESTS"} | grep -v '^$' > "$dir/cases.txt"
  # Catch2 reads ',' and '[' in a name as spec syntax: escape them (in the inner shell, hence the
  # single quotes).
  # shellcheck disable=SC2016
  tr '\n' '\0' < "$dir/cases.txt" | xargs -0 -P "$CASE_JOBS" -I{} bash -c '
    spec=${1//,/\\,}; spec=${spec//[/\\[}
    log="$3/$(printf %s "$1" | md5sum | cut -c1-12).log"
    timeout --signal=KILL "$4" "$2" "$spec" > "$log" 2>&1
    echo "rc $? :: $1 :: $(grep -E "^(All tests passed|test cases:)" "$log" | head -1)"' \
    _ {} "$bin/$suite" "$dir" "$limit" > "$out/$suite.log"
  cat "$out/$suite.log"
  ! grep -qvE '^rc (0|77) ' "$out/$suite.log"
}
if [ "${CASE_JOBS:-1}" -gt 1 ]; then
  for suite in fmha_jit_gpu_tests fmha_jit_gpu_sm90_tests; do
    cases "$suite" || failed=1
    echo "== $suite: $(grep -c '^rc 0 ' "$out/$suite.log") cases passed at ${SECONDS}s"
  done
else
  step gpu_tests "$limit" $bin/fmha_jit_gpu_tests ${GPU_TESTS:+"$GPU_TESTS"}
  step gpu_sm90_tests "$limit" $bin/fmha_jit_gpu_sm90_tests ${GPU_TESTS:+"$GPU_TESTS"}
fi
step rtc_tests "$limit" $bin/fmha_jit_rtc_tests
step bench_jit 300 $bin/fmha-jit bench-jit
exit $failed
