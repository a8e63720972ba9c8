#include "dispatcher/environment.hpp"

#include <string_view>

#include "cache/cache_dir.hpp"
#include "cache/disk_cache.hpp"
#include "codegen/arch.hpp"
#include "codegen/rtc/compiler.hpp"
#include "support/env.hpp"

namespace fmha_jit::dispatch {

std::optional<std::string> arch_from_env() {
  return env::choice_value("FMHA_JIT_ARCH", codegen::arch_names());
}

std::optional<std::string> device_from_env() {
  static constexpr std::string_view kAccepted[] = {"none", "cuda", "hip"};
  return env::choice_value("FMHA_JIT_DEVICE", kAccepted);
}

void check_environment() {
  cache::cache_max_bytes_from_env();
  cache::DiskCache::lock_timeout();
  codegen::rtc::lineinfo_from_env();
  arch_from_env();
  device_from_env();
}

}  // namespace fmha_jit::dispatch
