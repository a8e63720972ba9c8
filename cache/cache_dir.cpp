#include "cache/cache_dir.hpp"

#include <cstdlib>
#include <limits>

#include "support/env.hpp"

namespace fmha_jit::cache {

std::filesystem::path default_cache_root() {
  auto env = [](const char* name) -> const char* {
    const char* v = std::getenv(name);
    return v && *v ? v : nullptr;
  };
  if (const char* dir = env("FMHA_JIT_CACHE_DIR")) return dir;
  if (const char* xdg = env("XDG_CACHE_HOME")) return std::filesystem::path(xdg) / "fmha-jit";
  if (const char* home = env("HOME")) return std::filesystem::path(home) / ".cache" / "fmha-jit";
  return std::filesystem::temp_directory_path() / "fmha-jit-cache";
}

std::optional<std::uint64_t> cache_max_bytes_from_env() {
  return env::unsigned_value("FMHA_JIT_CACHE_MAX_BYTES", "bytes",
                             std::numeric_limits<std::uint64_t>::max());
}

}  // namespace fmha_jit::cache
