// What a run-time compiler reports of one kernel's resources: produced by codegen/rtc, stored in a
// cache entry's manifest, shown by `fmha-jit cache`. It lives here, below both, so that the cache
// stores it without knowing the compilers.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

namespace fmha_jit::support {

// Per-kernel resources from the compiler's report (ptxas -v on NVIDIA; not reported by hipRTC).
struct KernelResources {
  std::string symbol;
  int registers = -1;
  int spill_store_bytes = -1;
  int spill_load_bytes = -1;
  int stack_frame_bytes = -1;
  int static_smem_bytes = -1;
  // ptxas serialised the kernel's wgmma instructions ("Potential Performance Loss", C7510-C7520):
  // each one then waits for the one before, so no MMA overlaps the softmax or another
  // warpgroup's work. Compiles and runs correctly, at a fraction of the speed; the rtc tests
  // require it false for every shipped Hopper kernel.
  bool wgmma_serialized = false;
};
nlohmann::json to_json(const KernelResources& r);
// Fields an older manifest lacks take their defaults.
KernelResources resources_from_json(const nlohmann::json& j);

}  // namespace fmha_jit::support
