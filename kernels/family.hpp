// A kernel family's host adapter: everything the host knows of one implementation (which configs it
// serves, its tiles, the entry it renders, its launch grid and scratch, and how a call launches
// it) behind one interface, so that resolving, rendering, planning and running a config never
// branch on the family. The device code of each family lives in templates/; its host side lives
// in kernels/<family>/. The registry (kernels/registry.hpp) lists the families.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/kernel_name.hpp"
#include "codegen/render.hpp"
#include "common/fmha_params.h"
#include "core/arch.hpp"
#include "device/device_api.hpp"
#include "fmha_jit/config.hpp"
#include "fmha_jit/problem.hpp"

namespace fmha_jit::kernels {

struct TileShape {
  int block_m, block_n, num_warps, num_stages;
};

// A tile variant for problems of some sizes. A config whose four tile fields are left to the
// heuristic names a family of kernels: its own and, for the problems a variant `applies` to, one
// with other tiles that measured faster there (its own canonical config, key and cache entry).
// The runner picks per problem; prebuild builds both.
struct ProblemTileVariant {
  FmhaKernelConfig config;  // as given, with impl and the four tile fields set
  std::int64_t max_seqlen = 0;
  bool applies(const FmhaProblem& problem) const {
    return std::max(problem.seqlen_q, problem.seqlen_k) <= max_seqlen;
  }
};

// One launch of one stage (kernel symbol) of a module.
struct StageLaunch {
  codegen::StageRole role;
  device::Dim3 grid;
  device::Dim3 block;
  unsigned dynamic_smem_bytes = 0;
};

// Byte offsets of the backward's fp32 scratch tensors inside one workspace allocation; each starts
// on a 256-byte boundary (the alignment cudaMalloc gives, and enough for vector accesses).
struct BwdWorkspaceLayout {
  std::size_t d_rowsum = 0;  // D = rowsum(dO * O), B x Hq x Sq floats
  // Tiled kernels only (npos otherwise): fp32 dQ sums and, in the deterministic mode, the per-
  // query-tile arrival counters that order them.
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);
  std::size_t dq_accum = npos, dq_accum_bytes = 0;
  std::size_t semaphores = npos, semaphores_bytes = 0;
  // Sinks configs: each row's term of the sinks' gradient, one float per LSE entry.
  std::size_t dsink_rows = npos;
  // A family's own scratch after those (the Hopper backward's split tail), cleared by its kernels.
  std::size_t split_dkdv = npos, split_counters = npos, split_bytes = 0;
  std::size_t total = 0;
};

// What a family's launcher gets from the runner for one call on one stream.
class LaunchContext {
 public:
  virtual ~LaunchContext() = default;
  virtual device::DeviceApi& api() = 0;
  virtual void* context() const = 0;  // the call's device context
  virtual int multiprocessors() const = 0;
  // At least `bytes` of the runner's scratch named `name` for this call's (context, stream),
  // zero-filled when first made if `zeroed`. The first call takes the stream's launch lock, held
  // until the call's last launch is enqueued, so no other call on the stream uses the buffer
  // meanwhile.
  // A caller's workspace (FwdTensors / BwdTensors) takes the scratch's place when given: it is
  // zero-filled when `zeroed`, so a family's kernels must leave it zero-filled again.
  virtual void* scratch(std::string_view name, std::size_t bytes, bool zeroed) = 0;
  // True while the call's stream is being captured into a graph: the launcher must then neither
  // allocate nor copy synchronously (a plan first needed inside a capture is left out).
  virtual bool capturing() = 0;
  // Launches the family's planned stages (KernelFamily::plan_stages) with `params` as their one
  // argument.
  virtual void launch_stages(void* params) = 0;
};

// The per-runner side of a family: what a call adds to the common kernel parameters before its
// stages launch, and any plan the runner keeps between calls. One per runner, called from any
// thread.
class FamilyLauncher {
 public:
  virtual ~FamilyLauncher() = default;
  // The common parameters are the kernels' argument unless a family needs more.
  virtual void run_fwd(LaunchContext& launch, const FmhaProblem& problem, FmhaFwdParams& params);
  virtual void run_bwd(LaunchContext& launch, const FmhaProblem& problem, FmhaBwdParams& params);
};

// For a family whose kernels take neither packed variable-length batches nor score modifiers
// (sinks, softcap): the phrase its gap() returns for a config that asks for one, else empty.
std::string packed_and_modifier_gap(const FmhaKernelConfig& config);

class KernelFamily {
 public:
  virtual ~KernelFamily() = default;
  virtual KernelImpl impl() const = 0;

  // Which configs it serves (CUTLASS's can_implement, in two parts): whether its kernels exist
  // for `arch` at all, with a phrase for messages ("sm_90 and sm_90a"), and, on such an arch,
  // why it does not serve `config` (empty when it does).
  virtual bool targets(const ArchInfo& arch) const = 0;
  virtual std::string_view archs_served() const = 0;
  virtual std::string gap(const FmhaKernelConfig& config) const { return (void)config, ""; }
  // The arch its binaries are compiled for on `arch`.
  virtual std::string compile_arch(const ArchInfo& arch) const { return std::string(arch.name); }

  // Tiles: the heuristic's choice, and the check of a resolved config's tiles (FieldError naming
  // the field, the value and what the family accepts).
  virtual TileShape default_tile(const ArchInfo& arch, const FmhaKernelConfig& config) const = 0;
  virtual void check_tile(const ArchInfo& arch, const FmhaKernelConfig& resolved) const = 0;
  // A faster tile for some problems of a config `given` whose tiles are the heuristic's (resolved
  // to `resolved`), or nullopt.
  virtual std::optional<ProblemTileVariant> problem_tile_variant(
      const FmhaKernelConfig& given, const FmhaKernelConfig& resolved) const {
    return (void)given, (void)resolved, std::nullopt;
  }

  // The module: its stages in launch order and the thin entry that instantiates them.
  virtual std::vector<codegen::StageRole> stage_roles(const FmhaKernelConfig& canonical) const = 0;
  virtual codegen::EntrySpec entry_spec(const FmhaKernelConfig& canonical) const = 0;

  // A launch: each stage's grid, block and dynamic shared memory, `multiprocessors` bounding the
  // persistent kernels' grids (0: one CTA per tile).
  virtual unsigned dynamic_smem_bytes(const FmhaKernelConfig& canonical,
                                      codegen::StageRole role) const = 0;
  virtual std::vector<StageLaunch> plan_stages(const FmhaKernelConfig& canonical,
                                               const FmhaProblem& problem,
                                               int multiprocessors) const = 0;
  // Problem limits of this family beyond the common ones (FieldError, invalid_problem).
  virtual void check_problem(const FmhaKernelConfig& canonical, const FmhaProblem& problem) const {
    (void)canonical, (void)problem;
  }
  // Byte alignment its kernels need for every tensor pointer and row stride.
  virtual std::size_t alignment_bytes() const = 0;
  virtual BwdWorkspaceLayout bwd_workspace_layout(const FmhaKernelConfig& canonical,
                                                  const FmhaProblem& problem) const = 0;
  // Bytes of zero-filled scratch a forward of `problem` needs on `multiprocessors` SMs (0: none).
  virtual std::size_t fwd_workspace_bytes(const FmhaKernelConfig& canonical,
                                          const FmhaProblem& problem, int multiprocessors) const {
    return (void)canonical, (void)problem, (void)multiprocessors, 0;
  }
  virtual std::unique_ptr<FamilyLauncher> make_launcher(const FmhaKernelConfig& canonical) const;
};

}  // namespace fmha_jit::kernels
