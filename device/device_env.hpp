// The environment variables that choose the device and the arch it reports (README.md,
// Environment), parsed by support/env.hpp.
#pragma once

#include <optional>
#include <string>

namespace fmha_jit::device {

// FMHA_JIT_ARCH: an arch of the closed list (core/arch.hpp); nullopt when unset or empty.
// Throws FieldError(invalid_argument) naming the variable for any other value.
std::optional<std::string> arch_from_env();

// FMHA_JIT_DEVICE: none, cuda or hip; nullopt when unset or empty. Throws likewise.
std::optional<std::string> device_from_env();

}  // namespace fmha_jit::device
