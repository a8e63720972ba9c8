// libFuzzer target: expansion of prebuild files (lists expand to a cartesian product, bounded by
// kMaxSweepPoints) and the validation of every expanded point. Bad input must end in a typed
// fmha_jit::Error; every point reported valid must be canonical.
#include <cstdint>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "fmha_jit/config.hpp"
#include "fmha_jit/error.hpp"
#include "tools/fmha-jit/sweep.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, false);
  if (j.is_discarded()) return 0;
  try {
    const auto items = fmha_jit::cli::plan_sweep(j);
    if (items.size() > fmha_jit::cli::kMaxSweepPoints) std::abort();
    for (const auto& item : items) {
      if (item.valid && !(fmha_jit::canonicalize(item.config) == item.config)) std::abort();
      if (!item.valid && item.skip_reason.empty()) std::abort();
    }
  } catch (const fmha_jit::Error&) {
  }
  return 0;
}
