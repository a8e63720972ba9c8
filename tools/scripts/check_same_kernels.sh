#!/usr/bin/env bash
# check_same_kernels.sh: proves that a change of the host code leaves every kernel binary of a
# sweep byte-identical. It builds the fmha-jit CLI of a base git ref (in a temporary worktree) and
# of the current working tree (uncommitted changes included), prebuilds the sweep with each into a
# fresh cache, lists every stored binary (kernel name, cache key, SHA-256) from the caches'
# manifests (docs/CACHE_FORMAT.md) and compares the two listings by kernel name. Cache keys are
# compared too, for information only: a host change may legitimately change them (a renamed
# template, a new option order), a binary may not change.
#
# Run from anywhere inside the repository; relative paths in the options are taken from where it
# is called. No GPU is needed: NVRTC compiles for the sweep's "arch" on any machine that has it.
#
#   tools/scripts/check_same_kernels.sh [options]
#     --base REF            base git ref to build (default: `git merge-base HEAD main`)
#     --base-listing FILE   compare against a listing saved by --save-base / --save-current
#                           instead of building a base (the base's NVRTC must be this machine's)
#     --sweep FILE          sweep / config file to prebuild (default: configs/gpu-tests.json,
#                           every variant the gpu suites set up, Hopper and AMD included); the base is prebuilt from
#                           this same file, so both sides are asked for the same configs
#     --build-dir DIR       build folder of the current tree; only the fmha-jit target is built
#                           in it (default: build-release, configured as Release if absent)
#     --save-base FILE      write the base's listing to FILE
#     --save-current FILE   write the current tree's listing to FILE
#     -j, --jobs N          parallel compiles, for the CLI build and the prebuild (default: nproc)
#     --keep                keep the temporary folder (caches, logs, listings) and print its path;
#                           it is always kept after a tool error
#
# Exit status: 0 every binary identical and the same kernel names on both sides; 1 a binary
# differs or a kernel exists on one side only; 2 usage or tool error (build, prebuild, listing).
# Every FMHA_JIT_* variable is removed from the prebuild's environment: FMHA_JIT_LINEINFO adds a
# compile option and FMHA_JIT_CACHE_MAX_BYTES evicts entries, either would falsify the listing.
set -euo pipefail

die() {
  echo "check_same_kernels: error: $*" >&2
  exit 2
}
say() { echo "check_same_kernels: $*" >&2; }
usage() {
  sed -n '2,/^set -euo pipefail/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
}

base_ref=""
base_listing=""
sweep=""
build_dir=""
save_base=""
save_current=""
jobs=$(nproc 2>/dev/null || echo 2)
keep=0
while (($#)); do
  case $1 in
    --base) base_ref=${2:?--base needs a ref}; shift 2 ;;
    --base-listing) base_listing=${2:?--base-listing needs a file}; shift 2 ;;
    --sweep) sweep=${2:?--sweep needs a file}; shift 2 ;;
    --build-dir) build_dir=${2:?--build-dir needs a folder}; shift 2 ;;
    --save-base) save_base=${2:?--save-base needs a file}; shift 2 ;;
    --save-current) save_current=${2:?--save-current needs a file}; shift 2 ;;
    -j | --jobs) jobs=${2:?--jobs needs a number}; shift 2 ;;
    --keep) keep=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) die "unknown argument: $1 (--help lists the options)" ;;
  esac
done
[[ $jobs =~ ^[1-9][0-9]*$ ]] || die "--jobs wants a positive number, not '$jobs'"
[[ -n $base_ref && -n $base_listing ]] && die "--base and --base-listing exclude each other"
[[ -n $base_listing && -n $save_base ]] && die "--save-base needs a built base, not --base-listing"
for tool in git cmake python3; do
  command -v "$tool" >/dev/null || die "$tool not found on PATH"
done

