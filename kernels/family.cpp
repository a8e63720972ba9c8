#include "kernels/family.hpp"

#include <utility>

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

std::string packed_and_modifier_gap(const FmhaKernelConfig& c) {
  std::string asked;
  for (auto [on, name] :
       {std::pair{c.varlen, "varlen"}, {c.sinks, "sinks"}, {c.softcap, "softcap"}}) {
    if (on) asked += (asked.empty() ? "" : ", ") + std::string(name);
  }
  return asked.empty() ? asked : asked + " (mma_sm80 serves them)";
}

}  // namespace fmha_jit::kernels
