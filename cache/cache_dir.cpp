#include "cache/cache_dir.hpp"

#include <spdlog/spdlog.h>

#include <charconv>
#include <cstdlib>
#include <cstring>

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
  const char* v = std::getenv("FMHA_JIT_CACHE_MAX_BYTES");
  if (!v || !*v) return std::nullopt;
  std::uint64_t bytes = 0;
  const auto [end, ec] = std::from_chars(v, v + std::strlen(v), bytes);
  if (ec != std::errc() || *end != '\0') {
    spdlog::warn("FMHA_JIT_CACHE_MAX_BYTES = \"{}\" ignored: expected a byte count", v);
    return std::nullopt;
  }
  return bytes;
}

}  // namespace fmha_jit::cache
