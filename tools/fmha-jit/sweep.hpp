// Expansion of prebuild files: a JSON object whose list-valued fields expand to their cartesian
// product, or an array of such objects. Works on JSON, so it needs no edit when a field is added.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fmha_jit/config.hpp"

namespace fmha_jit::cli {

// Upper bound on one file's expansion: a typo such as a list of 1000 head dims should fail loudly
// rather than queue hours of compiles. 10000 kernels already take hours to compile on 2 cores; a
// bound of 100000 let the fuzzer build files whose mere validation took over 10 s.
inline constexpr std::size_t kMaxSweepPoints = 10000;

// Points of the sweep, each a JSON object with scalar fields, in file order then lexicographic
// order of the lists. Throws FieldError (invalid_config) for a malformed document.
std::vector<nlohmann::json> expand_sweep(const nlohmann::json& document);

struct SweepItem {
  nlohmann::json point;  // the expanded JSON object
  bool valid = false;
  FmhaKernelConfig config;    // canonical, when valid
  std::string skip_reason;    // the validation message, when not valid
  std::string impl_fallback;  // why auto passed over a family (kernels::ResolvedConfig), if so
};

// Expands, parses, validates and canonicalises; duplicates (same canonical config) are dropped.
std::vector<SweepItem> plan_sweep(const nlohmann::json& document);

}  // namespace fmha_jit::cli
