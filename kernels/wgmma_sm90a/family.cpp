#include "kernels/wgmma_sm90a/family.hpp"

#include <limits>

#include "fmha_jit/error.hpp"
#include "kernels/common/key_tiles.hpp"
#include "kernels/common/tiled_layout.hpp"
#include "kernels/mma_sm80/family.hpp"
#include "kernels/wgmma_sm90a/bwd_schedule.hpp"
#include "kernels/wgmma_sm90a/fwd_schedule.hpp"
#include "kernels/wgmma_sm90a/tiles.hpp"

namespace fmha_jit::kernels::wgmma_sm90a {
namespace {

using codegen::StageRole;

unsigned u32(std::int64_t v) { return static_cast<unsigned>(v); }

// Geometry in templates/fwd/fmha_fwd_sm90a.h and templates/bwd/fmha_bwd_sm90a.h
// (fmha_bwd_sm90a_hd256.h at hdim 256), mirrored by plan_stages below. The backward's row-wise
// stages are the mma_sm80 ones, reading the common parameters inside the Hopper struct.
std::string stage_call(const FmhaKernelConfig& c, StageRole role) {
  const std::string smem = "extern __shared__ __align__(1024) char smem[];\n  ";
  switch (role) {
    case StageRole::fwd:
      return smem +
             "fmha_fwd_sm90a<Element, kHdimQ, kMaskKind, kWriteLse, kVarlen, kSinks, kSoftcap, "
             "kBlockM, kBlockN, kStages>(p, smem);";
    case StageRole::bwd_dq_dk_dv:
      if (c.hdim_q == 256) {
        return smem +
               "fmha_bwd_sm90a_hd256_dq_dk_dv<Element, kMaskKind, kDeterministic, kStages>(p, "
               "smem);";
      }
      return smem +
             "fmha_bwd_sm90a_dq_dk_dv<Element, kHdimQ, kMaskKind, kDeterministic, kBlockM, "
             "kStages>(p, smem);";
    case StageRole::bwd_dot_do_o:
    case StageRole::bwd_convert_dq: {
      std::string call = mma_sm80::stage_call(role);
      return call.replace(call.rfind("(p)"), 3, "(p.bwd)");
    }
    case StageRole::bwd_dq:
    case StageRole::bwd_dkdv:
    case StageRole::bwd_dsinks: break;
  }
  return "";
}

// The shape whose kSmemBytes a kernel's main stage lays out. The launch allocates smem_bytes
// (tiles.cpp), a mirror of that layout, so the entry asserts at compile time that the two agree:
// a mirror that drifts fails every compile of the kernel instead of letting TMA write past the
// allocation.
std::string shape_type(const FmhaKernelConfig& c) {
  if (c.family == Family::fwd) return "FmhaFwdSm90aShape<kHdimQ, kBlockM, kBlockN, kStages>";
  if (c.hdim_q == 256) return "FmhaBwdSm90aHd256Shape<kStages>";
  return "FmhaBwdSm90aShape<kHdimQ, kBlockM, kStages>";
}

[[noreturn]] void bad_problem(const std::string& field, const std::string& value,
                              const std::string& accepted) {
  throw FieldError(ErrorCode::invalid_problem, field, value, accepted);
}

class WgmmaSm90aFamily final : public KernelFamily {
 public:
  KernelImpl impl() const override { return KernelImpl::wgmma_sm90a; }
  bool targets(const ArchInfo& arch) const override { return is_hopper(arch); }
  std::string_view archs_served() const override { return "sm_90 and sm_90a"; }
  std::string gap(const FmhaKernelConfig& c) const override { return config_gap(c); }
  // wgmma and setmaxnreg exist only in the arch-specific ISA; sm_90a binaries run on exactly the
  // GPUs sm_90 binaries run on, so the promotion loses no reach.
  std::string compile_arch(const ArchInfo&) const override { return "sm_90a"; }

