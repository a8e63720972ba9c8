#include "kernels/registry.hpp"

#include <array>

#include "fmha_jit/error.hpp"
#include "kernels/mma_sm80/family.hpp"
#include "kernels/reference/family.hpp"
#include "kernels/wgmma_sm90a/family.hpp"

namespace fmha_jit::kernels {

std::span<const KernelFamily* const> families() {
  // The Hopper kernels first where they serve the config, then the tensor-core kernels of every
  // NVIDIA arch, then the portable reference (the only one on AMD so far).
  static const std::array<const KernelFamily*, 3> list{&wgmma_sm90a::family(), &mma_sm80::family(),
                                                       &reference::family()};
  return list;
}

const KernelFamily& family_of(KernelImpl impl) {
  for (const KernelFamily* f : families()) {
    if (f->impl() == impl) return *f;
  }
  throw Error(ErrorCode::invalid_config, "impl " + std::string(to_string(impl)) +
                                             " has no kernel family: resolve the config "
                                             "(canonicalize) first");
}

std::vector<codegen::StageRole> stage_roles(const FmhaKernelConfig& c) {
  return family_of(c.impl).stage_roles(c);
}

codegen::RenderedEntry render_entry(const FmhaKernelConfig& c) {
  return codegen::render_entry(c, family_of(c.impl).entry_spec(c));
}

unsigned stage_dynamic_smem_bytes(const FmhaKernelConfig& c, codegen::StageRole role) {
  return family_of(c.impl).dynamic_smem_bytes(c, role);
}

std::vector<StageLaunch> plan_stages(const FmhaKernelConfig& c, const FmhaProblem& p,
                                     int multiprocessors) {
  return family_of(c.impl).plan_stages(c, p, multiprocessors);
}

BwdWorkspaceLayout bwd_workspace_layout(const FmhaKernelConfig& c, const FmhaProblem& p) {
  return family_of(c.impl).bwd_workspace_layout(c, p);
}

std::size_t required_alignment_bytes(const FmhaKernelConfig& c) {
  return family_of(c.impl).alignment_bytes();
}

}  // namespace fmha_jit::kernels
