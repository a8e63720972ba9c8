// The closed list of target archs (the config's `arch`) and what the kernels need to know of each.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "fmha_jit/config.hpp"

namespace fmha_jit {

struct ArchInfo {
  std::string_view name;  // config spelling, also the RTC target: sm_90 -> -arch=sm_90
  Vendor vendor;
  int wave_size;                 // threads per warp (32) or wavefront (64)
  int max_smem_per_block_bytes;  // opt-in maximum of dynamic shared memory per block
  bool arch_specific;            // sm_90a: wgmma / setmaxnreg, runs on sm_90 only
};

const ArchInfo* find_arch(std::string_view name);
// The names of the list, in its order.
std::span<const std::string_view> arch_names();
// "sm_80, sm_86, ..." for error messages.
std::string accepted_archs();

}  // namespace fmha_jit