  TileShape default_tile(const ArchInfo&, const FmhaKernelConfig& c) const override {
    return c.family == Family::fwd ? fwd_tile(c) : bwd_tile(c);
  }
  void check_tile(const ArchInfo& arch, const FmhaKernelConfig& c) const override {
    if (c.family == Family::fwd) {
      check_fwd_tile(arch, c);
    } else {
      check_bwd_tile(arch, c);
    }
  }
  std::optional<ProblemTileVariant> problem_tile_variant(
      const FmhaKernelConfig& given, const FmhaKernelConfig& resolved) const override {
    if (!is_causal(given.mask)) return std::nullopt;
    const std::optional<TileShape> t = fwd_short_causal_tile(resolved);
    if (!t) return std::nullopt;
    ProblemTileVariant v{given, kShortCausalSeqlen};
    v.config.impl = resolved.impl;
    v.config.block_m = t->block_m;
    v.config.block_n = t->block_n;
    v.config.num_warps = t->num_warps;
    v.config.num_stages = t->num_stages;
    return v;
  }

  std::vector<StageRole> stage_roles(const FmhaKernelConfig& c) const override {
    if (c.family == Family::fwd) return {StageRole::fwd};
    return {StageRole::bwd_dot_do_o, StageRole::bwd_dq_dk_dv, StageRole::bwd_convert_dq};
  }
  codegen::EntrySpec entry_spec(const FmhaKernelConfig& c) const override {
    codegen::EntrySpec spec;
    if (c.family == Family::fwd) {
      spec.header = "fwd/fmha_fwd_sm90a.h";
    } else {
      spec.header = c.hdim_q == 256 ? "bwd/fmha_bwd_sm90a_hd256.h" : "bwd/fmha_bwd_sm90a.h";
    }
    spec.threads = c.num_warps * 32;
    spec.prologue = "static_assert(" + shape_type(c) +
                    "::kSmemBytes == " + std::to_string(smem_bytes(c)) +
                    ",\n              \"the launch's shared memory (kernels/wgmma_sm90a/tiles.cpp) "
                    "differs from the kernel's layout\");\n";
    // The kernels take their tensor maps as a __grid_constant__ parameter (the copies address
    // them in parameter memory) and run one persistent CTA per SM.
    for (StageRole role : stage_roles(c)) {
      spec.stages.push_back({role,
                             role == StageRole::fwd ? "const __grid_constant__ FmhaFwdSm90Params"
                                                    : "const __grid_constant__ FmhaBwdSm90Params",
                             "kThreads, 1", stage_call(c, role)});
    }
    return spec;
  }

  unsigned dynamic_smem_bytes(const FmhaKernelConfig& c, StageRole role) const override {
    // The backward's row-wise stages use static shared memory only.
    if (role == StageRole::fwd || role == StageRole::bwd_dq_dk_dv) {
      return static_cast<unsigned>(smem_bytes(c));
    }
    return 0;
  }

  std::vector<StageLaunch> plan_stages(const FmhaKernelConfig& c, const FmhaProblem& p,
                                       int multiprocessors) const override {
    if (c.family == Family::fwd) {
      // Persistent (templates/fwd/fmha_fwd_sm90a.h): one CTA per SM, at most one per tile; the
      // CTAs stride over the tile list.
      const std::int64_t tiles = (p.seqlen_q + c.block_m - 1) / c.block_m * p.nhead_q * p.batch;
      const std::int64_t ctas =
          multiprocessors > 0 && multiprocessors < tiles ? multiprocessors : tiles;
      return {{StageRole::fwd,
               {u32(ctas), 1, 1},
               {u32(c.num_warps * 32), 1, 1},
               dynamic_smem_bytes(c, StageRole::fwd)}};
    }
    // The deterministic kernels, and the atomic ones under causal masks, order their CTAs
    // themselves, in one dimension (templates/bwd/fmha_bwd_sm90a_schedule.h,
    // fmha_bwd_key_tile_cta); check_problem bounds their count. So do the split tails of the
    // atomic ones (bwd_split_tail): whole key tiles, then parts.
    const BwdSplitTail split = bwd_split_tail(c, p, multiprocessors);
    device::Dim3 per_key_tile = per_key_tile_grid(c, p);
    if (c.deterministic || is_causal(c.mask)) {
      per_key_tile = {u32(key_tiles(c, p) * p.nhead_k * p.batch), 1, 1};
    } else if (split.tiles > 0) {
      per_key_tile = {u32(split.first + static_cast<std::int64_t>(split.tiles) * split.parts), 1,
                      1};
    }
    return tiled_stages(*this, c, p, per_key_tile);
  }

