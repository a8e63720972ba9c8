// The kernel families, and the family-independent calls the layers above make on a canonical
// config: each forwards to the config's family (kernels/family.hpp).
#pragma once

#include <span>
#include <vector>

#include "codegen/render.hpp"
#include "kernels/family.hpp"

namespace fmha_jit::kernels {

// Every family, in the order `impl = auto` prefers them on an arch they target.
std::span<const KernelFamily* const> families();
// Throws Error (invalid_config) for KernelImpl::automatic: only a resolved config has a family.
const KernelFamily& family_of(KernelImpl impl);

std::vector<codegen::StageRole> stage_roles(const FmhaKernelConfig& canonical);
codegen::RenderedEntry render_entry(const FmhaKernelConfig& canonical);
// Dynamic shared memory of one stage; it depends on the config only, so the runner raises the
// driver's limit once per module load rather than per launch.
unsigned stage_dynamic_smem_bytes(const FmhaKernelConfig& canonical, codegen::StageRole role);
// Stages in launch order (stage_roles). `multiprocessors` bounds the grid of the persistent
// kernels; 0 launches one CTA per tile.
std::vector<StageLaunch> plan_stages(const FmhaKernelConfig& canonical, const FmhaProblem& problem,
                                     int multiprocessors = 0);
BwdWorkspaceLayout bwd_workspace_layout(const FmhaKernelConfig& canonical,
                                        const FmhaProblem& problem);
std::size_t required_alignment_bytes(const FmhaKernelConfig& canonical);

}  // namespace fmha_jit::kernels
