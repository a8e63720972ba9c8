#include "kernels/family.hpp"

namespace fmha_jit::kernels {

void FamilyLauncher::run_fwd(LaunchContext& launch, const FmhaProblem&, FmhaFwdParams& params) {
  launch.launch_stages(&params);
}

void FamilyLauncher::run_bwd(LaunchContext& launch, const FmhaProblem&, FmhaBwdParams& params) {
  launch.launch_stages(&params);
}

std::unique_ptr<FamilyLauncher> KernelFamily::make_launcher(const FmhaKernelConfig&) const {
  return std::make_unique<FamilyLauncher>();
}

}  // namespace fmha_jit::kernels