  void check_problem(const FmhaKernelConfig& c, const FmhaProblem& p) const override {
    if (c.family != Family::bwd) return;
    // The deterministic backward, and the atomic one under causal masks, launch their key tiles x
    // kv heads x batch CTAs in one grid dimension (plan_stages); the deterministic one's
    // semaphores count key tiles in 16-bit fields.
    const std::int64_t tiles = key_tiles(c, p);
    if (c.deterministic || is_causal(c.mask)) {
      const std::int64_t max_ctas = std::numeric_limits<int>::max();
      if (tiles * p.nhead_k * p.batch > max_ctas) {
        bad_problem("seqlen_k", std::to_string(p.seqlen_k),
                    "a value for which ceil(seqlen_k / " + std::to_string(c.block_n) +
                        ") x nhead_k x batch <= " + std::to_string(max_ctas) + " (the " +
                        (c.deterministic ? "deterministic" : "causal") + " backward's CTAs)");
      }
    }
    constexpr std::int64_t kMaxKeyTiles = 65535;
    if (c.deterministic && tiles > kMaxKeyTiles) {
      bad_problem("seqlen_k", std::to_string(p.seqlen_k),
                  "at most " + std::to_string(kMaxKeyTiles * c.block_n) + " (65535 key tiles of " +
                      std::to_string(c.block_n) + ") for a deterministic wgmma_sm90a backward");
    }
  }

  // TMA needs 16-byte aligned bases and strides.
  std::size_t alignment_bytes() const override { return 16; }

  // The forward's split tail: its tiles' partial sums and arrival counters.
  std::size_t fwd_workspace_bytes(const FmhaKernelConfig& c, const FmhaProblem& p,
                                  int multiprocessors) const override {
    if (c.family != Family::fwd) return 0;
    const FwdSplitTail split = fwd_split_tail(c, p, multiprocessors);
    return split.tiles > 0 ? split.workspace_bytes : 0;
  }

  BwdWorkspaceLayout bwd_workspace_layout(const FmhaKernelConfig& c,
                                          const FmhaProblem& p) const override {
    BwdWorkspaceLayout w = bwd_workspace_with(c, p, /*dq_sums=*/true);
    if (c.family != Family::bwd || !bwd_split_eligible(c)) return w;
    // A launch of t key tiles on s SMs splits only t mod s < s tiles, and only when t > s; so
    // at most (t - 1) / 2 of them, whatever the GPU. Stage 1 clears them every launch.
    const std::int64_t launch_tiles = key_tiles(c, p) * p.nhead_k * p.batch;
    const auto tiles =
        static_cast<std::size_t>(std::min<std::int64_t>((launch_tiles - 1) / 2, kBwdMaxSplitTiles));
    const std::size_t start = w.total;
    w.split_dkdv =
        append_to_workspace(w, tiles * static_cast<std::size_t>(kFmhaBwdSplitKeys) *
                                   static_cast<std::size_t>(c.hdim_q + c.hdim_v) * sizeof(float));
    w.split_counters = append_to_workspace(w, tiles * sizeof(int));
    w.split_bytes = w.total - start;
    return w;
  }

  std::unique_ptr<FamilyLauncher> make_launcher(const FmhaKernelConfig& c) const override {
    return wgmma_sm90a::make_launcher(c);
  }
};

}  // namespace

const KernelFamily& family() {
  static const WgmmaSm90aFamily instance;
  return instance;
}

}  // namespace fmha_jit::kernels::wgmma_sm90a
