// The environment variables that choose the device and the arch, and the one check of every
// variable the library and the CLI read (README.md, Environment), all parsed by support/env.hpp.
#pragma once

#include <optional>
#include <string>

namespace fmha_jit::dispatch {

// FMHA_JIT_ARCH: an arch of codegen's list (codegen/arch.hpp); nullopt when unset or empty.
// Throws FieldError(invalid_argument) naming the variable for any other value.
std::optional<std::string> arch_from_env();

// FMHA_JIT_DEVICE: none, cuda or hip; nullopt when unset or empty. Throws likewise.
std::optional<std::string> device_from_env();

// Reads every environment variable the library and the CLI take and throws the FieldError of the
// first that holds a value not accepted. setup_fmha_dispatcher and the CLI call it before any
// work, so a bad value fails them whichever path would have read it (a cache hit never reads the
// lock timeout, an sm_90 config never reads the arch), and never passes as a default.
void check_environment();

}  // namespace fmha_jit::dispatch
