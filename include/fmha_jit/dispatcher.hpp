// The entry point: setup_fmha_dispatcher(config) turns a config into a runner whose kernels come
// from the in-process cache, the on-disk cache, or a fresh JIT compile, in that order.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fmha_jit/config.hpp"
#include "fmha_jit/error.hpp"
#include "fmha_jit/problem.hpp"

namespace fmha_jit {

// Where the binary came from.
enum class BinarySource : std::uint8_t { memory, disk, compiled };
std::string_view to_string(BinarySource source);

// Arch of GPU 0 from the driver ("sm_90", "gfx90a"); with no GPU, FMHA_JIT_ARCH if set, else
// "sm_90" (documented in README.md). Cached after the first call. Throws FieldError
// (invalid_argument) naming FMHA_JIT_ARCH or FMHA_JIT_DEVICE when either holds a value not
// accepted.
std::string detect_gpu_arch();
// True when a GPU and its driver are usable by this process. Never throws: false also when
// FMHA_JIT_DEVICE holds a value not accepted (detect_gpu_arch and setup report that one).
bool gpu_available();

struct SetupOptions {
  // Cache root; default FMHA_JIT_CACHE_DIR, else $XDG_CACHE_HOME/fmha-jit, else ~/.cache/fmha-jit.
  std::optional<std::filesystem::path> cache_dir;
  // Load the module on the GPU during setup. When false or when no GPU exists, the binary is only
  // obtained (and cached); the runner loads it on first use.
  bool load = true;
};

// Device pointers of a forward call. Tensors follow the problem's strides. lse may be null (no LSE
// wanted); it must be null when the config has lse = false (the kernel writes no LSE).
struct FwdTensors {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  float* lse = nullptr;
  // Scratch of at least FmhaRunner::fwd_workspace_bytes(problem) bytes, 256-byte aligned and
  // zero-filled (the kernels leave it zero-filled again); null = the runner keeps one per GPU
  // context and stream. Callers that capture CUDA graphs pass their own (the runner's is
  // allocated on first use).
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  // Sinks configs: [nhead_q] fp32 logits, one per query head, each joining its rows' softmax
  // denominator (as a score already scaled) with no value row.
  const float* sinks = nullptr;
};

// Device pointers of a backward call. o and lse are the forward's outputs.
struct BwdTensors {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const void* o = nullptr;
  const float* lse = nullptr;
  const void* d_o = nullptr;
  void* d_q = nullptr;
  void* d_k = nullptr;
  void* d_v = nullptr;
  // Workspace of at least bwd_workspace_bytes(problem) bytes, 256-byte aligned; null = the runner
  // allocates it for the call.
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  // Sinks configs: the forward's sinks, and [nhead_q] fp32 that receives their gradient
  // (overwritten, not added to).
  const float* sinks = nullptr;
  float* d_sinks = nullptr;
};

// Observes the kernel launches of one run_fwd / run_bwd call (tools time each stage with events
// through it): called with stage = 0 .. n-1 just before that stage is launched, on the call's
// stream, with the stage's role as `name` (fwd; dot_do_o, dq_dk_dv, convert_dq; ...), then once
// with stage = n and an empty name after the last launch.
using StageHook = std::function<void(std::size_t stage, std::string_view name, void* stream)>;

class FmhaRunner {
 public:
  virtual ~FmhaRunner() = default;
  virtual const FmhaKernelConfig& config() const = 0;  // canonical
  virtual const std::string& key() const = 0;
  virtual const std::vector<std::string>& kernel_symbols() const = 0;
  // True once the module is loaded on the GPU.
  virtual bool loaded() const = 0;
  // Throws FieldError (invalid_problem) when the kernel cannot run the problem (hdim or mask kind
  // differs, sizes invalid). Cheap; run_* call it too.
  virtual void check(const FmhaProblem& problem) const = 0;
  // The runner of the kernel that runs `problem`: this one, or, when the config left its tiles to
  // the heuristic and the problem is one a tile variant measured faster on (short causal forwards
  // on Hopper: kernels::ResolvedConfig::tile_variant), the variant's. Its config(), key() and
  // kernel_symbols() name that kernel. The variant is obtained on first use (memory, disk cache
  // or compile) and loaded when a GPU is present, so a caller may take that cost before timing;
  // run_fwd does the same. Throws as check() does for a problem the kernel cannot run (before
  // any compile), else as setup does (CompileError, ...).
  virtual FmhaRunner& runner_for(const FmhaProblem& problem) = 0;
  // Launches asynchronously on `stream` (a CUstream / hipStream_t; null = default stream), with
  // the kernel of runner_for(problem).
  virtual void run_fwd(const FmhaProblem& problem, const FwdTensors& tensors,
                       void* stream = nullptr, const StageHook* stage_hook = nullptr) = 0;
  virtual void run_bwd(const FmhaProblem& problem, const BwdTensors& tensors,
                       void* stream = nullptr, const StageHook* stage_hook = nullptr) = 0;
  // Bytes of workspace a backward of this problem needs (0 for fwd kernels).
  virtual std::size_t bwd_workspace_bytes(const FmhaProblem& problem) const = 0;
  // Bytes of zero-filled workspace a forward of this problem needs on the calling thread's
  // current GPU (0 for most: the Hopper forward's split tail uses it). Obtains the tile variant
  // as runner_for() does. Throws FieldError for a bwd runner or a problem it cannot run.
  virtual std::size_t fwd_workspace_bytes(const FmhaProblem& problem) = 0;
};

// The backward's scratch memory for one problem, per buffer (bytes, each rounded up to 256):
//   d_rowsum:   D = rowsum(dO * O), fp32 per query row (every impl), and for sinks configs each
//               row's term of the sinks' gradient;
//   dq_accum:   fp32 dQ sums the key tiles add into (mma_sm80);
//   semaphores: one arrival counter per query tile ordering those additions (mma_sm80,
//               deterministic only) - the whole memory price of the deterministic mode;
//   split_tail: fp32 dK and dV of the key tiles whose work the Hopper kernels split over several
//               CTAs in the launch's last wave, and their counters (wgmma_sm90a, atomic mode,
//               hdim <= 128, no mask; 128 keys x (hdim_q + hdim_v) floats for each of at most
//               min((t - 1) / 2, 144) key tiles of a launch of t key tiles, whatever the GPU).
struct BwdWorkspaceSize {
  std::size_t d_rowsum = 0, dq_accum = 0, semaphores = 0, split_tail = 0, total = 0;
};
// Sizes for `config` (canonicalised here, so impl and tiles may be left to the heuristic). Throws
// FieldError for an invalid config or problem.
BwdWorkspaceSize bwd_workspace_size(const FmhaProblem& problem, const FmhaKernelConfig& config);
inline std::size_t bwd_workspace_bytes(const FmhaProblem& problem, const FmhaKernelConfig& config) {
  return bwd_workspace_size(problem, config).total;
}

struct FmhaSetupResult {
  bool success = false;
  std::string error;  // one line; empty on success
  std::optional<ErrorCode> error_code;
  double build_time_s = 0;  // wall time of setup: lookup, and compile + store on a miss
  BinarySource source = BinarySource::compiled;
  std::string key;
  FmhaKernelConfig config;  // canonical
  std::shared_ptr<FmhaRunner> runner;
};

// Never throws: failures are reported in the result (error names the field / compile log path).
FmhaSetupResult setup_fmha_dispatcher(const FmhaKernelConfig& config,
                                      const SetupOptions& options = {});

}  // namespace fmha_jit
