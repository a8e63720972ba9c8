// Where the on-disk cache lives.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>

namespace fmha_jit::cache {

// FMHA_JIT_CACHE_DIR, else $XDG_CACHE_HOME/fmha-jit, else $HOME/.cache/fmha-jit, else a folder
// under the system temp directory (no HOME: daemons, some CI sandboxes).
std::filesystem::path default_cache_root();

// FMHA_JIT_CACHE_MAX_BYTES (a plain byte count); nullopt = unbounded (unset or empty). Any other
// value that is not a byte count throws FieldError(invalid_argument) naming the variable.
std::optional<std::uint64_t> cache_max_bytes_from_env();

}  // namespace fmha_jit::cache