repo=$(git rev-parse --show-toplevel 2>/dev/null) || die "not inside a git repository"
# Paths given relative to where the script was called from stay valid after the cd below.
abspath() { [[ $1 = /* ]] && echo "$1" || echo "$PWD/$1"; }
[[ -n $base_listing ]] && base_listing=$(abspath "$base_listing")
[[ -n $save_base ]] && save_base=$(abspath "$save_base")
[[ -n $save_current ]] && save_current=$(abspath "$save_current")
[[ -n $build_dir ]] && build_dir=$(abspath "$build_dir")
sweep_path=$repo/configs/gpu-tests.json
[[ -n $sweep ]] && sweep_path=$(abspath "$sweep")
cd "$repo"
sweep=${sweep_path#"$repo"/}
[[ -f $sweep_path ]] || die "sweep file not found: $sweep_path"
if [[ -n $base_listing ]]; then
  [[ -f $base_listing ]] || die "base listing not found: $base_listing"
  # Checked before the build and the prebuild of the current tree, not minutes later.
  head -n 1 "$base_listing" | grep -q '^# fmha-jit kernel listing (tools/scripts/check_same_kernels.sh)' ||
    die "$base_listing is not a listing written by this script (--save-base / --save-current)"
fi

if [[ -z $base_listing && -z $base_ref ]]; then
  git rev-parse --verify -q main >/dev/null || die "no branch 'main': name the base with --base"
  base_ref=$(git merge-base HEAD main) || die "HEAD and main have no merge-base: use --base"
fi
if [[ -n $base_ref ]]; then
  base_commit=$(git rev-parse --verify -q "$base_ref^{commit}") || die "unknown git ref: $base_ref"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/check-same-kernels.XXXXXX")
base_tree=""
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
  local rc=$?
  if [[ -n $base_tree && -d $base_tree ]]; then
    git -C "$repo" worktree remove --force "$base_tree" >/dev/null 2>&1 || rm -rf "$base_tree"
    git -C "$repo" worktree prune >/dev/null 2>&1 || true
  fi
  # A tool error keeps the logs the error names.
  if ((keep || rc == 2)); then say "kept $work"; else rm -rf "$work"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

ccache_args=()
if command -v ccache >/dev/null; then
  ccache_args=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
generator_args=()
command -v ninja >/dev/null && generator_args=(-G Ninja)

# build_cli SOURCE_TREE BUILD_DIR LOG: configures BUILD_DIR as Release when it has no CMake cache
# yet, builds the fmha-jit target only, and prints the binary's path.
build_cli() {
  local src=$1 dir=$2 log=$3
  # ccache keys on the compile command; relative paths make the base worktree's objects hit the
  # entries of the current tree's build (and the other way round) wherever the code is the same.
  export CCACHE_BASEDIR=$src
  if [[ ! -f $dir/CMakeCache.txt ]]; then
    cmake -S "$src" -B "$dir" "${generator_args[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DFMHA_JIT_WERROR=ON "${ccache_args[@]}" >"$log" 2>&1 ||
      { tail -n 30 "$log" >&2; die "configuring $dir failed (log: $log)"; }
  fi
  cmake --build "$dir" -j "$jobs" --target fmha-jit >>"$log" 2>&1 ||
    { tail -n 30 "$log" >&2; die "building fmha-jit in $dir failed (log: $log)"; }
  unset CCACHE_BASEDIR
  local cli=$dir/bin/fmha-jit
  [[ -x $cli ]] || cli=$(find "$dir" -type f -name fmha-jit -perm -u+x -print -quit)
  [[ -n $cli && -x $cli ]] || die "no fmha-jit binary under $dir after the build"
  echo "$cli"
}

# prebuild CLI CACHE_DIR LOG: compiles the sweep into an empty cache with a clean environment.
prebuild() {
  local cli=$1 cache=$2 log=$3
  local unset_args=()
  local var
  for var in $(compgen -e); do
    [[ $var == FMHA_JIT_* ]] && unset_args+=(-u "$var")
  done
  mkdir -p "$cache"
  env "${unset_args[@]}" FMHA_JIT_CACHE_DIR="$cache" "$cli" prebuild -j "$jobs" "$sweep_path" \
    >"$log" 2>&1 || { tail -n 30 "$log" >&2; die "prebuild with $cli failed (log: $log)"; }
}

# Listing and comparison, in Python for the JSON manifests and the counting.
read -r -d '' listing_py <<'PY' || true
import hashlib, json, os, subprocess, sys

HEADER = "# fmha-jit kernel listing (tools/scripts/check_same_kernels.sh): kernel-name key binary sha256"


def fail(message):
    # Exit status 1 means "the kernels differ"; a broken input is 2, like the script's own errors.
    print(f"check_same_kernels: error: {message}", file=sys.stderr)
    sys.exit(2)


def write_listing(cli, cache, tree, sweep, out):
    env = {k: v for k, v in os.environ.items() if not k.startswith("FMHA_JIT_")}
    env["FMHA_JIT_CACHE_DIR"] = cache
    listed = json.loads(subprocess.run([cli, "list", "--json"], env=env, check=True,
                                       capture_output=True, text=True).stdout)
    names = {e["key"]: e.get("name") for e in listed}
    rows, compilers = [], set()
    for folder, _, files in os.walk(cache):
        if "manifest.json" not in files:
            continue
        with open(os.path.join(folder, "manifest.json")) as f:
            m = json.load(f)
        key = m["key"]
        binary = os.path.join(folder, m["binary"]["file"])
        with open(binary, "rb") as f:
            data = f.read()
        if len(data) != m["binary"]["size"]:
            fail(f"{binary}: {len(data)} bytes, the manifest says {m['binary']['size']}")
        # The CLI's name of the entry (the kernel's base name); the first symbol when it has none.
        name = names.get(key) or m["kernel_symbols"][0]
        rows.append((name, key, m["binary"]["file"], hashlib.sha256(data).hexdigest()))
        compilers.add(f"{m['compiler']['id']} {m['compiler']['version']}")
    if len(rows) != len(listed):
        fail(f"{cache}: {len(rows)} manifests but `fmha-jit list` shows {len(listed)} entries")
    if not rows:
        fail(f"{cache}: the prebuild stored no kernel")
    with open(sweep, "rb") as f:
        sweep_sha = hashlib.sha256(f.read()).hexdigest()
    with open(out, "w") as f:
        f.write(HEADER + "\n")
        f.write(f"# tree: {tree}\n")
        f.write(f"# sweep: {os.path.basename(sweep)} sha256 {sweep_sha}\n")
        f.write(f"# compiler: {'; '.join(sorted(compilers))}\n")
        f.write(f"# kernels: {len(rows)}\n")
        for row in sorted(rows):
            f.write(" ".join(row) + "\n")


def read_listing(path):
    meta, rows = {}, {}
    with open(path) as f:
        lines = f.read().splitlines()
    if not lines or lines[0] != HEADER:
        fail(f"{path}: not a listing of tools/scripts/check_same_kernels.sh")
    for n, line in enumerate(lines[1:], 2):
        if line.startswith("# "):
            field, _, value = line[2:].partition(": ")
            meta[field] = value
            continue
        parts = line.split(" ")
        if len(parts) != 4:
            fail(f"{path}:{n}: want 'name key binary sha256', got: {line}")
        name, key, binary, sha = parts
        if (name, binary) in rows:
            fail(f"{path}:{n}: {name} {binary} listed twice")
        rows[(name, binary)] = (key, sha)
    return meta, rows


def show(title, items, limit=20):
    print(f"  {title}:")
    for item in items[:limit]:
        print(f"    {item}")
    if len(items) > limit:
        print(f"    ... and {len(items) - limit} more")


def compare(base_path, current_path):
    base_meta, base = read_listing(base_path)
    cur_meta, cur = read_listing(current_path)
    both = sorted(base.keys() & cur.keys())
    only_base = sorted(base.keys() - cur.keys())
    only_cur = sorted(cur.keys() - base.keys())
    same = [k for k in both if base[k][1] == cur[k][1]]
    differ = [k for k in both if base[k][1] != cur[k][1]]
    keys_differ = [k for k in both if base[k][0] != cur[k][0]]
    label = lambda k: k[0] if k[1].startswith("kernel.") else f"{k[0]} ({k[1]})"
    print(f"base:    {base_meta.get('tree', '?')}")
    print(f"current: {cur_meta.get('tree', '?')}")
    print(f"sweep:   {cur_meta.get('sweep', '?')}")
    print(f"variants: base {len(base)}, current {len(cur)}, in both {len(both)}")
    print(f"binaries identical: {len(same)}")
    print(f"binaries differing: {len(differ)}")
    print(f"only in base: {len(only_base)}, only in current: {len(only_cur)}")
    keys_only = [k for k in keys_differ if base[k][1] == cur[k][1]]
    with_same_binary = f" ({len(keys_only)} of them with an identical binary)" if keys_only else ""
    print(f"cache keys (informational): {len(both) - len(keys_differ)} equal, "
          f"{len(keys_differ)} differ{with_same_binary}")
    if differ:
        show("differing binaries (kernel: base sha256 -> current sha256)",
             [f"{label(k)}: {base[k][1][:16]} -> {cur[k][1][:16]}" for k in differ])
    if only_base:
        show("only in base", [label(k) for k in only_base])
    if only_cur:
        show("only in current", [label(k) for k in only_cur])
    if keys_differ:
        show("keys that differ (kernel: base -> current)",
             [f"{label(k)}: {base[k][0]} -> {cur[k][0]}" for k in keys_differ], limit=5)
    if base_meta.get("sweep") != cur_meta.get("sweep"):
        print(f"note: the sweep files differ (base: {base_meta.get('sweep')})")
    if base_meta.get("compiler") != cur_meta.get("compiler"):
        print(f"note: the compilers differ (base: {base_meta.get('compiler')}, current: "
              f"{cur_meta.get('compiler')}): binaries may differ for that reason alone")
    if differ or only_base or only_cur:
        print(f"RESULT: DIFFERENT ({len(differ)} binaries differ, "
              f"{len(only_base) + len(only_cur)} kernels on one side only)")
        return 1
    print(f"RESULT: SAME (all {len(same)} binaries byte-identical)")
    return 0


try:
    if sys.argv[1] == "list":
        write_listing(*sys.argv[2:])
    else:
        sys.exit(compare(*sys.argv[2:]))
except (OSError, ValueError, KeyError, IndexError, subprocess.CalledProcessError) as e:
    # An uncaught exception would exit 1 and read as "the kernels differ".
    fail(f"{type(e).__name__}: {e}")
PY

# describe_tree DIR COMMIT: the commit, its subject and whether the working tree has changes
# (untracked files count: a new source file is picked up by the build).
describe_tree() {
  local dir=$1 commit=$2 dirty=""
  if [[ -n $(git -C "$dir" status --porcelain) ]]; then
    dirty=" + uncommitted changes"
  fi
  echo "$(git -C "$dir" log -1 --format='%H %s' "$commit")$dirty"
}

list_cache() {
  local cli=$1 cache=$2 tree=$3 out=$4
  python3 -c "$listing_py" list "$cli" "$cache" "$tree" "$sweep_path" "$out" ||
    die "listing the cache $cache failed"
}

timings=()
if [[ -n $base_listing ]]; then
  say "base: the saved listing $base_listing"
  base_txt=$base_listing
else
  base_txt=$work/base.txt
  base_tree=$work/base
  say "base: $(git log -1 --format='%h %s' "$base_commit"), in a temporary worktree"
  git worktree add --detach "$base_tree" "$base_commit" >"$work/worktree.log" 2>&1 ||
    { cat "$work/worktree.log" >&2; die "git worktree add $base_commit failed"; }
  t=$SECONDS
  base_cli=$(build_cli "$base_tree" "$base_tree/build-release" "$work/base-build.log")
  timings+=("build base CLI $((SECONDS - t)) s")
  t=$SECONDS
  say "base: prebuilding $sweep with -j $jobs"
  prebuild "$base_cli" "$work/base-cache" "$work/base-prebuild.log"
  timings+=("prebuild base $((SECONDS - t)) s")
  list_cache "$base_cli" "$work/base-cache" "$(describe_tree "$base_tree" "$base_commit")" \
    "$base_txt"
  if [[ -n $save_base ]]; then
    cp "$base_txt" "$save_base"
    say "saved the base listing: $save_base"
  fi
  # The worktree (and its build) is no longer needed; free the space before the second build.
  git worktree remove --force "$base_tree" >/dev/null 2>&1 || rm -rf "$base_tree"
  git worktree prune
  base_tree=""
fi

t=$SECONDS
say "current: $(describe_tree "$repo" HEAD)"
current_cli=$(build_cli "$repo" "${build_dir:-$repo/build-release}" "$work/current-build.log")
timings+=("build current CLI $((SECONDS - t)) s")
t=$SECONDS
say "current: prebuilding $sweep with -j $jobs"
prebuild "$current_cli" "$work/current-cache" "$work/current-prebuild.log"
timings+=("prebuild current $((SECONDS - t)) s")
list_cache "$current_cli" "$work/current-cache" "$(describe_tree "$repo" HEAD)" \
  "$work/current.txt"
if [[ -n $save_current ]]; then
  cp "$work/current.txt" "$save_current"
  say "saved the current listing: $save_current"
fi

status=0
python3 -c "$listing_py" compare "$base_txt" "$work/current.txt" || status=$?
((status <= 1)) || die "comparing the listings failed"
timings+=("total $SECONDS s")
timing_line=$(printf '%s, ' "${timings[@]}")
echo "time: ${timing_line%, }"
exit "$status"
