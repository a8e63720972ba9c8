// libFuzzer target: config JSON parsing, validation and canonicalisation, i.e. everything a config
// file or API caller can hand the dispatcher before a compile. Bad input must end in a typed
// fmha_jit::Error (any other exception or a sanitizer report is a finding), and an accepted config
// must satisfy the invariants the cache key relies on.
#include <cstdint>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "codegen/render.hpp"
#include "fmha_jit/config.hpp"
#include "fmha_jit/error.hpp"
#include "kernels/registry.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, false);
  if (j.is_discarded()) return 0;
  try {
    const fmha_jit::FmhaKernelConfig config = fmha_jit::config_from_json(j);
    fmha_jit::validate(config);
    const fmha_jit::FmhaKernelConfig canonical = fmha_jit::canonicalize(config);
    // Canonicalisation is idempotent and survives a JSON round trip: otherwise two spellings of
    // one kernel would get two cache keys.
    if (!(fmha_jit::canonicalize(canonical) == canonical)) std::abort();
    if (!(fmha_jit::config_from_json(fmha_jit::to_json(canonical)) == canonical)) std::abort();
    if (fmha_jit::canonical_string(config) != fmha_jit::canonical_string(canonical)) std::abort();
    const auto entry = fmha_jit::kernels::render_entry(canonical);
    if (entry.symbols.empty() || entry.source.empty()) std::abort();
  } catch (const fmha_jit::Error&) {
    // The expected outcome for bad input: a typed error naming the field.
  }
  return 0;
}
