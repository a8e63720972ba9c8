#include "device/device_env.hpp"

#include <string_view>

#include "core/arch.hpp"
#include "support/env.hpp"

namespace fmha_jit::device {

std::optional<std::string> arch_from_env() {
  return env::choice_value("FMHA_JIT_ARCH", arch_names());
}

std::optional<std::string> device_from_env() {
  static constexpr std::string_view kAccepted[] = {"none", "cuda", "hip"};
  return env::choice_value("FMHA_JIT_DEVICE", kAccepted);
}

}  // namespace fmha_jit::device
