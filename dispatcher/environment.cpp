#include "dispatcher/environment.hpp"

#include "cache/cache_dir.hpp"
#include "cache/disk_cache.hpp"
#include "codegen/rtc/compiler.hpp"
#include "device/device_env.hpp"
#include "support/env.hpp"

namespace fmha_jit::dispatch {

void check_environment() {
  cache::cache_max_bytes_from_env();
  cache::DiskCache::lock_timeout();
  codegen::rtc::lineinfo_from_env();
  device::arch_from_env();
  device::device_from_env();
}

}  // namespace fmha_jit::dispatch
